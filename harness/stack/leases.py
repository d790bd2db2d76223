"""Who uses the local stack right now, and one lock for starting and stopping it.

Several harness commands may share one state folder (two terminals, a suite
and a run). A command must not stop services another command still uses, and
two commands must not both start Kafka. So, in the state folder:

- `stack.lock` is held (fcntl.flock) around every start/stop decision;
- `leases/<pid>-<start time>.json` is written by each command while it uses
  the stack. The start time (/proc/PID/stat field 22) makes a lease of a dead
  command recognisable even after its pid is recycled; such stale leases are
  deleted when seen;
- `user-hold.json` is written by `harness up` and removed by `harness down`:
  while it exists no command stops anything.
"""

import fcntl
import json
import os
import stat
import tempfile
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from ..core import procs, safefile
from ..core.errors import HarnessError

LOCK_TIMEOUT_S = 600.0   # a start (maven, Kafka) or a stop takes at most a few minutes


def prepare(state: Path) -> None:
    """Make the state folder, or raise one clear line saying why it cannot be used."""
    check_readable(state)
    try:
        # Private; as root, searchable (not listable) so the `postgres` user reaches its own folder inside.
        safefile.make_folder(state, 0o711 if os.geteuid() == 0 else safefile.PRIVATE_FOLDER)
        fd, probe = tempfile.mkstemp(prefix=".write-test-", dir=state)     # O_EXCL, a random name
        os.close(fd)
        os.unlink(probe)
    except OSError as e:
        raise HarnessError(f"cannot use state folder {state}: {e.strerror or e} "
                           f"(set HARNESS_HOME to a writable folder)")


def check_readable(state: Path) -> None:
    """Raise when the configured state folder can never exist (a file is in the way), or when it
    exists but others could plant files in it (writable by others, or not ours: `safefile.check_folder`)."""
    safefile.check_folder(state, "the state folder", "set HARNESS_HOME to a folder of your own that only you can write")
    for parent in [state, *state.parents]:
        try:
            st = parent.stat()
        except (FileNotFoundError, NotADirectoryError):
            continue
        except OSError as e:
            raise HarnessError(f"cannot use state folder {state}: {e.strerror or e} at {parent} "
                               f"(set HARNESS_HOME to a writable folder)")
        if not stat.S_ISDIR(st.st_mode):
            raise HarnessError(f"state folder {state} cannot be used: {parent} is not a folder "
                               f"(set HARNESS_HOME to a folder)")
        return


@contextmanager
def locked(state: Path, log=print):
    """Hold the state folder's lock (creating the folder); waits for another command's start or stop."""
    prepare(state)
    try:
        fd = os.open(state / "stack.lock", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, safefile.PRIVATE)
    except OSError as e:
        raise HarnessError(f"cannot open the lock file in {state} ({e.strerror or e})")
    try:
        deadline, told = time.monotonic() + LOCK_TIMEOUT_S, False
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if not told:
                    log("waiting for another harness command that is starting or stopping the stack ...")
                    told = True
                if time.monotonic() > deadline:
                    raise HarnessError(f"another harness command has held {state / 'stack.lock'} "
                                       f"for more than {LOCK_TIMEOUT_S:.0f} s")
                time.sleep(0.1)
        yield
    finally:
        os.close(fd)   # closing releases the lock


@dataclass
class Lease:
    pid: int
    start_time: int
    path: Path
    command: str = ""

    def alive(self) -> bool:
        return procs.alive(self.pid) and procs.start_time(self.pid) == self.start_time


def _dir(state: Path) -> Path:
    return state / "leases"


def take(state: Path, command: str = "") -> Lease:
    """Write this process's lease (call under `locked`)."""
    pid = os.getpid()
    start = procs.start_time(pid)
    path = _dir(state) / f"{pid}-{start}.json"
    try:
        safefile.make_folder(path.parent, safefile.PRIVATE_FOLDER)
    except OSError as e:
        raise HarnessError(f"cannot create {path.parent}: {e.strerror or e}") from None
    safefile.write_state(path, json.dumps({"pid": pid, "start_time": start, "command": command}) + "\n",
                         safefile.PRIVATE)
    return Lease(pid, start, path, command)


def give_back(lease: Lease) -> None:
    lease.path.unlink(missing_ok=True)


def read(path: Path) -> Lease | None:
    try:
        d = json.loads(path.read_text())
        return Lease(int(d["pid"]), int(d["start_time"]), path, str(d.get("command", "")))
    except (OSError, ValueError, TypeError, KeyError):
        return None


def live(state: Path, drop_stale: bool = True) -> list[Lease]:
    """Leases of commands that still run; stale or unreadable lease files are deleted when `drop_stale`."""
    out = []
    try:
        files = sorted(_dir(state).glob("*.json"))
    except OSError:
        return []
    for f in files:
        lease = read(f)
        if lease is not None and lease.alive():
            out.append(lease)
        elif drop_stale:
            f.unlink(missing_ok=True)
    return out


def _hold_path(state: Path) -> Path:
    return state / "user-hold.json"


def hold(state: Path) -> None:
    """`harness up`: keep the stack until `harness down`."""
    safefile.write_state(_hold_path(state), json.dumps({"since": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
                                                      "pid": os.getpid()}) + "\n", safefile.PRIVATE)


def held(state: Path) -> bool:
    return _hold_path(state).exists()


def unhold(state: Path) -> None:
    _hold_path(state).unlink(missing_ok=True)
