"""The name of a run's PostgreSQL role: derived from the run id, within PostgreSQL's 63 bytes, unique."""

from harness.workload import run_role
from harness.workload.naming import PG_IDENTIFIER_MAX


def test_a_role_name_is_the_run_id_made_a_plain_identifier():
    assert run_role.role_name("20261207T054449.123-dedupe-3f9a2c") == "harness_run_r20261207t054449_123_dedupe_3f9a2c"


def test_long_run_ids_stay_within_63_bytes_and_apart():
    base = "20261207T054449.123-bench-" + "x" * 120
    a, b = run_role.role_name(base + "a"), run_role.role_name(base + "b")
    assert len(a) <= PG_IDENTIFIER_MAX and len(b) <= PG_IDENTIFIER_MAX
    assert a != b and a.startswith(run_role.PREFIX)


def test_hostile_characters_never_reach_the_name():
    name = run_role.role_name('20261207T054449.123-x"; drop role harness; --')
    assert set(name) <= set("abcdefghijklmnopqrstuvwxyz0123456789_")


def test_a_role_the_end_of_the_run_could_not_drop_is_not_reported_as_dropped():
    """PostgreSQL gone when the run ends (SIGKILLed mid-run): the report said "dropped when the run ends" of a
    role that could still log in; now it says it was not, and how to drop it."""
    from types import SimpleNamespace
    from harness.workload import run_role
    said = []
    run = SimpleNamespace(stack=SimpleNamespace(role_maker_dsn="host=127.0.0.1 port=1 dbname=x user=x connect_timeout=2"),
                          names=SimpleNamespace(run_id="20261207T070021.811-custom-8afe3a"), log=said.append,
                          db_role=run_role.Grant("dsn", "harness_run_x", "harness_run_x (made for this run: only its "
                                                 "own tables; dropped when the run ends)"))
    run_role.let_go(run)
    assert "NOT dropped" in run.db_role.said and "dropped when the run ends" not in run.db_role.said
    assert "harness clean 20261207T070021.811-custom-8afe3a" in run.db_role.said and said and run.db_role.dropped
