"""The processes a run's workers left behind: found, SIGKILLed and counted when the run ends.

A worker's process group is SIGKILLed once the worker is gone (supervisor._sweep), but a child that
called `setsid` (a daemonizing helper, a `nohup ... &` in a script) has left that group and would
outlive the run, unseen. Two things find it:

- every worker's environment carries the supervisor's own token (`TOKEN_ENV`); a descendant keeps it
  unless it clears its environment, so at the end every process whose /proc/PID/environ holds it is
  one of the run's, wherever it moved;
- the run's process is a child subreaper (PR_SET_CHILD_SUBREAPER) while its workers run, so such an
  orphan is reparented to it rather than to init, and is reaped here, not left as a zombie.

Each one is opened as a pidfd and checked again (token still there) before the SIGKILL, so a pid
recycled meanwhile is never signalled. The report lists them (pid and command name): a consumer
that leaves processes behind is a fact about the consumer. Linux only; elsewhere the count is
unknown (None).
"""

import ctypes
import os
import secrets
import select
import signal
from dataclasses import dataclass

PR_SET_CHILD_SUBREAPER = 36
TOKEN_ENV = "HARNESS_RUN_PROCESSES"
ROUNDS = 5                 # a leftover may fork while we look: look again, this many times at most
REAP_WAIT_S = 5.0
COMMAND_CHARS = 200


def new_token() -> str:
    return secrets.token_hex(16)


def subreaper(on: bool) -> bool:
    """Make this process a child subreaper (or stop being one); False where Linux does not allow it."""
    try:
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        return libc.prctl(PR_SET_CHILD_SUBREAPER, 1 if on else 0, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


@dataclass
class Seen:
    pid: int
    ppid: int
    marked: bool          # its environment holds the token


def marked(environ: bytes, token: str) -> bool:
    """Does a /proc/PID/environ (NUL-separated) hold TOKEN_ENV=token exactly?"""
    return f"{TOKEN_ENV}={token}".encode() in environ.split(b"\0")


def chosen(seen: list[Seen], me: int, keep: set[int]) -> list[int]:
    """The pids to end: every process that holds the token, except this one and those kept (the
    supervisor's own live workers, already being killed, are kept out to be reported as theirs)."""
    return sorted(s.pid for s in seen if s.marked and s.pid != me and s.pid not in keep)


def scan(token: str, proc: str = "/proc") -> list[Seen]:
    out = []
    for name in os.listdir(proc):
        if not name.isdigit():
            continue
        try:
            with open(f"{proc}/{name}/environ", "rb") as f:
                env = f.read()
            with open(f"{proc}/{name}/stat", "rb") as f:
                ppid = int(f.read().rsplit(b")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue             # gone, or not ours to read
        out.append(Seen(int(name), ppid, marked(env, token)))
    return out


def command(pid: int) -> str:
    """Its command line (or name), at most COMMAND_CHARS characters, as read: escape it before showing it."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            text = f.read(COMMAND_CHARS * 4).replace(b"\0", b" ").strip()
        if not text:
            with open(f"/proc/{pid}/comm", "rb") as f:
                text = f.read().strip()
    except OSError:
        return ""
    return text.decode(errors="replace")[:COMMAND_CHARS]


def end(token: str, keep: set[int] | None = None) -> list[dict] | None:
    """SIGKILL and reap every process that holds `token`; [{pid, command}] of those ended, None when the
    processes cannot be looked at (no /proc)."""
    if not os.path.isdir("/proc/self"):
        return None
    me, ended, done = os.getpid(), [], set()
    for _ in range(ROUNDS):
        found = [p for p in chosen(scan(token), me, keep or set()) if p not in done]
        if not found:
            break
        for pid in found:
            done.add(pid)
            what = _kill(pid, token)
            if what is not None:
                ended.append({"pid": pid, "command": what})
    return ended


def _kill(pid: int, token: str) -> str | None:
    try:
        fd = os.pidfd_open(pid)
    except OSError:
        return None
    try:
        try:
            with open(f"/proc/{pid}/environ", "rb") as f:
                if not marked(f.read(), token):
                    return None          # the pid changed hands between the scan and the pidfd
        except OSError:
            return None
        what = command(pid)
        try:
            signal.pidfd_send_signal(fd, signal.SIGKILL)      # ends a stopped process too
        except ProcessLookupError:
            return None
        select.select([fd], [], [], REAP_WAIT_S)
        try:
            os.waitpid(pid, os.WNOHANG)       # ours when the subreaper took it in: no zombie left
        except ChildProcessError:
            pass
        return what
    finally:
        os.close(fd)
