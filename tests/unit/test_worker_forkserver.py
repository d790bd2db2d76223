"""The worker fork server, with real forked processes and real signals (no Kafka, no Postgres)."""

import json
import os
import select
import signal
import sys
import time

import pytest

from harness.core.errors import HarnessError
from harness.workers.supervisor import Supervisor
from harness.workers.forkserver import ForkServer
from tests.conftest import ROOT, pids_where

STANDIN = "tests.unit.forked_standin"


@pytest.fixture
def server(tmp_path, monkeypatch):
    monkeypatch.chdir(ROOT)                 # the stand-in module is imported from the repository
    s = ForkServer(tmp_path, tmp_path / "forkserver.log")
    yield s
    s.close()


def server_with_setproctitle(tmp_path, monkeypatch, source: str) -> ForkServer:
    """A server whose `setproctitle` is a stand-in module with this source (it fails, or is slow)."""
    monkeypatch.chdir(ROOT)
    standin = tmp_path / "standin-modules"
    standin.mkdir()
    (standin / "setproctitle.py").write_text(source)
    monkeypatch.setenv("PYTHONPATH", f"{standin}:{ROOT}")
    return ForkServer(tmp_path, tmp_path / "forkserver.log")


def spawn(server, tmp_path, *args, env=None, stdin_pipe=False):
    return server.spawn([sys.executable, "-m", STANDIN, *args], env or {}, tmp_path / "w.log", stdin_pipe)


def test_exit_statuses_are_reported_as_popen_reports_them(server, tmp_path):
    assert spawn(server, tmp_path, "exit-0").wait(timeout=30) == 0
    assert spawn(server, tmp_path, "exit-3").wait(timeout=30) == 3
    assert spawn(server, tmp_path, "crash").wait(timeout=30) == -signal.SIGKILL
    failed = spawn(server, tmp_path, "raise")
    assert failed.wait(timeout=30) == 1
    assert "a stand-in's own error" in (tmp_path / "w.log").read_text()


def test_kill_reaches_the_process_and_never_a_recycled_pid(server, tmp_path):
    p = spawn(server, tmp_path, "sleep")
    assert p.poll() is None
    p.kill()
    assert p.wait(timeout=30) == -signal.SIGKILL
    p.kill()                      # gone and reaped: a no-op, whatever process has that pid now
    assert p.returncode == -signal.SIGKILL


def test_a_spare_reads_its_line_from_the_stdin_pipe(server, tmp_path):
    out = tmp_path / "line"
    p = spawn(server, tmp_path, "standby", str(out), stdin_pipe=True)
    p.stdin.write(b'["the", "real", "command"]\n')
    p.stdin.close()
    assert p.wait(timeout=30) == 0
    assert json.loads(out.read_text()) == ["the", "real", "command"]


def test_the_child_gets_exactly_the_environment_and_argv_it_was_given(server, tmp_path):
    out = tmp_path / "env"
    assert spawn(server, tmp_path, "env", str(out), env={"HARNESS_STANDIN": "given"}).wait(timeout=30) == 0
    assert out.read_text() == "given|False"
    out = tmp_path / "argv"
    assert spawn(server, tmp_path, "argv", str(out)).wait(timeout=30) == 0
    assert json.loads(out.read_text())[1:] == ["argv", str(out)]


def test_ps_shows_each_workers_own_command_line(server, tmp_path):
    marker = f"harness-forked-{os.getpid()}-{time.time()}"
    p = spawn(server, tmp_path, "sleep", marker)
    try:
        deadline = time.time() + 30
        while p.pid not in pids_where(lambda cmd: marker in cmd) and time.time() < deadline:
            time.sleep(0.02)
        cmd = open(f"/proc/{p.pid}/cmdline", "rb").read().replace(b"\0", b" ").decode()
        assert f"-m {STANDIN} sleep {marker}" in cmd
    finally:
        p.kill()
        p.wait(timeout=30)


@pytest.mark.parametrize("how", ["close", "sigkill"])
def test_workers_die_with_their_server(tmp_path, monkeypatch, how):
    monkeypatch.chdir(ROOT)
    s = ForkServer(tmp_path, tmp_path / "forkserver.log")
    marker = f"harness-orphan-{how}-{os.getpid()}-{time.time()}"
    procs = [spawn(s, tmp_path, "sleep", marker) for _ in range(3)]
    deadline = time.time() + 30
    while len(pids_where(lambda cmd: marker in cmd)) < 3 and time.time() < deadline:
        time.sleep(0.02)
    assert len(pids_where(lambda cmd: marker in cmd)) == 3
    if how == "close":
        s.close()
    else:
        s.proc.kill()             # the server SIGKILLed: its children still die (PR_SET_PDEATHSIG)
        s.proc.wait()
    deadline = time.time() + 30
    while pids_where(lambda cmd: marker in cmd) and time.time() < deadline:
        time.sleep(0.05)
    assert not pids_where(lambda cmd: marker in cmd)
    assert [p.wait(timeout=30) for p in procs] == [-signal.SIGKILL] * 3
    s.close()


def test_a_server_that_died_is_one_clear_error_on_the_next_spawn(tmp_path, monkeypatch):
    monkeypatch.chdir(ROOT)
    s = ForkServer(tmp_path, tmp_path / "forkserver.log")
    s.proc.kill()
    s.proc.wait()
    with pytest.raises(HarnessError, match="fork server stopped answering"):
        spawn(s, tmp_path, "exit-0")
    s.close()


def test_the_supervisor_restarts_forked_workers_after_planned_crashes(tmp_path, monkeypatch):
    """The supervisor's restart logic is the same for forked workers: two crashes, then success."""
    monkeypatch.chdir(ROOT)
    log, events = tmp_path / "crash-log.jsonl", tmp_path / "events.jsonl"

    def command(slot):
        act = "crash" if slot.attempt < 3 else "exit-0"
        if act == "crash":     # the crash record a kill point writes before its SIGKILL
            with open(log, "a") as f:
                f.write(json.dumps({"point": "p", "message_id": "m", "worker": "w0", "attempt": slot.attempt,
                                    "time": time.time()}) + "\n")
        return [sys.executable, "-m", STANDIN, act]
    r = Supervisor(tmp_path, 1, command, {}, 60, log, events, forked=True).run()
    assert (r.status, r.restarts, r.unplanned_deaths) == ("complete", 2, [])
    assert (tmp_path / "workers" / "forkserver.log").exists()
    assert not pids_where(lambda cmd: "worker_forkserver" in cmd and str(tmp_path) in cmd)


def test_a_flooding_forked_worker_fills_its_log_only_to_the_cap(tmp_path, monkeypatch):
    """Forked workers write to their slot's capped log too (logcap.py): 20 MB of output leaves 5 MiB and one
    marker line, and the supervisor counts what was dropped."""
    from harness.workers.logcap import CAP_BYTES
    monkeypatch.chdir(ROOT)
    sup = Supervisor(tmp_path, 1, lambda s: [sys.executable, "-m", STANDIN, "flood"], {}, 60,
                     tmp_path / "crash-log.jsonl", tmp_path / "events.jsonl", forked=True)
    r = sup.run()
    assert r.status == "complete"
    assert r.log_bytes_dropped == {"w0": 20_000_000 + len("the last line\n") - CAP_BYTES}
    data = (tmp_path / "workers" / "w0.log").read_bytes()
    assert len(data) < CAP_BYTES + 200 and data[CAP_BYTES:].startswith(b"[harness] ")
    assert b"bytes of this process's output dropped" in data[CAP_BYTES:]


def test_not_a_python_module_command_line_is_refused_in_the_log(server, tmp_path):
    p = server.spawn(["/bin/true"], {}, tmp_path / "w.log", False)
    assert p.wait(timeout=30) == 1
    assert "not a `python -m MODULE` command line" in (tmp_path / "w.log").read_text()


def test_a_server_that_cannot_start_is_one_clear_error_naming_its_log(tmp_path, monkeypatch):
    """Its imports fail (here a broken module on its path): the spawn says so in one HarnessError,
    never a ConnectionResetError traceback."""
    s = server_with_setproctitle(tmp_path, monkeypatch, 'raise RuntimeError("a broken module")\n')
    try:
        with pytest.raises(HarnessError, match="forkserver.log"):
            spawn(s, tmp_path, "exit-0")
        assert "a broken module" in (tmp_path / "forkserver.log").read_text()
    finally:
        s.close()


def test_a_worker_forked_just_before_its_server_died_dies_too(tmp_path, monkeypatch):
    """The server SIGKILLed (with its run) after a fork but before the child asked for PR_SET_PDEATHSIG
    (here the child is held up in setproctitle): the child must see that its server is gone and die,
    not run on as an orphan nobody supervises."""
    s = server_with_setproctitle(tmp_path, monkeypatch, "import time\n\n\ndef setproctitle(title):\n    time.sleep(3)\n")
    try:
        p = spawn(s, tmp_path, "sleep")          # the stand-in would sleep a minute
        s.proc.kill()
        s.proc.wait()
        gone = bool(select.select([p.pidfd], [], [], 30)[0])      # readable once the process has exited
        if not gone:
            signal.pidfd_send_signal(p.pidfd, signal.SIGKILL)
        assert gone, "a worker forked just before its server died outlived it"
    finally:
        s.close()


def test_a_stale_exit_of_a_recycled_pid_is_not_taken_by_the_new_process(server, tmp_path, monkeypatch):
    """The server reaps a child (its exit report arrives) before the kernel may give its pid again:
    an exit recorded for a pid the server has just forked is an earlier process's, unread."""
    real = server._receive

    def receive(*a, **kw):
        msg, fds = real(*a, **kw)
        if msg and "pid" in msg:
            server.exits[msg["pid"]] = 0          # as if an earlier holder of this pid had exited unread
        return msg, fds
    monkeypatch.setattr(server, "_receive", receive)
    p = spawn(server, tmp_path, "sleep")
    try:
        assert p.poll() is None
    finally:
        p.kill()
    monkeypatch.setattr(server, "_receive", real)
    assert p.wait(timeout=30) == -signal.SIGKILL


def test_a_forked_worker_that_exits_writes_the_delivery_reports_its_history_held(server, tmp_path):
    """The fork server's child ends in os._exit, which runs no atexit handler: a fenced worker (sys.exit)
    must still leave the reports it had received in its history."""
    from harness.checker.anomalies import sends_of
    from harness.checker.histories import read
    folder = tmp_path / "history"
    folder.mkdir()
    assert spawn(server, tmp_path, "report-then-exit-3", str(folder)).wait(timeout=30) == 3
    assert [(s.key, s.offset) for s in sends_of(read(folder).processes[0])] == [("a", 9)]
