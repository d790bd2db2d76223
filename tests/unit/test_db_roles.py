"""SQL read from a report is never run, and root's chown of the Postgres folder never follows a link.

Pure logic and the real filesystem: which query `harness audit` would run for a report (only the one
given on its command line), the "Audit it yourself" line a custom run's report ends with, what the
stack exposes of its read-only role, and `_chown` on a folder holding planted links.
"""

import os
import pwd
from pathlib import Path

import pytest

from harness.cli.commands.audit import _effects_query
from harness.reporting.recount_by_hand import commands
from harness.stack.local_postgres import LocalPostgres
from harness.stack.stack import Stack
from tests.unit.sample_report import sample

COPY = "COPY (select 1) TO PROGRAM 'touch /tmp/x'"


def test_a_reports_own_audit_sql_is_never_the_query_harness_audit_runs():
    d = sample("custom")
    d["params"]["audit_sql"] = COPY
    notes = []
    assert _effects_query(Path("r"), d, None, notes) == (None, True)
    assert len(notes) == 1 and notes[0][0] == "error" and "not recounted" in notes[0][1]
    assert COPY not in notes[0][1], "the report's text is not echoed"
    notes = []
    assert _effects_query(Path("r"), d, "select a, b from harness.t", notes) == ("select a, b from harness.t", False)
    assert [k for k, _ in notes] == ["note"]          # it differs from the report's: said, and the given one used
    notes = []
    assert _effects_query(Path("r"), d, COPY, notes) == (COPY, False) and notes == []
    plain = sample("dedupe")
    plain["params"].pop("audit_sql", None)
    assert _effects_query(Path("r"), plain, None, notes) == (None, False) and notes == []


def test_a_custom_reports_last_command_asks_for_its_query_again():
    d = sample("custom")
    d["params"]["audit_sql"] = "select pid, cents from harness.effects where x = 'it''s'"
    last = dict(commands(d))["all of the above, compared with this report"]
    assert last == f"harness audit {d['run_id']} --audit-sql '<your query>'"
    assert not any("harness.effects" in cmd for _, cmd in commands(d))


def test_the_read_only_roles_dsn_never_reaches_public_output(tmp_path):
    pg = LocalPostgres(tmp_path)
    st = Stack(kind="local", bootstrap_servers="127.0.0.1:1", postgres_dsn=pg.dsn(5), owned=True,
               audit_dsn=pg.audit_dsn(5))
    assert "audit_dsn" not in st.public() and pg.audit_password() not in repr(st)
    assert pg.audit_password() != pg.password() != pg.admin_password()
    for f in (pg.password_file, pg.admin_password_file, pg.audit_password_file):
        assert oct(f.stat().st_mode & 0o777) == "0o600"


def test_a_password_file_is_never_made_or_read_through_a_planted_link(tmp_path):
    target = tmp_path / "victim"
    target.write_text("root's\n")
    pg = LocalPostgres(tmp_path)
    pg.admin_password_file.symlink_to(target)
    from harness.core.errors import HarnessError
    with pytest.raises(HarnessError, match="symbolic link"):
        pg.admin_password()
    assert target.read_text() == "root's\n"


@pytest.mark.skipif(os.geteuid() != 0, reason="only root gives the folder to the postgres user")
def test_chown_of_the_postgres_folder_never_follows_a_planted_link(tmp_path):
    try:
        pw = pwd.getpwnam("postgres")
    except KeyError:
        pytest.skip("no postgres user")
    victim_file, victim_dir = tmp_path / "root-owned.conf", tmp_path / "root-owned-dir"
    victim_file.write_text("x\n")
    victim_dir.mkdir()
    (victim_dir / "inside").write_text("y\n")
    pg = LocalPostgres(tmp_path / "state")
    pg.home.mkdir(parents=True)
    (pg.home / "data").mkdir()
    (pg.home / "server.log").symlink_to(victim_file)
    (pg.home / "data" / "linked-dir").symlink_to(victim_dir)
    pg._chown(pg.home)
    for victim in (victim_file, victim_dir, victim_dir / "inside"):
        assert victim.stat().st_uid == 0, f"{victim} was given to postgres through a link"
    assert os.lstat(pg.home / "server.log").st_uid == pw.pw_uid       # the link itself is the folder's
    assert (pg.home / "data").stat().st_uid == pw.pw_uid


@pytest.mark.skipif(os.geteuid() != 0, reason="only root gives the folder to the postgres user")
def test_chown_refuses_a_postgres_folder_that_is_itself_a_link(tmp_path):
    from harness.core.errors import HarnessError
    victim = tmp_path / "elsewhere"
    victim.mkdir()
    (tmp_path / "state").mkdir()
    pg = LocalPostgres(tmp_path / "state")
    pg.home.symlink_to(victim)
    with pytest.raises(HarnessError, match="not a folder"):
        pg._chown(pg.home)
    assert victim.stat().st_uid == 0


def test_an_empty_audit_sql_is_one_line_and_exit_2(tmp_path):
    import json
    from tests.conftest import harness
    run = tmp_path / "run"
    run.mkdir()
    (run / "report.json").write_text(json.dumps(sample("custom")))
    proc = harness("audit", str(run), "--audit-sql", "  ", env={"HARNESS_HOME": str(tmp_path / "state")})
    assert proc.returncode == 2 and proc.stderr.strip() == "error: --audit-sql is empty", proc.stderr


def test_the_server_log_is_never_created_or_touched_through_a_planted_link(tmp_path):
    pg = LocalPostgres(tmp_path / "state")
    pg.home.mkdir(parents=True)
    target = tmp_path / "would-be-created"
    pg.log.symlink_to(target)
    pg._own_log()
    assert not target.exists() and not pg.log.is_symlink() and pg.log.is_file()
