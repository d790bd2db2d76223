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
