"""The local stack's broker (or PostgreSQL) SIGKILLed while the workers run: the run notices within seconds
and ends `incomplete`, naming the service by its pid and port, instead of waiting out its time limit.

Each destroys its stack, so it starts one of its own (and purges it after). The broker's is in the default
run; PostgreSQL's, the same watch of another service (about 40 s), is slow (nightly).
"""

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from tests.conftest import ROOT, harness, processes_of, searchable_dir

pytestmark = pytest.mark.integration

TIME_LIMIT_S = 400     # what the run would wait without the watch
ENDS_WITHIN_S = 200    # generous: the watch looks every second; the rest is the workers' stop and the audit


@pytest.fixture
def own_stack():
    home = searchable_dir("harness-test-deaths-")
    env = {"HARNESS_HOME": str(home)}
    harness("up", env=env, check=True)
    try:
        yield home, env
    finally:
        harness("down", "--purge", env=env, timeout=300)
        assert not processes_of(home)


def _working(out) -> bool:
    """The worker consumes: its history holds its first polls. Without crashes it is never restarted, so
    the broker killed then leaves a connected client retrying, as in the run that waited out its limit."""
    try:
        return any(f.stat().st_size > 0 for f in (out / "history").iterdir())
    except OSError:
        return False


def test_a_killed_broker_ends_the_run_naming_it(own_stack, tmp_path):
    _kill_mid_run(own_stack, tmp_path, "kafka", "Kafka node kafka")


@pytest.mark.slow
def test_a_killed_postgresql_ends_the_run_naming_it(own_stack, tmp_path):
    _kill_mid_run(own_stack, tmp_path, "postgres", "PostgreSQL")


def _kill_mid_run(own_stack, tmp_path, service: str, named: str):
    from harness.core.procs import die_with_parent
    home, env = own_stack
    pids = json.loads(harness("status", "--json", env=env, check=True).stdout)["pids"]
    broker = pids[service]
    out = tmp_path / "run"
    proc = subprocess.Popen([sys.executable, "-m", "harness.cli", "run", "offset-before", "--messages", "50000", "--crash-rate", "0",
                             "--time-limit", str(TIME_LIMIT_S), "--quiet", "--out", str(out)],
                            env={**os.environ, **env}, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, preexec_fn=die_with_parent)
    try:
        deadline = time.monotonic() + 300
        while not _working(out) and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert proc.poll() is None, proc.communicate()[1][-3000:]
        os.kill(broker, signal.SIGKILL)
        stdout, stderr = proc.communicate(timeout=ENDS_WITHIN_S)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert "Traceback" not in stderr, stderr[-3000:]
    assert proc.returncode == 3, (proc.returncode, stderr[-3000:])
    report = json.loads((out / "report.json").read_text())
    reason = report["verdict_detail"]["reason"]
    assert report["verdict"] == "incomplete", report["verdict"]
    assert f"{named} (pid {broker}, port " in reason and "died" in reason, reason
