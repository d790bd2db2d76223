"""The connection limit of a run's PostgreSQL role grows with its worker slots and always leaves a margin."""

from harness.workload.run_role import CONNECTIONS_MARGIN, connection_limit


def test_the_limit_is_a_share_per_worker_plus_a_margin():
    assert connection_limit(1) == 4 + CONNECTIONS_MARGIN
    assert connection_limit(8) == 32 + CONNECTIONS_MARGIN
    assert connection_limit(0) == connection_limit(1), "never below one slot's share"
