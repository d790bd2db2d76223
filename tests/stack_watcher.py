"""Stops the test session's stacks once the pytest process has ended, however it ended.

Every state folder a test makes (conftest.searchable_dir) is written to a registry file, and the first one
starts this watcher, in a session of its own. The fixtures stop their stacks themselves at a normal end, on
Ctrl-C, SIGTERM or SIGHUP; a SIGKILLed pytest (a CI job killed) runs no teardown, and its Kafka and
PostgreSQL would run on. The watcher polls the pytest process (its pid with the start time it had; a zombie
has ended), then, for each registered folder that is still there, runs `harness down --purge` on it and
deletes it only when that worked and no process of the folder is left (a folder deleted under running
services would leave nothing to find them by). When every folder is gone it deletes the registry too. After
a normal end there is usually nothing left to do. A folder it could not clean keeps
`<folder>.stack-watcher.log` beside it, saying why. The registry's path comes in the environment, not in
argv: tests look for leftover processes by folder names in command lines.

    python -m tests.stack_watcher PID START_TIME     (HARNESS_TEST_STATE_FOLDERS: the registry file)
"""

import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from harness.core import procs

ROOT = Path(__file__).resolve().parents[1]
REGISTRY_ENV = "HARNESS_TEST_STATE_FOLDERS"
POLL_S = 1.0
# `down` waits up to leases.LOCK_TIMEOUT_S (600 s) for an orphaned `up` holding the stack's lock, then gives up.
DOWN_TIMEOUT_S = 900


def ended(pid: int, start: int) -> bool:
    return procs.start_time(pid) != start or not procs.alive(pid)


def ours(home: Path) -> bool:
    """A folder the session made: a real folder (not a link) right in the temporary folder."""
    return home.parent == Path(tempfile.gettempdir()) and home.is_dir() and not home.is_symlink()


def clean(home: Path) -> bool:
    """Stops the stack of `home` and deletes the folder; False (the folder kept, a log beside it) when that
    could not be done."""
    log = home.parent / f"{home.name}.stack-watcher.log"
    env = {**os.environ, "HARNESS_HOME": str(home), "HARNESS_BOOTSTRAP_SERVERS": "", "HARNESS_POSTGRES_DSN": ""}
    try:                                # a new file of ours, never one planted in the shared folder
        fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    except OSError:
        log, fd = None, os.open(os.devnull, os.O_WRONLY)
    with open(fd, "w") as out:
        try:
            if not (home / ".harness-state").exists():
                rc = 0                  # `harness up` never made a stack here: nothing to stop
            else:
                rc = subprocess.run([sys.executable, "-m", "harness.cli", "down", "--purge"], cwd=ROOT, env=env,
                                    stdin=subprocess.DEVNULL, stdout=out, stderr=out,
                                    timeout=DOWN_TIMEOUT_S).returncode
        except subprocess.TimeoutExpired:
            rc = None
        from tests.conftest import processes_of
        left = processes_of(home)
        out.write(f"stack-watcher: pytest ended; harness down exited {rc}; processes left: {left}\n")
    if rc != 0 or left:
        return False
    shutil.rmtree(home, ignore_errors=True)
    if log is not None:
        log.unlink()                    # all done: nothing to tell
    return True


def main(argv: list[str]) -> int:
    pid, start = int(argv[0]), int(argv[1])
    registry = Path(os.environ[REGISTRY_ENV])
    while not ended(pid, start):
        time.sleep(POLL_S)
    try:
        folders = dict.fromkeys(Path(line) for line in registry.read_text().splitlines() if line.strip())
    except OSError:
        return 0
    kept = [home for home in folders if ours(home) and not clean(home)]
    if not kept:
        shutil.rmtree(registry.parent, ignore_errors=True)
    return 0


def watch(registry: Path, pid: int | None = None) -> subprocess.Popen:
    """Starts the watcher of process `pid` (this one by default) for the folders listed in `registry`."""
    pid = pid or os.getpid()
    start = procs.start_time(pid)
    if start is None:
        raise RuntimeError(f"no process {pid} to watch")
    return subprocess.Popen([sys.executable, "-m", "tests.stack_watcher", str(pid), str(start)],
                            cwd=ROOT, start_new_session=True, env={**os.environ, REGISTRY_ENV: str(registry)},
                            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
