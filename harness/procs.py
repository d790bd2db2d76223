"""Process bookkeeping: is a pid alive, stop it for sure, die with our parent.

The harness promises to leave no process behind. Services are stopped by pid
(TERM, then KILL after a grace period); worker processes ask the kernel to
SIGKILL them when their parent dies (PR_SET_PDEATHSIG), so even a harness
killed with SIGKILL takes its workers with it.
"""

import ctypes
import os
import signal
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
    # A zombie is not alive for our purposes.
    try:
        with open(f"/proc/{pid}/stat") as f:
            state = f.read().rsplit(")", 1)[1].split()[0]
        return state != "Z"
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


def stop(pid: int | None, grace: float = 10.0) -> None:
    """TERM the process group (or pid), wait `grace` seconds, then KILL."""
    if not alive(pid):
        return
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(pid, sig)
        except (ProcessLookupError, PermissionError):
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                return
        if wait_gone(pid, grace if sig == signal.SIGTERM else 5.0):
            return


def die_with_parent() -> None:
    """Ask Linux to SIGKILL this process when its parent exits (no-op elsewhere)."""
    try:
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    except OSError:
        pass
