"""Which running process is ours: a pid alone is not proof.

A pid file outlives its process, pids are recycled, and anyone can write a
number into a file. So when the harness starts a service it records a JSON
pid record: the pid, the process start time (field 22 of /proc/PID/stat), the
arguments that must appear in its command line (our own config or data
path), whether it leads a process group we created, its ports and who
started it. Before any signal, `why_not_ours` checks all of them; a process
that fails any check is left alone, whatever its name.

A record is evidence only of what the harness wrote, so two things are never
taken from it: the marks a process must show and whether it leads a group.
Both come from the service's own code (`RecordedService.marks()` and
`.group`, built from the state folder's real path): a forged record with
`"marks": ["3002"]` cannot make root's `sleep 3002` ours. And the file itself
is trusted only when it is a regular file (not a link), owned by the user the
harness runs as, writable by nobody else and with no second name (a hard
link); anything else is read as no record at all.

Owners: "user" (started by `harness up`, or kept with --keep-stack: stays
until `harness down`) and "command" (started by a command for its own use:
the last command using the stack stops it).
"""

import json
import os
import signal
import stat
from dataclasses import asdict, dataclass, field
from pathlib import Path

from ..core import procs, safefile

OWNERS = ("user", "command")


@dataclass
class PidRecord:
    pid: int
    start_time: int
    marks: list                 # each must be one whole argument of the process's command line
    group: bool = False         # True when we started it as the leader of a new session
    ports: dict = field(default_factory=dict)
    owner: str = "command"


def capture(pid: int, marks: list[str], *, group: bool, ports: dict, owner: str) -> PidRecord:
    """The record of a process we just started (its start time is read now)."""
    start = procs.start_time(pid)
    if start is None:
        raise ProcessLookupError(pid)
    return PidRecord(pid=pid, start_time=start, marks=list(marks), group=group, ports=dict(ports), owner=owner)


def write(path: Path, rec: PidRecord) -> None:
    """Write atomically: a reader sees the old record or the new one, never half of one."""
    safefile.make_folder(path.parent, safefile.PRIVATE_FOLDER)
    safefile.write_text(path, json.dumps(asdict(rec), indent=2) + "\n", safefile.PRIVATE)


MAX_BYTES = 64 * 1024      # a record is a few hundred bytes


def why_untrusted(path: Path) -> str | None:
    """Why the file at `path` cannot be a record the harness wrote (None: it may be; missing: None too)."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return None
    except OSError as e:
        return e.strerror or str(e)
    if stat.S_ISLNK(st.st_mode):
        return "it is a symbolic link"
    if not stat.S_ISREG(st.st_mode):
        return "it is not a regular file"
    if st.st_uid != os.geteuid():
        return f"it belongs to another user (uid {st.st_uid})"
    if st.st_mode & 0o022:
        return f"others may write it (mode {stat.S_IMODE(st.st_mode):o})"
    if st.st_nlink != 1:
        return "it has another name (a hard link)"
    return None


def _read_trusted(path: Path) -> bytes | None:
    """The bytes of `path` if it is a file the harness could have written (see `why_untrusted`), else None."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        st = os.fstat(fd)
        if (not stat.S_ISREG(st.st_mode) or st.st_uid != os.geteuid() or st.st_mode & 0o022
                or st.st_nlink != 1 or st.st_size > MAX_BYTES):
            return None
        return os.read(fd, MAX_BYTES + 1)
    except OSError:
        return None
    finally:
        os.close(fd)


def read(path: Path, marks: list[str] | None = None, group: bool | None = None) -> PidRecord | None:
    """The record in `path`, or None when it is missing, untrusted, unreadable, not JSON or incomplete.

    A bare pid (the old format) is not a record: nothing proves which process it meant. `marks` and
    `group`, when given (a service always gives them), replace what the file says: they are the caller's
    knowledge of its own process, which a record cannot change.
    """
    raw = _read_trusted(path)
    if raw is None:
        return None
    try:
        d = json.loads(raw)
        rec = PidRecord(pid=int(d["pid"]), start_time=int(d["start_time"]),
                        marks=[str(m) for m in d["marks"]], group=bool(d.get("group", False)),
                        ports={str(k): int(v) for k, v in (d.get("ports") or {}).items()},
                        owner=d.get("owner") if d.get("owner") in OWNERS else "command")
    except (ValueError, TypeError, KeyError, AttributeError, RecursionError):
        return None
    if marks is not None:
        rec.marks = list(marks)
    if group is not None:
        rec.group = group
    if rec.pid <= 1 or not rec.marks:
        return None
    return rec


def why_not_ours(rec: PidRecord) -> str | None:
    """None when the live process `rec.pid` is the one recorded; else the reason it is not."""
    if rec.pid <= 1 or rec.pid == os.getpid():
        return f"pid {rec.pid} cannot be a service"
    if not procs.alive(rec.pid):
        return f"pid {rec.pid} is not running"
    if procs.start_time(rec.pid) != rec.start_time:
        return f"pid {rec.pid} started at another time (a different process now has that pid)"
    args = procs.argv(rec.pid)
    missing = [m for m in rec.marks if m not in args]
    if missing:
        return f"pid {rec.pid} does not have {missing[0]} on its command line"
    if rec.group and not procs.group_leader(rec.pid):
        return f"pid {rec.pid} no longer leads its own process group"
    return None


def stop(rec: PidRecord, grace: float, first: signal.Signals = signal.SIGTERM, extra_check=None) -> bool:
    """Stop the recorded process if (and while) it is ours; True when it is gone.

    `extra_check()` may add a service-specific proof (e.g. Postgres's own postmaster.pid);
    it is asked together with `why_not_ours` before every signal.
    """
    def still_ours() -> bool:
        return why_not_ours(rec) is None and (extra_check is None or extra_check())
    if not still_ours():
        return False
    return procs.stop(rec.pid, grace, group=rec.group, first=first, still_ours=still_ours)


class RecordedService:
    """A service started by us and known by its pid record at `self.pidfile`.

    A subclass says what its process must show: `marks()` (whole arguments of its command line, from
    the state folder's real path) and `group` (whether we start it as the leader of its own session)."""

    name = "service"
    pidfile: Path
    group = False

    def marks(self) -> list[str]:
        raise NotImplementedError

    def record(self) -> PidRecord | None:
        return read(self.pidfile, self.marks(), self.group)

    def extra_check(self, rec: PidRecord) -> str | None:
        """A service's own extra proof that `rec` is its process; None when it holds."""
        return None

    def why_not_ours(self, rec: PidRecord) -> str | None:
        return why_not_ours(rec) or self.extra_check(rec)

    def running(self) -> PidRecord | None:
        """The verified record of our running process, or None."""
        rec = self.record()
        return rec if rec is not None and self.why_not_ours(rec) is None else None

    def pid(self) -> int | None:
        rec = self.running()
        return rec.pid if rec else None

    def set_owner(self, owner: str) -> None:
        rec = self.running()
        if rec is not None and rec.owner != owner:
            rec.owner = owner
            write(self.pidfile, rec)

    def stop_ours(self, grace: float, first: signal.Signals = signal.SIGTERM) -> tuple[bool, str | None]:
        """Stop our process: (stopped, note). A record that does not match is deleted, its pid left alone."""
        if not self.pidfile.exists():
            return False, None
        rec = self.record()
        if rec is None:
            untrusted = why_untrusted(self.pidfile)
            self.pidfile.unlink(missing_ok=True)
            if untrusted:
                return False, f"ignored {self.pidfile}: {untrusted}, so the harness did not write it; nothing signalled"
            return False, f"ignored {self.pidfile}: it is not a pid record (a bare pid proves nothing); nothing signalled"
        why = self.why_not_ours(rec)
        if why is not None:
            self.pidfile.unlink(missing_ok=True)
            if not procs.alive(rec.pid):
                return False, None
            return False, f"left pid {rec.pid} alone: {why}, so it is not our {self.name}"
        if not stop(rec, grace, first, extra_check=lambda: self.extra_check(rec) is None):
            return False, f"could not stop {self.name} (pid {rec.pid}); it is still running"
        self.pidfile.unlink(missing_ok=True)
        return True, f"{self.name} (pid {rec.pid})"

    program = ""                # the executable's name (argv[0]'s last part) a process of this service shows

    def server_uids(self) -> set[int]:
        """The users a process of this service may run as (ours; LocalPostgres adds its server user)."""
        return {os.geteuid()}

    def could_be_ours(self, pid: int) -> bool:
        """Whether `pid` may be an unrecorded process of this service: it runs as one of `server_uids`
        and runs the service's program. Anyone can put our data path in a command line; only
        such a process would hold our data or ports, so only it may block a start."""
        try:
            uid = os.stat(f"/proc/{pid}").st_uid
        except OSError:
            return False
        args = procs.argv(pid)
        return uid in self.server_uids() and bool(args) and (
            not self.program or os.path.basename(args[0]) == self.program)

    def strangers(self, mark: str) -> list[int]:
        """Live processes with `mark` (our config or data path) as an argument that no record of ours names,
        and that could be ours (`could_be_ours`); anyone else's process is no concern of the harness."""
        rec = self.running()
        out = []
        for d in Path("/proc").iterdir():
            if d.name.isdigit() and int(d.name) != os.getpid() and (rec is None or int(d.name) != rec.pid):
                if mark in procs.argv(int(d.name)) and self.could_be_ours(int(d.name)):
                    out.append(int(d.name))
        return out
