"""The connection limit of a run's PostgreSQL role grows with its worker slots and always leaves a margin."""

from harness.workload.run_role import CONNECTIONS_MARGIN, connection_limit


def test_the_limit_is_a_share_per_worker_plus_a_margin():
    assert connection_limit(1) == 4 + CONNECTIONS_MARGIN
    assert connection_limit(8) == 32 + CONNECTIONS_MARGIN
    assert connection_limit(0) == connection_limit(1), "never below one slot's share"


def test_the_limit_never_reaches_the_servers_own():
    """--workers 48 gave 202, more than the local server's max_connections (200): one consumer could take
    every slot the harness's audit and other runs need."""
    from harness.stack.local_postgres import SERVER_SETTINGS as SETTINGS
    from harness.workload.run_role import CONNECTIONS_AT_MOST
    most = int(SETTINGS["max_connections"])
    assert max(connection_limit(w) for w in range(1, 65)) == CONNECTIONS_AT_MOST <= most - 50
