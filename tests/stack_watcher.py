"""Stops the test session's stack once the pytest process that started it has ended, however it ended.

The session fixture stops its stack itself at a normal end, on Ctrl-C, SIGTERM or SIGHUP, and then stops
this watcher. A SIGKILLed pytest (a CI job killed) runs no teardown, and its Kafka and PostgreSQL would run
on. This watcher, started in a session of its own before the stack, polls the pytest process (its pid with
the start time it had; a zombie has ended), then, if the state folder is still there, runs
`harness down --purge` on it, and deletes the folder only when that worked and no process of the folder is
left (a folder deleted under running services would leave nothing to find them by). It covers the session's
stack only: integration tests that start stacks of their own in other folders stop them themselves. The
folder comes in HARNESS_HOME, not in argv: tests look for leftover processes by the folder in their command
lines. When the stack could not be stopped, `<folder>.stack-watcher.log` beside it says what happened.

    python -m tests.stack_watcher PID START_TIME     (HARNESS_HOME: the session's state folder)
"""

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

from harness import procs

ROOT = Path(__file__).resolve().parents[1]
POLL_S = 1.0
# `down` waits up to leases.LOCK_TIMEOUT_S (600 s) for an orphaned `up` holding the stack's lock, then gives up.
DOWN_TIMEOUT_S = 900


def ended(pid: int, start: int) -> bool:
    return procs.start_time(pid) != start or not procs.alive(pid)


def main(argv: list[str]) -> int:
    pid, start = int(argv[0]), int(argv[1])
    home = Path(os.environ["HARNESS_HOME"])
    while not ended(pid, start):
        time.sleep(POLL_S)
    if not home.is_dir() or home.is_symlink():
        return 0
    log = home.parent / f"{home.name}.stack-watcher.log"
    env = {**os.environ, "HARNESS_BOOTSTRAP_SERVERS": "", "HARNESS_POSTGRES_DSN": ""}   # the folder's stack
    try:                                # a new file of ours, never one planted in the shared folder
        fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    except OSError:
        log, fd = None, os.open(os.devnull, os.O_WRONLY)
    with open(fd, "w") as out:
        try:
            rc = subprocess.run([sys.executable, "-m", "harness.cli", "down", "--purge"], cwd=ROOT, env=env,
                                stdin=subprocess.DEVNULL, stdout=out, stderr=out, timeout=DOWN_TIMEOUT_S).returncode
        except subprocess.TimeoutExpired:
            rc = None
        from tests.conftest import processes_of
        left = processes_of(home)
        out.write(f"stack-watcher: pytest {pid} ended; harness down exited {rc}; processes left: {left}\n")
    if rc == 0 and not left:
        shutil.rmtree(home, ignore_errors=True)
        if log is not None:
            log.unlink()                # all done: nothing to tell
    return 0


def watch(home: Path, pid: int | None = None) -> subprocess.Popen:
    """Starts the watcher of process `pid` (this one by default) for the stack in `home`."""
    pid = pid or os.getpid()
    start = procs.start_time(pid)
    if start is None:
        raise RuntimeError(f"no process {pid} to watch")
    return subprocess.Popen([sys.executable, "-m", "tests.stack_watcher", str(pid), str(start)],
                            cwd=ROOT, start_new_session=True, env={**os.environ, "HARNESS_HOME": str(home)},
                            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
