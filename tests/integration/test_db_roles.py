"""The local PostgreSQL's roles on the real server: runs hold no superuser, and no SQL from a report runs.

A report.json is a file anyone can edit. Before the roles, `harness audit` ran a report's
`params.audit_sql` as the stack's superuser `harness`, so `COPY ... TO PROGRAM` ran a program as the
`postgres` user. Now `harness audit` runs only the query its command line gives, as `harness_audit`
(SELECT on the `harness` schema, read-only), and the run role `harness` holds no superuser and no
server role either. A state folder from an older harness, where `harness` was the bootstrap
superuser, is put right at the next start.
"""

import json
import shutil
import uuid
from pathlib import Path

import psycopg
import pytest

from harness.stack import ports
from harness.stack.local_postgres import ADMIN, AUDITOR, USER, LocalPostgres, find_bindir
from harness.stack import local_postgres
from tests.conftest import harness, searchable_dir

pytestmark = pytest.mark.integration

SERVER_ROLES = ("pg_execute_server_program", "pg_read_server_files", "pg_write_server_files")


def privileges(dsn: str, role: str) -> dict:
    with psycopg.connect(dsn) as conn:
        row = conn.execute("""select rolsuper, rolcreaterole, rolcreatedb, rolreplication, rolbypassrls,
                                     (select count(*) from pg_auth_members m where m.member = r.oid)
                              from pg_roles r where rolname = %s""", (role,)).fetchone()
        held = {s: conn.execute("select pg_has_role(%s, %s, 'USAGE') or pg_has_role(%s, %s, 'MEMBER')",
                                (role, s, role, s)).fetchone()[0] for s in SERVER_ROLES}
    return {"attributes": row[:5], "memberships": row[5], "server_roles": held}


def assert_least_privilege(dsn: str) -> None:
    for role in (USER, AUDITOR):
        p = privileges(dsn, role)
        assert p == {"attributes": (False,) * 5, "memberships": 0, "server_roles": dict.fromkeys(SERVER_ROLES, False)}, \
            f"{role}: {p}"


def test_runs_connect_as_a_role_that_is_no_superuser_and_holds_no_server_role(stack):
    with psycopg.connect(stack["dsn"]) as conn:
        assert conn.execute("select current_user").fetchone()[0] == USER
    assert_least_privilege(stack["dsn"])
    with psycopg.connect(stack["dsn"], autocommit=True) as conn:
        for refused in ("COPY (select 1) TO PROGRAM 'true'", "select pg_read_file('/etc/hostname')",
                        "create schema someone_elses", "create role someone", "create database other"):
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                conn.execute(refused)
        owner = conn.execute("select pg_get_userbyid(nspowner) from pg_namespace where nspname = 'harness'").fetchone()
        assert owner == (USER,)


def test_the_next_up_takes_back_superuser_and_server_roles_given_to_the_run_role(stack):
    with psycopg.connect(stack["admin_dsn"], autocommit=True) as conn:
        conn.execute("alter role harness superuser createrole createdb")
        conn.execute("grant pg_execute_server_program, pg_read_server_files to harness")
        conn.execute("grant pg_write_server_files to harness_audit")
    try:
        up = harness("up", env=stack["env"])
        assert up.returncode == 0, up.stderr[-2000:]
        assert_least_privilege(stack["dsn"])
    finally:
        with psycopg.connect(stack["admin_dsn"], autocommit=True) as conn:
            conn.execute("alter role harness nosuperuser nocreaterole nocreatedb")
            for role in ("harness", "harness_audit"):
                for (granted,) in conn.execute("select pg_get_userbyid(roleid) from pg_auth_members where "
                                               "member = (select oid from pg_roles where rolname = %s)",
                                               (role,)).fetchall():
                    conn.execute(f'revoke "{granted}" from {role}')


@pytest.fixture(scope="module")
def dedupe_run(stack, tmp_path_factory):
    out = tmp_path_factory.mktemp("roles") / "run"
    run = harness("run", "dedupe", "--messages", "60", "--seed", "5", "--quiet", "--out", str(out),
                  env=stack["env"], timeout=600)
    assert run.returncode == 0, run.stderr[-2000:]
    return out


def test_audit_never_runs_a_program_a_report_names_nor_one_given_on_its_command_line(stack, dedupe_run, tmp_path):
    marker = Path("/tmp") / f"harness-test-program-ran-{uuid.uuid4().hex[:8]}"   # /tmp: postgres may write it
    copy = f"COPY (select 1) TO PROGRAM 'touch {marker}'"
    forged = tmp_path / "forged"
    shutil.copytree(dedupe_run, forged)
    d = json.loads((forged / "report.json").read_text())
    d["params"]["audit_sql"] = copy
    (forged / "report.json").write_text(json.dumps(d))
    try:
        skipped = harness("audit", str(forged), env=stack["env"])
        assert not marker.exists(), "harness audit ran a program named by a report"
        assert skipped.returncode == 2 and "the ledger is not recounted" in skipped.stderr, skipped.stderr
        assert "Traceback" not in skipped.stderr
        given = harness("audit", str(forged), "--audit-sql", copy, env=stack["env"])
        assert not marker.exists(), "harness audit --audit-sql ran a program"
        assert given.returncode == 2 and "pg_execute_server_program" in given.stderr, given.stderr
        write = harness("audit", str(forged), "--audit-sql",
                        f"select message_id, amount from {d['stack']['ledger_table']}; delete from "
                        f"{d['stack']['ledger_table']}", env=stack["env"])
        assert write.returncode == 2, write.stderr
        # The read-only role reads the run's tables: the ledger counted by a query given again agrees.
        ok = harness("audit", str(forged), "--json", "--audit-sql",
                     f"select message_id, amount from {d['stack']['ledger_table']}", env=stack["env"])
        assert ok.returncode == 0, ok.stdout + ok.stderr
        rows = {(r["store"], r["metric"]): r for r in json.loads(ok.stdout)["forged"]}
        assert rows[("ledger", "effects")]["recounted"] == d["counts"]["effects"]
    finally:
        marker.unlink(missing_ok=True)


def test_the_audit_role_reads_only_the_harness_schema(stack):
    with psycopg.connect(stack["admin_dsn"], autocommit=True) as conn:
        conn.execute("create table if not exists public.not_for_audits (secret text)")
    try:
        with psycopg.connect(LocalPostgres(Path(stack["env"]["HARNESS_HOME"])).audit_dsn(
                json.loads((Path(stack["env"]["HARNESS_HOME"]) / "stack.json").read_text())["postgres_port"])) as conn:
            assert conn.execute("show transaction_read_only").fetchone() == ("on",)
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                conn.execute("select * from public.not_for_audits")
            conn.rollback()
            conn.execute("set transaction read write")      # read-only is a default; even without it:
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                conn.execute("create temporary table t (a int)")
    finally:
        with psycopg.connect(stack["admin_dsn"], autocommit=True) as conn:
            conn.execute("drop table public.not_for_audits")


def test_a_state_folder_whose_harness_role_is_the_bootstrap_superuser_is_put_right(monkeypatch):
    """An older harness ran `initdb -U harness`: the run role was the cluster's bootstrap superuser (it
    cannot merely lose SUPERUSER: it owns the catalogs). The next start renames it, unable to log in, and
    hands the schema and the run's tables to a new, plain `harness`."""
    home = searchable_dir("harness-test-oldroles-")
    pg, bindir = LocalPostgres(home), find_bindir()
    port, _ = ports.choose(ports.any_free())
    try:
        monkeypatch.setattr(local_postgres, "ADMIN", USER)            # initdb as the older harness did
        monkeypatch.setattr(pg, "admin_password", pg.password)
        pg.init(bindir)
        monkeypatch.undo()
        assert not pg.admin_password_file.exists()
        pg.start(bindir, port, "user")
        with psycopg.connect(pg.dsn(port).rsplit("/", 1)[0] + "/postgres", autocommit=True) as conn:
            conn.execute("create database harness")
        with psycopg.connect(pg.dsn(port), autocommit=True) as conn:
            conn.execute("create schema harness")
            conn.execute("create table harness.ledger_rold (id bigserial primary key, message_id text)")
            conn.execute("insert into harness.ledger_rold (message_id) values ('pay-1')")
            assert conn.execute("select rolsuper from pg_roles where rolname = current_user").fetchone() == (True,)
        notes = pg.ensure_roles(port)
        assert len(notes) == 1 and "was a superuser" in notes[0]
        assert_least_privilege(pg.admin_dsn(port))
        with psycopg.connect(pg.dsn(port), autocommit=True) as conn:
            conn.execute("insert into harness.ledger_rold (message_id) values ('pay-2')")   # its sequence too
            assert conn.execute("select count(*) from harness.ledger_rold").fetchone() == (2,)
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                conn.execute("COPY (select 1) TO PROGRAM 'true'")
        with psycopg.connect(pg.admin_dsn(port, "postgres")) as conn:
            old = conn.execute("select rolname, rolcanlogin from pg_roles where oid = 10").fetchone()
            assert old == ("harness_bootstrap", False)
            assert conn.execute("select rolsuper from pg_roles where rolname = %s", (ADMIN,)).fetchone() == (True,)
        assert pg.ensure_roles(port) == [], "a second start changes nothing"
    finally:
        pg.stop()
        shutil.rmtree(home, ignore_errors=True)
