"""`harness up` and `harness env` on stacks of their own: a signal during `up`, and a dead Kafka."""

import json
import os
import shutil
import signal
import subprocess
import sys
import time

import pytest

from harness.core import procs
from tests.conftest import ROOT, harness, processes_of, searchable_dir

pytestmark = pytest.mark.integration


def live_processes_of(h, wait: float = 10.0) -> list[int]:
    """Processes of the state folder `h` still alive after up to `wait` s (a JVM killed a moment ago
    shows its command line while its threads exit, its main thread already a zombie)."""
    deadline = time.monotonic() + wait
    while True:
        left = [p for p in processes_of(h) if procs.alive(p)]
        if not left or time.monotonic() > deadline:
            return left
        time.sleep(0.2)


@pytest.fixture
def home():
    h = searchable_dir("harness-test-up-")
    env = {"HARNESS_HOME": str(h), "HARNESS_BOOTSTRAP_SERVERS": "", "HARNESS_POSTGRES_DSN": "",
           "HARNESS_KAFKA_CONFIG_FILE": ""}
    try:
        yield h, env
    finally:
        harness("down", "--purge", env=env)
        left = live_processes_of(h)
        shutil.rmtree(h, ignore_errors=True)
        assert not left, f"processes of {h} survived `harness down`: {left}"


def test_env_with_a_dead_kafka_fails_in_one_line(home):
    """Before: `harness env` printed the settings of a stack whose Kafka was dead, and exited 0."""
    h, env = home
    harness("up", env=env, check=True, timeout=600)
    ok = harness("env", env=env)
    assert ok.returncode == 0 and "HARNESS_BOOTSTRAP_SERVERS" in ok.stdout, ok.stderr
    pids = json.loads(harness("status", "--json", env=env, check=True).stdout)["pids"]
    os.kill(pids["kafka"], signal.SIGKILL)
    assert procs.wait_gone(pids["kafka"], 30)
    proc = harness("env", env=env, timeout=120)
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert proc.returncode != 0, proc.stdout
    assert proc.stdout == "" and len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert "kafka" in lines[0] and "not running" in lines[0]


def test_sigterm_during_up_stops_what_it_started_or_holds_it(home):
    """Before: a SIGTERM while `up` started Kafka killed it outright: PostgreSQL (and Kafka) ran on
    with no hold, and nothing would stop them."""
    h, env = home
    up = subprocess.Popen([sys.executable, "-m", "harness.cli", "up"], cwd=ROOT, env={**os.environ, **env},
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        for line in up.stderr:            # PostgreSQL is up, Kafka is starting: the middle of `up`
            if line.startswith("Starting Kafka"):
                break
        time.sleep(1.0)
        up.send_signal(signal.SIGTERM)
        rest = up.stderr.read()
        rc = up.wait(timeout=180)
    finally:
        if up.poll() is None:
            up.kill()
            up.wait()
    assert "Traceback" not in rest, rest
    held = (h / "user-hold.json").exists()
    running = live_processes_of(h)
    if held:
        assert rc == 0, rest
    else:
        assert not running, (f"SIGTERM during `up` left processes with no hold: "
                             f"{[procs.cmdline(p)[:200] for p in running]}\n{rest}")
        assert rc == 130, rest


def test_a_sigkilled_test_session_leaves_no_stack(home, tmp_path):
    """Before: a SIGKILLed pytest (a CI job killed) ran no teardown, and its session's Kafka and PostgreSQL
    ran on. tests/stack_watcher.py stops them once the watched process has gone."""
    from tests.stack_watcher import watch
    h, env = home
    registry = tmp_path / "registry" / "state-folders"
    registry.parent.mkdir()
    registry.write_text(f"{h}\n")
    session = subprocess.Popen(["sleep", "600"])          # stands in for pytest
    watcher = watch(registry, session.pid)
    try:
        harness("up", env=env, check=True, timeout=600)
        assert processes_of(h)
        time.sleep(2.5)
        assert watcher.poll() is None and h.is_dir()      # the session still runs: nothing touched
    finally:
        session.kill()
        session.wait()
    watcher.wait(timeout=300)
    assert not live_processes_of(h, wait=30) and not h.exists()
    assert not h.with_name(h.name + ".stack-watcher.log").exists()      # all went well: nothing to tell
    assert not registry.parent.exists()                                  # every folder gone: the registry too
