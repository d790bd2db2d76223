"""Stops the test session's stack once the pytest process that started it has ended, however it ended.

The session fixture stops its stack itself at a normal end, on Ctrl-C, SIGTERM or SIGHUP. A SIGKILLed
pytest (a CI job killed) runs no teardown, and its Kafka and PostgreSQL would run on. This watcher, started
in a session of its own before the stack, polls the pytest process (its pid with the start time it had) and
then, if the state folder is still there (a normal teardown deletes it), runs `harness down --purge` on it
and deletes it. The folder comes in HARNESS_HOME, not in argv: tests look for leftover processes by the
folder in their command lines, and this one runs until pytest has ended.

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
DOWN_TIMEOUT_S = 300


def main(argv: list[str]) -> int:
    pid, start = int(argv[0]), int(argv[1])
    home = Path(os.environ["HARNESS_HOME"])
    while procs.start_time(pid) == start:
        time.sleep(POLL_S)
    if not home.is_dir() or home.is_symlink():
        return 0
    env = {**os.environ, "HARNESS_BOOTSTRAP_SERVERS": "", "HARNESS_POSTGRES_DSN": ""}   # the folder's stack
    subprocess.run([sys.executable, "-m", "harness.cli", "down", "--purge"], cwd=ROOT, env=env, stdin=subprocess.DEVNULL,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=DOWN_TIMEOUT_S)
    shutil.rmtree(home, ignore_errors=True)
    return 0


def watch(home: Path, pid: int | None = None) -> subprocess.Popen:
    """Starts the watcher of process `pid` (this one by default) for the stack in `home`."""
    pid = pid or os.getpid()
    return subprocess.Popen([sys.executable, "-m", "tests.stack_watcher", str(pid), str(procs.start_time(pid))],
                            cwd=ROOT, start_new_session=True,
                            env={**os.environ, "HARNESS_HOME": str(home)}, stdin=subprocess.DEVNULL,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
