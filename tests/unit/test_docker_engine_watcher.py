"""scripts/docker-engine.sh stop-after: once the watched process ends, however it ends, the private engine's
folder is stopped and deleted; before that, nothing is touched. A real engine is stopped the same way
(checked by hand with a running dockerd); here the folder is one left by an engine that no longer runs, which
`stop` deletes, so the watcher's effect shows without an engine."""

import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "docker-engine.sh"


def engine(env, *args, timeout=30):
    return subprocess.run(["bash", str(SCRIPT), *args], env=env, capture_output=True, text=True, timeout=timeout)


@pytest.fixture
def env(tmp_path):
    folder = tmp_path / "engine"
    folder.mkdir(mode=0o700)
    (folder / "dockerd.log").write_text("left over\n")
    return {**os.environ, "HARNESS_DOCKER_DIR": str(folder)}, folder


def wait_until(cond, seconds=20.0) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if cond():
            return True
        time.sleep(0.1)
    return cond()


def test_the_engine_folder_goes_only_after_the_watched_process_is_killed(env):
    env, folder = env
    job = subprocess.Popen(["sleep", "60"])
    try:
        got = engine(env, "stop-after", str(job.pid))
        assert got.returncode == 0 and f"once process {job.pid} has ended" in got.stderr
        time.sleep(2.5)
        assert folder.exists()                          # the job still runs: nothing touched
    finally:
        job.send_signal(signal.SIGKILL)
        job.wait()
    assert wait_until(lambda: not folder.exists())


def test_bad_or_missing_pids_are_one_line_and_start_no_watcher(env):
    env, folder = env
    for arg in ("", "x", "0", "-1", "12 34", "1;true", "99999999999", "$(id)"):
        got = engine(env, "stop-after", arg)
        assert got.returncode == 1 and len(got.stderr.strip().splitlines()) == 1, (arg, got.stderr)
    dead = subprocess.Popen(["true"])
    dead.wait()
    got = engine(env, "stop-after", str(dead.pid))
    assert got.returncode == 1 and "no process" in got.stderr
    got = engine(env, "stop-after", "9999999999")               # ten digits: a pid no process has
    assert got.returncode == 1 and "no process" in got.stderr
    for args in ((), ("1",), ("x", "1"), ("1", "x"), ("1", "-1")):
        got = engine(env, "_wait-then-stop", *args)
        assert got.returncode == 1 and "internal" in got.stderr, args
    time.sleep(1.5)
    assert folder.exists()


def test_the_same_pid_with_another_start_time_or_a_zombie_has_ended(env):
    env, folder = env
    job = subprocess.Popen(["sleep", "60"])
    try:
        got = engine(env, "_wait-then-stop", str(job.pid), "1")    # the pid, but not the process that started then
        assert got.returncode == 0 and not folder.exists()
    finally:
        job.kill()
        job.wait()
    folder.mkdir(mode=0o700)
    zombie = subprocess.Popen(["true"])
    assert wait_until(lambda: open(f"/proc/{zombie.pid}/stat").read().rsplit(")", 1)[1].split()[0] == "Z")
    start = open(f"/proc/{zombie.pid}/stat").read().rsplit(")", 1)[1].split()[19]
    try:
        got = engine(env, "_wait-then-stop", str(zombie.pid), start)   # exited, not yet reaped: ended
        assert got.returncode == 0 and not folder.exists()
    finally:
        zombie.wait()
