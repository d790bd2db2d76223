"""Process bookkeeping: is a pid alive, who is it, stop it for sure, die with our parent.

The harness promises to leave no process behind, and to touch no process that
is not its own. A pid alone proves nothing (pids are recycled, pid files can
be stale or forged), so `start_time` and `argv` let callers check a recorded
process before each signal (see `harness.stack.pidrecord`), and `stop` signals
a whole process group only when asked to, for a group the caller created.
Worker processes ask the kernel to SIGKILL them when their parent dies
(PR_SET_PDEATHSIG), so even a harness killed with SIGKILL takes its workers
with it.
"""

import ctypes
import functools
import os
import shutil
import signal
import subprocess
import sys
import time

PR_SET_PDEATHSIG = 1


def alive(pid: int | None) -> bool:
    if not pid:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # A zombie is not alive for our purposes; but a leader thread in the zombie state with other
    # threads still running is a live process whose main thread has ended (a JVM running its shutdown
    # hooks shows that): alive until every thread is gone.
    try:
        state = _state(f"/proc/{pid}/stat")
        if state is None:
            return False          # gone between the signal 0 and the read
        if state != "Z":
            return True
        for tid in os.listdir(f"/proc/{pid}/task"):
            if _state(f"/proc/{pid}/task/{tid}/stat") not in ("Z", None):
                return True
        return False
    except OSError:
        return False


def stopped(pid: int) -> bool:
    """True when the process is stopped by a signal (state T)."""
    return _state(f"/proc/{pid}/stat") == "T"


def _state(stat_path: str) -> str | None:
    """The one-letter state in a /proc stat file (after the command name, which may hold spaces and ')')."""
    try:
        with open(stat_path) as f:
            return f.read().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return None


def start_time(pid: int | None) -> int | None:
    """Field 22 of /proc/PID/stat: when the process started, in clock ticks after boot.

    Together with the pid it names one process for good: a recycled pid has a later start time.
    """
    if not pid:
        return None
    try:
        with open(f"/proc/{pid}/stat") as f:
            # The command name (field 2) may hold spaces and parentheses: split after the last ')'.
            return int(f.read().rsplit(")", 1)[1].split()[19])
    except (OSError, IndexError, ValueError):
        return None


def argv(pid: int) -> list[str]:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return [a.decode(errors="replace") for a in f.read().split(b"\0") if a]
    except OSError:
        return []


def group_leader(pid: int) -> bool:
    """True when `pid` leads its own process group (as after start_new_session=True)."""
    try:
        return os.getpgid(pid) == pid
    except OSError:
        return False


def cmdline(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def wait_gone(pid: int, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not alive(pid):
            return True
        time.sleep(0.05)
    return not alive(pid)


def stop(pid: int | None, grace: float = 10.0, *, group: bool = False,
         first: signal.Signals = signal.SIGTERM, still_ours=None) -> bool:
    """Send `first`, wait `grace` seconds, then KILL; True when the process is gone.

    `still_ours()` is asked before every signal: when it says no, nothing more is sent
    (the process changed hands or the caller cannot prove it is its own) and `stop`
    returns False. With `group=True` the signal goes to the process group, but only
    while `pid` still leads its own group; otherwise to the pid alone.
    """
    if not alive(pid):
        return True
    for sig in (first, signal.SIGKILL):
        if not alive(pid):
            return True
        if still_ours is not None and not still_ours():
            return not alive(pid)
        try:
            if group and group_leader(pid):
                os.killpg(pid, sig)
            else:
                os.kill(pid, sig)
        except ProcessLookupError:
            return True
        except PermissionError:
            return False
        if wait_gone(pid, grace if sig != signal.SIGKILL else 5.0):
            return True
    return not alive(pid)


# The pid of the process that started a worker, set by that process in the worker's environment.
PARENT_PID_ENV = "HARNESS_PARENT_PID"


def die_with_parent() -> None:
    """Ask Linux to SIGKILL this process when its parent exits (no-op elsewhere).

    The request only covers a parent that dies after it is made: a parent killed while this process
    was still starting (interpreter and imports, a few hundred ms) would leave it running. So when
    the parent said who it is ($HARNESS_PARENT_PID) and is no longer our parent, die now."""
    expected = os.environ.get(PARENT_PID_ENV)
    die_with(int(expected) if expected and expected.isdigit() else None)


def die_with(parent: int | None) -> None:
    """die_with_parent() for a parent known by pid (None: whoever the parent is now). A forked child
    must name its parent from a value taken before the fork: asking os.getppid() afterwards answers
    init's pid (or a subreaper's) once the parent has died, and the check would pass."""
    try:
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    except OSError:
        pass
    if parent is not None and os.getppid() != parent:
        os.kill(os.getpid(), signal.SIGKILL)


# Starts a command so that it dies with the harness, even a SIGKILLed one: ask Linux for SIGKILL on
# the parent's death (PR_SET_PDEATHSIG), then exec the command in the same process, so that the
# supervisor's signals reach the command itself. Done here rather than in a preexec_fn, which is
# unsafe in a parent with threads (ours has the progress sampler and the Kafka client's).
#
# util-linux's setpriv makes the request and execs a POSIX shell that checks its parent is still the
# harness (a parent that died before the request is not covered by it) and execs the command: about
# 2 ms and no measurable CPU per start. The Python wrapper below does the same in about 0.05-0.07
# CPU-s and 0.09-0.2 s (an interpreter and ctypes, measured on a busy 2-core machine), which every
# Kafka Streams restart paid; it remains for a machine without setpriv. The shell's exec differs only
# for a command that cannot run: a missing one is exit 127 with its name either way, one without
# permission 126, and a file without a #! line the shell runs as a script where the Python wrapper failed.
EXEC_CHECKING_PARENT = 'if [ "$PPID" != "$1" ]; then exit 0; fi; shift; exec "$@"'
EXEC_DYING_WITH_PARENT = (
    "import ctypes, os, signal, sys\n"
    "parent = int(sys.argv[1])\n"
    "try:\n"
    "    ctypes.CDLL('libc.so.6', use_errno=True).prctl(1, signal.SIGKILL, 0, 0, 0)\n"
    "except OSError:\n"
    "    pass\n"
    "if os.getppid() != parent:\n"
    "    sys.exit(0)\n"
    "try:\n"
    "    os.execvp(sys.argv[2], sys.argv[2:])\n"
    "except OSError as e:\n"
    "    print(f'cannot start {sys.argv[2]}: {e.strerror}', file=sys.stderr)\n"
    "    sys.exit(127)\n")


@functools.lru_cache(maxsize=1)
def setpriv() -> tuple[str, str] | None:
    """The paths of setpriv and sh when setpriv can ask for the parent-death signal (util-linux 2.33 or
    later), else None."""
    path, sh = shutil.which("setpriv"), shutil.which("sh")
    if path is None or sh is None:
        return None
    try:
        ok = subprocess.run([path, "--pdeathsig", "KILL", "--", sh, "-c", "exit 0"], capture_output=True,
                            timeout=10).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return None
    return (path, sh) if ok else None


def dying_with(argv: list[str], parent: int, use_setpriv: bool = True) -> list[str]:
    """`argv` started so that it dies with the process `parent`, which must be the one that starts it."""
    found = setpriv() if use_setpriv else None
    if found is not None:
        path, sh = found
        return [path, "--pdeathsig", "KILL", "--", sh, "-c", EXEC_CHECKING_PARENT, "dying-with-parent", str(parent),
                *argv]
    return [sys.executable, "-S", "-c", EXEC_DYING_WITH_PARENT, str(parent), *argv]


def dying_with_this_process(argv: list[str]) -> list[str]:
    """`argv`, started so that it dies with the calling process (which must be the one that starts it)."""
    return dying_with(argv, os.getpid())
