"""Each run's consumers connect as a PostgreSQL role of that run, on the real server.

A consumer that connected as the stack's role `harness` could mark every run finished in
`harness.runs` (and have `harness clean --all` drop a live run's data) and insert rows into
another run's ledger (and falsify its audit). Here a real custom consumer tries both before it
does its work: both are refused, the other run still audits clean, and the role is gone once the
run has ended; `harness clean` drops a role a killed run left behind, and only the harness's.
"""

import json
import sys
import uuid

import psycopg
import pytest

from harness.workload import run_role
from tests.conftest import harness
from tests.integration.test_custom import python_example, run_custom

pytestmark = pytest.mark.integration

# Tries what no consumer may do, writes what happened (a line of JSON per attempt), then becomes
# the correct example consumer.
PROBE = r'''
import json, os, sys
import psycopg
out, other = os.environ["TEST_PROBE_OUT"], os.environ["TEST_OTHER_LEDGER"]
seen = {}
with psycopg.connect(os.environ["HARNESS_POSTGRES_DSN"], autocommit=True) as db:
    seen["user"] = db.execute("select current_user").fetchone()[0]
    for name, query in (("runs", "update harness.runs set finished_at = clock_timestamp()"),
                        ("other_ledger", f"insert into {other} (message_id, amount) values ('forged', 1)"),
                        ("create_role", "create role forged_by_a_consumer")):
        try:
            db.execute(query)
            seen[name] = "done"
        except psycopg.Error as e:
            seen[name] = e.sqlstate
with open(out, "a") as f:
    f.write(json.dumps(seen) + "\n")
os.execv(sys.executable, [sys.executable, sys.argv[1]])
'''


def role_exists(dsn: str, role: str) -> bool:
    with psycopg.connect(dsn) as conn:
        return conn.execute("select 1 from pg_roles where rolname = %s", (role,)).fetchone() is not None


def probed_run(stack, tmp_path, probe_source: str, env_of) -> tuple[dict, dict, list]:
    """(other, run, attempts): a finished run of the correct example (`other`), then a run whose consumer first
    runs `probe_source` (its environment plus `env_of(other)` and TEST_PROBE_OUT), which appends a line of JSON
    per attempt, and then becomes the correct example; `attempts` are those lines."""
    other = run_custom(stack, tmp_path / "other", python_example("correct.py"), "--kills", "0", "--messages", "50")
    probe, seen = tmp_path / "probe.py", tmp_path / "seen.jsonl"
    probe.write_text(probe_source)
    d = run_custom(stack, tmp_path / "run", f"{sys.executable} {probe} {python_example('correct.py').split()[-1]}",
                   "--kills", "2", "--messages", "300", env={"TEST_PROBE_OUT": str(seen), **env_of(other)})
    attempts = [json.loads(line) for line in seen.read_text().splitlines()]
    assert attempts, "the consumer never ran"
    return other, d, attempts


def test_a_consumer_may_not_touch_the_registry_or_another_runs_ledger(stack, tmp_path):
    _, d, attempts = probed_run(stack, tmp_path, PROBE,
                                lambda other: {"TEST_OTHER_LEDGER": other["stack"]["ledger_table"]})
    role = run_role.role_name(d["run_id"])
    for a in attempts:          # 42501: insufficient_privilege
        assert a == {"user": role, "runs": "42501", "other_ledger": "42501", "create_role": "42501"}, a
    assert d["stack"]["consumers_postgres_role"].startswith(role + " ")
    assert d["counts"]["duplicates"] == d["counts"]["lost"] == 0
    assert not role_exists(stack["dsn"], role), "the run's role outlived the run"
    with psycopg.connect(stack["dsn"]) as conn:
        assert conn.execute("select count(*) from harness.runs where run_id = %s and finished_at is not null",
                            (d["run_id"],)).fetchone()[0] == 1
    audit = harness("audit", str(tmp_path / "other" / "report"), env=stack["env"])
    assert audit.returncode == 0, audit.stdout + audit.stderr


def test_clean_drops_a_role_a_killed_run_left_and_no_other(stack):
    run_id = f"20261207T000000.000-probe-{uuid.uuid4().hex[:6]}"
    role = run_role.role_name(run_id)
    grant = run_role.create(stack["admin_dsn"], stack["dsn"], run_id, [])
    assert grant.role == role and role_exists(stack["dsn"], role)
    decoy = f"{run_role.PREFIX}{uuid.uuid4().hex[:8]}"     # named like ours, made by someone else
    with psycopg.connect(stack["admin_dsn"], autocommit=True) as conn:
        conn.execute(f'create role "{decoy}"')
    try:
        cleaned = harness("clean", run_id, env=stack["env"])
        assert cleaned.returncode == 0, cleaned.stdout + cleaned.stderr
        assert not role_exists(stack["dsn"], role)
        assert role_exists(stack["dsn"], decoy), "a role the harness did not make was dropped"
    finally:
        with psycopg.connect(stack["admin_dsn"], autocommit=True) as conn:
            conn.execute(f'drop role if exists "{decoy}"')
            if role_exists(stack["admin_dsn"], role):
                run_role.drop(stack["admin_dsn"], run_id)


def test_a_dsn_whose_role_may_not_make_roles_falls_back_and_says_what_it_gives_up(stack):
    run_id = f"20261207T000000.000-probe-{uuid.uuid4().hex[:6]}"
    grant = run_role.create(stack["dsn"], stack["dsn"], run_id, [])   # `harness` has no CREATEROLE
    assert grant.role is None and grant.dsn == stack["dsn"]
    assert "no role of its own" in grant.said and "mark runs finished" in grant.said
    assert not role_exists(stack["dsn"], run_role.role_name(run_id))


def test_a_role_left_by_an_earlier_attempt_of_the_run_id_is_replaced(stack):
    run_id = f"20261207T000000.000-probe-{uuid.uuid4().hex[:6]}"
    first = run_role.create(stack["admin_dsn"], stack["dsn"], run_id, [])
    second = run_role.create(stack["admin_dsn"], stack["dsn"], run_id, [])
    try:
        assert first.role == second.role == run_role.role_name(run_id), second.said
        with psycopg.connect(second.dsn) as conn:
            assert conn.execute("select current_user").fetchone()[0] == second.role
        with pytest.raises(psycopg.OperationalError):
            psycopg.connect(first.dsn, connect_timeout=10).close()
    finally:
        run_role.drop(stack["admin_dsn"], run_id)


def test_clean_all_drops_the_roles_of_runs_not_live_and_keeps_a_live_runs(stack):
    from harness.workload import registry
    live, orphan = (f"20261207T000000.000-probe-{uuid.uuid4().hex[:6]}" for _ in range(2))
    registry.register(stack["dsn"], live)              # this process: a live run
    try:
        for run_id in (live, orphan):
            assert run_role.create(stack["admin_dsn"], stack["dsn"], run_id, []).role
        cleaned = harness("clean", "--all", env=stack["env"], timeout=180)
        assert cleaned.returncode == 0, cleaned.stdout + cleaned.stderr
        assert role_exists(stack["dsn"], run_role.role_name(live)), "a live run's role was dropped"
        assert not role_exists(stack["dsn"], run_role.role_name(orphan))
    finally:
        run_role.drop(stack["admin_dsn"], live)
        registry.forget(stack["dsn"], [live])


def test_a_run_role_may_open_only_its_connection_limit(stack):
    """A consumer that opens connections in a loop gets its run's share (sized to the run's workers), not
    the server's slots that other runs and the harness need: the next one is refused (53300)."""
    run_id = f"20261207T000000.000-probe-{uuid.uuid4().hex[:6]}"
    grant = run_role.create(stack["admin_dsn"], stack["dsn"], run_id, [], workers=2)
    limit = run_role.connection_limit(2)
    held = []
    try:
        with psycopg.connect(stack["dsn"]) as conn:
            assert conn.execute("select rolconnlimit from pg_roles where rolname = %s",
                                (grant.role,)).fetchone()[0] == limit
        for _ in range(limit):
            held.append(psycopg.connect(grant.dsn, connect_timeout=10))
        with pytest.raises(psycopg.OperationalError) as refused:
            held.append(psycopg.connect(grant.dsn, connect_timeout=10))
        assert "too many connections for role" in str(refused.value)
        with psycopg.connect(stack["dsn"]) as conn:          # the stack's own role still gets in
            assert conn.execute("select 1").fetchone() == (1,)
    finally:
        for c in held:
            c.close()
        run_role.drop(stack["admin_dsn"], run_id)


def test_a_role_that_can_be_made_but_fails_ends_the_run_instead_of_falling_back(stack):
    """A grant the server refuses (here: on a table that does not exist) while the maker may make roles: the run
    used to go on with the stack's own login (the owner of every run's tables) and a warning. Now it is one
    clear error and no half-made role stays."""
    from harness.core.errors import HarnessError
    run_id = f"20261207T000000.000-probe-{uuid.uuid4().hex[:6]}"
    with pytest.raises(HarnessError) as e:
        missing = f"harness.ledger_missing_{uuid.uuid4().hex[:6]}"
        run_role.create(stack["admin_dsn"], stack["dsn"], run_id, [missing])
    assert "could not make the run's PostgreSQL role" in str(e.value) and "owns the registry" in str(e.value)
    assert not role_exists(stack["admin_dsn"], run_role.role_name(run_id))
