"""A run whose ledger another session locks: every wait of the harness ends, and a signal is heard.

A separate connection takes `LOCK TABLE ... IN ACCESS EXCLUSIVE MODE` on the run's ledger as soon as
the run has created it and holds it to the end: the workers' inserts wait, the time limit ends them,
and the audit's read of the ledger waits too. The run must end by itself with the read named as the
one that waited for a lock (lock_timeout), and a SIGTERM while the audit waits must end it at once as
`interrupted`, its report written. Without the bounds both runs hang: the subprocess timeouts below
turn a hang into a failure.
"""

import json
import os
import signal
import subprocess
import sys
import time

import psycopg
import pytest
from psycopg import sql

from tests.conftest import ROOT

pytestmark = pytest.mark.integration

HANG_S = 180     # far beyond what either run needs; reaching it means a wait was not bounded


def _ledgers(conn) -> set:
    return {r[0] for r in conn.execute("select table_name from information_schema.tables "
                                       "where table_schema = 'harness' and table_name like '%ledger%'")}


def _start_locked_run(stack, tmp_path):
    """A `harness run` whose ledger a separate session locks once it exists: (process, the locking
    connection, the report folder)."""
    from harness.core.procs import die_with_parent
    lock = psycopg.connect(stack["admin_dsn"], autocommit=False)
    before = _ledgers(lock)
    lock.rollback()
    out = tmp_path / "run"
    env = {**os.environ, **stack["env"], "HARNESS_HOME": str(tmp_path / "state")}
    proc = subprocess.Popen([sys.executable, "-m", "harness.cli", "run", "offset-before", "--messages", "20",
                             "--time-limit", "10", "--quiet", "--out", str(out)], env=env, cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, preexec_fn=die_with_parent)
    deadline = time.monotonic() + HANG_S
    while time.monotonic() < deadline and proc.poll() is None:
        new = _ledgers(lock) - before
        lock.rollback()
        if new:
            lock.execute(sql.SQL("lock table {} in access exclusive mode").format(
                sql.Identifier("harness", new.pop())))
            return proc, lock, out
        time.sleep(0.02)
    proc.kill()
    raise AssertionError(f"the run created no ledger: {proc.communicate()[1][-2000:]}")


def _audit_waits(admin_dsn: str) -> bool:
    """The run's audit is waiting for the lock (its ledger read, in pg_stat_activity)."""
    with psycopg.connect(admin_dsn, autocommit=True) as c:
        return bool(c.execute("select 1 from pg_stat_activity where wait_event_type = 'Lock' "
                              "and query like 'select message_id, amount from%'").fetchone())


def _finish(proc, lock):
    try:
        return proc.communicate(timeout=HANG_S)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        lock.close()


def test_a_locked_ledger_ends_the_audit_with_the_read_that_waited(stack, tmp_path):
    proc, lock, out = _start_locked_run(stack, tmp_path)
    stdout, stderr = _finish(proc, lock)
    assert "Traceback" not in stderr, stderr[-3000:]
    assert proc.returncode == 3, (proc.returncode, stderr[-3000:])
    report = json.loads((out / "report.json").read_text())
    assert report["verdict"] == "incomplete"
    errors = [e for e in report["verdict_detail"]["audit_errors"] if e.startswith("ledger:")]
    assert errors and "lock_timeout" in errors[0] and "lock timeout" in errors[0], report["verdict_detail"]
    assert report["counts"]["effects"] is None and report["counts"]["lost"] is None   # not read: unknown, never 0


def test_sigterm_while_the_audit_waits_for_a_lock_ends_the_run_interrupted(stack, tmp_path):
    proc, lock, out = _start_locked_run(stack, tmp_path)
    deadline = time.monotonic() + HANG_S
    while proc.poll() is None and not _audit_waits(stack["admin_dsn"]) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert proc.poll() is None, "the run ended before its audit waited for the lock"
    proc.send_signal(signal.SIGTERM)
    stdout, stderr = _finish(proc, lock)
    assert "Traceback" not in stderr, stderr[-3000:]
    assert proc.returncode == 130, (proc.returncode, stderr[-3000:])
    report = json.loads((out / "report.json").read_text())
    assert report["verdict"] == "interrupted"
    detail = report["verdict_detail"]
    assert "SIGTERM" in detail["reason"], detail
    assert any("interrupted" in e for e in detail["audit_errors"] if e.startswith("ledger:")), detail


def test_the_time_limit_stops_the_produce_phase(stack, tmp_path):
    """Far more payments than a second can produce: the run stops producing at its limit and counts as
    sent only what the broker acknowledged."""
    from tests.conftest import harness
    out = tmp_path / "run"
    messages = 300_000
    proc = harness("run", "offset-before", "--messages", str(messages), "--time-limit", "1", "--quiet",
                   "--out", str(out), env={**stack["env"], "HARNESS_HOME": str(tmp_path / "state")}, timeout=HANG_S)
    assert "Traceback" not in proc.stderr, proc.stderr[-3000:]
    assert proc.returncode == 3, (proc.returncode, proc.stderr[-3000:])
    report = json.loads((out / "report.json").read_text())
    reason = report["verdict_detail"]["reason"]
    assert report["verdict"] == "incomplete" and "while producing" in reason, reason
    sent = report["counts"]["sent"]
    assert sent < messages and f"{sent} of {messages} sent" in reason, (sent, reason)
