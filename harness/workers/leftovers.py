"""The processes a run's workers left behind: found, SIGKILLed and counted when the run ends.

A worker's process group is SIGKILLed once the worker is gone (supervisor._sweep), but a child that
called `setsid` (a daemonizing helper, a `nohup ... &` in a script) has left that group and would
outlive the run, unseen. Two things find it:

- every worker's environment carries the supervisor's own token (`TOKEN_ENV`); a descendant keeps it
  unless it clears its environment, so at the end every process whose /proc/PID/environ holds it is
  one of the run's, wherever it moved;
- the run's process is a child subreaper (PR_SET_CHILD_SUBREAPER) while its workers run, so such an
  orphan is reparented to it rather than to init, and is reaped here, not left as a zombie.

A descendant that also clears its environment (`env -i`) carries no token; it is found as an
orphan: a child of the run's process (reparented to it, the subreaper) that was not one when the
workers started and that the harness did not start itself. The harness's own children (a broker a
fault restarts, a helper it runs) inherit its environment, which holds a second token (`OWN_ENV`,
kept out of every worker's environment); such an orphan's own descendants are ended with it.

Each one is opened as a pidfd and checked again (token still there, or the same start time) before the
SIGKILL, so a pid recycled meanwhile is never signalled. The report lists them (pid and command name): a consumer
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
OWN_ENV = "HARNESS_OWN_PROCESSES"
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
    own: bool = False     # its environment holds this process's own token (OWN_ENV): the harness started it
    start: int = 0        # its start time (field 22 of /proc/PID/stat)


def own_token() -> str:
    """This process's own token, set once in its environment: every child it starts inherits it (workers are
    given an environment without it)."""
    return os.environ.setdefault(OWN_ENV, new_token())


def marked(environ: bytes, token: str, name: str = TOKEN_ENV) -> bool:
    """Does a /proc/PID/environ (NUL-separated) hold name=token exactly?"""
    return f"{name}={token}".encode() in environ.split(b"\0")


def chosen(seen: list[Seen], me: int, keep: set[int], before: set | None = None) -> list[int]:
    """The pids to end: every process that holds the token, except this one and those kept (the
    supervisor's own live workers, already being killed, are kept out to be reported as theirs); and,
    when `before` is given (the (pid, start) of this process's children when the workers started), every
    orphan: a child of this process that was not one then, was not started by it (no own token) and holds
    no token, with its descendants."""
    out = {s.pid for s in seen if s.marked and s.pid != me and s.pid not in keep}
    if before is not None:
        roots = [s.pid for s in seen if s.ppid == me and not s.marked and not s.own and s.pid not in keep
                 and (s.pid, s.start) not in before]
        below: dict = {}
        for s in seen:
            below.setdefault(s.ppid, []).append(s.pid)
        while roots:
            pid = roots.pop()
            if pid not in out and pid != me:
                out.add(pid)
                roots += below.get(pid, [])
    return sorted(out)


def _stat(pid, proc: str = "/proc") -> tuple[int, int]:
    """(ppid, start time) from /proc/PID/stat."""
    with open(f"{proc}/{pid}/stat", "rb") as f:
        fields = f.read().rsplit(b")", 1)[1].split()
    return int(fields[1]), int(fields[19])


def scan(token: str, proc: str = "/proc", own: str | None = None) -> list[Seen]:
    out = []
    for name in os.listdir(proc):
        if not name.isdigit():
            continue
        try:
            with open(f"{proc}/{name}/environ", "rb") as f:
                env = f.read()
            ppid, start = _stat(name, proc)
        except (OSError, ValueError, IndexError):
            continue             # gone, or not ours to read
        out.append(Seen(int(name), ppid, marked(env, token), bool(own) and marked(env, own, OWN_ENV), start))
    return out


def children(me: int | None = None) -> set | None:
    """(pid, start time) of this process's children now; None without /proc."""
    me = me or os.getpid()
    if not os.path.isdir("/proc/self"):
        return None
    out = set()
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                ppid, start = _stat(name)
            except (OSError, ValueError, IndexError):
                continue
            if ppid == me:
                out.add((int(name), start))
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


def end(token: str, keep: set[int] | None = None, before: set | None = None) -> list[dict] | None:
    """SIGKILL and reap every process that holds `token`, and (with `before`, see `chosen`) every orphan
    that cleared its environment; [{pid, command}] of those ended, None when the processes cannot be looked
    at (no /proc)."""
    if not os.path.isdir("/proc/self"):
        return None
    me, ended, done = os.getpid(), [], set()
    own = os.environ.get(OWN_ENV)
    for _ in range(ROUNDS):
        seen = scan(token, own=own)
        starts = {s.pid: s.start for s in seen}
        found = [p for p in chosen(seen, me, keep or set(), before) if p not in done]
        if not found:
            break
        for pid in found:
            done.add(pid)
            what = _kill(pid, starts[pid])
            if what is not None:
                ended.append({"pid": pid, "command": what})
    return ended


def _kill(pid: int, start: int) -> str | None:
    try:
        fd = os.pidfd_open(pid)
    except OSError:
        return None
    try:
        try:
            if _stat(pid)[1] != start:
                return None              # the pid changed hands between the scan and the pidfd
        except (OSError, ValueError, IndexError):
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
