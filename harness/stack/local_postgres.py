"""PostgreSQL from Debian's server binaries, in our own data folder and port.

`initdb` refuses to run as root, and our CI runs as root: then every server
command runs as the `postgres` system user (created by Debian's package), and
the data folder belongs to it. The server listens on 127.0.0.1 only, requires
a password (scram-sha-256) and keeps its socket inside its own folder, so it
never collides with a system cluster. Each role's password is generated once
and kept in the state folder, mode 0600 (`postgres.password` for the run role
`harness`, `postgres.admin.password` for the superuser `harness_admin`,
`postgres.audit.password` for the read-only `harness_audit`: see `pg_roles`);
none is ever printed or put on a command line. The superuser is used only to
set up: every run and audit connects as `harness`, and SQL read from a command
line or a file as `harness_audit`.

Root gives the data folder to the `postgres` user; that chown never follows a
symbolic link (a link planted in the folder would otherwise hand its target,
say a root-owned file, to `postgres`).

`pg_ctl start` makes the server; we then record its pid record in
`postgres/postgres.pid` (see `pidrecord`). The server is only ever signalled,
by pid and never as a group (pg_ctl made that session, not us), when the
record matches (pid, start time, our data folder on its command line) and
Postgres's own `postmaster.pid` names the same pid and data folder. We do not
use `pg_ctl stop`: it would signal whatever pid postmaster.pid holds.
A server killed while its processes were stopped (SIGSTOP) leaves them behind,
unable to notice their postmaster's death: each stop also ends the processes
of a dead server of our data folder (`end_orphaned_backends`: the `postgres`
program, a server user, working in our data folder, and no postmaster there).
"""

import glob
import os
from dataclasses import dataclass
import pwd
import secrets
import stat
import signal
import subprocess
from pathlib import Path

from ..core import procs, safefile
from ..core.errors import HarnessError
from ..workload.naming import SCHEMA
from . import pg_roles, pidrecord
from ..core.redaction import redact
from ..clients import pgconn

USER = "harness"            # every run and audit: owns the `harness` schema, nothing more
ADMIN = "harness_admin"     # the bootstrap superuser: set-up only
AUDITOR = "harness_audit"   # SQL read from a command line or a file: SELECT on the `harness` schema, read-only
DATABASE = "harness"
SERVER_SETTINGS = {
    "listen_addresses": "127.0.0.1",
    "max_connections": "200",
    "shared_buffers": "128MB",
    # Durable commits, as in production: a crash test should not lean on a lenient database.
    "fsync": "on",
    "log_min_messages": "warning",
    "unix_socket_permissions": "0700",     # the server's user only, as every file of the state folder
}
# pg_ctl -w waits for the server to accept connections; a healthy one starts in ~1 s.
START_TIMEOUT_S = 60
MISSING = ("PostgreSQL server binaries (initdb, pg_ctl, postgres) not found: "
           "install Debian's package `postgresql` (apt-get install postgresql), or set HARNESS_PG_BIN")


@dataclass
class Seen:
    """What /proc shows of a process: enough to tell a server's process of a data folder."""
    pid: int
    cwd: str
    exe: str
    uid: int
    argv: list


def find_bindir() -> Path:
    env = os.environ.get("HARNESS_PG_BIN")
    candidates = [env] if env else sorted(glob.glob("/usr/lib/postgresql/*/bin"),
                                          key=lambda p: int(Path(p).parent.name) if Path(p).parent.name.isdigit() else 0,
                                          reverse=True)
    for c in candidates:
        if c and all((Path(c) / tool).exists() for tool in ("initdb", "pg_ctl", "postgres")):
            return Path(c)
    raise HarnessError(MISSING)


class LocalPostgres(pidrecord.RecordedService):
    name = "PostgreSQL"
    program = "postgres"

    def __init__(self, state: Path):
        self.home = state / "postgres"
        self.data = self.home / "data"
        self.log = self.home / "server.log"
        self.password_file = state / "postgres.password"
        self.pidfile = self.home / "postgres.pid"
        self.admin_password_file = state / "postgres.admin.password"
        self.audit_password_file = state / "postgres.audit.password"

    # -- who runs the server -------------------------------------------------
    def _as_server_user(self) -> list[str]:
        if os.geteuid() != 0:
            return []
        try:
            pwd.getpwnam("postgres")
        except KeyError:
            raise HarnessError("running as root but there is no `postgres` user to run PostgreSQL as: "
                               "install Debian's package `postgresql`, or run the harness as a normal user")
        return ["runuser", "-u", "postgres", "--"]

    def server_uids(self) -> set[int]:
        """Ours, and the `postgres` user's when we run as root (the server runs as it then)."""
        uids = {os.geteuid()}
        if os.geteuid() == 0:
            try:
                uids.add(pwd.getpwnam("postgres").pw_uid)
            except KeyError:
                pass
        return uids

    def _chown(self, path: Path) -> None:
        """Give `path` and everything under it to the postgres user, never following a symbolic link:
        a link is itself re-owned (lchown), never its target, and the walk does not enter linked folders."""
        if os.geteuid() != 0:
            return
        pw = pwd.getpwnam("postgres")
        if path.is_symlink() or not path.is_dir():
            raise HarnessError(f"{path} is not a folder (a symbolic link?): the harness will not give it to postgres")
        # Walked by file descriptor (os.fwalk): each name is re-owned relative to its folder's open fd, so a
        # folder the postgres user swaps for a link mid-walk cannot redirect a chown outside `path`.
        os.chown(path, pw.pw_uid, pw.pw_gid, follow_symlinks=False)
        for _root, dirs, files, rootfd in os.fwalk(path, follow_symlinks=False):
            for name in (*dirs, *files):
                os.chown(name, pw.pw_uid, pw.pw_gid, dir_fd=rootfd, follow_symlinks=False)

    def _secret(self, path: Path) -> str:
        """A generated password kept in `path` (0600), made on first use; never written or read through a link."""
        if path.is_symlink():
            raise HarnessError(f"{path} is a symbolic link: the harness keeps its passwords only in files it made")
        if not path.exists():
            path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
            with os.fdopen(fd, "w") as f:
                f.write(secrets.token_urlsafe(18) + "\n")
        with open(os.open(path, os.O_RDONLY | os.O_NOFOLLOW)) as f:
            return f.read().strip()

    def password(self) -> str:
        return self._secret(self.password_file)

    def admin_password(self) -> str:
        return self._secret(self.admin_password_file)

    def audit_password(self) -> str:
        return self._secret(self.audit_password_file)

    def _uri(self, role: str, password: str, port: int, dbname: str = DATABASE) -> str:
        from urllib.parse import quote
        return f"postgresql://{role}:{quote(password, safe='')}@127.0.0.1:{port}/{dbname}"

    def admin_dsn(self, port: int, dbname: str = DATABASE) -> str:
        """The superuser's DSN: set-up (and tests that build foreign objects) only."""
        return self._uri(ADMIN, self.admin_password(), port, dbname)

    def audit_dsn(self, port: int) -> str:
        """The read-only role's DSN, for SQL read from a command line or a file."""
        return self._uri(AUDITOR, self.audit_password(), port)

    def dsn(self, port: int) -> str:
        """The run role's DSN (with its password: never print it, use `redact`)."""
        return self._uri(USER, self.password(), port)

    # -- lifecycle -----------------------------------------------------------
    def marks(self) -> list[str]:
        return [str(self.data)]       # pg_ctl made its session: never signalled as a group (group False)

    def postmaster(self) -> tuple[int, str, int | None] | None:
        """Postgres's own postmaster.pid: (pid, data folder, port), or None when unreadable."""
        try:
            lines = (self.data / "postmaster.pid").read_text().splitlines()
            return int(lines[0]), lines[1], (int(lines[3]) if len(lines) > 3 and lines[3].strip() else None)
        except (OSError, ValueError, IndexError):
            return None

    def extra_check(self, rec: pidrecord.PidRecord) -> str | None:
        pm = self.postmaster()
        if pm is None:
            return f"{self.data}/postmaster.pid is missing or unreadable"
        if pm[0] != rec.pid or pm[1] != str(self.data):
            return f"{self.data}/postmaster.pid names pid {pm[0]} and folder {pm[1]}"
        return None

    def log_tail(self, lines: int = 20) -> str:
        return "\n".join(safefile.read_tail(self.log).splitlines()[-lines:])

    def _run(self, cmd: list[str], what: str, timeout: float) -> None:
        try:
            proc = subprocess.run(self._as_server_user() + cmd, capture_output=True, text=True, timeout=timeout,
                                  umask=safefile.PRIVATE_UMASK)
        except subprocess.TimeoutExpired:
            raise HarnessError(f"PostgreSQL {what} did not finish within {timeout:.0f} s", self.log_tail())
        if proc.returncode != 0:
            raise HarnessError(f"PostgreSQL {what} failed (exit {proc.returncode})",
                               ((proc.stdout + proc.stderr).strip() + "\n" + self.log_tail())[-3000:])

    def init(self, bindir: Path) -> None:
        if (self.data / "PG_VERSION").exists():
            return
        safefile.make_folder(self.home, safefile.PRIVATE_FOLDER)     # the postgres user's when we are root
        pwfile = self.home / "initdb.pw"
        safefile.write_text(pwfile, self.admin_password() + "\n", safefile.PRIVATE)   # a link there is replaced
        self._chown(self.home)
        if os.geteuid() == 0:
            _check_traversable(self.home)
        try:
            self._run([str(bindir / "initdb"), "-D", str(self.data), "-U", ADMIN, "--pwfile", str(pwfile),
                       "--auth", "scram-sha-256", "-E", "UTF8", "--locale", "C", "--no-sync"], "initdb", 120)
        finally:
            pwfile.unlink(missing_ok=True)
        # Appended by replacing the file (never through a link the server's user could plant meanwhile).
        conf = self.data / "postgresql.conf"
        safefile.write_bytes(conf, safefile.read_limited(conf, 16 * 1024 * 1024, "the server config",
                                                                follow_links=False).rstrip(b"\n")
                             + ("\n\n# written by harness\n" + "".join(f"{k} = '{v}'\n" for k, v in SERVER_SETTINGS.items())
                                + f"unix_socket_directories = '{self.home}'\n").encode(), safefile.PRIVATE)

    def _own_log(self) -> None:
        """server.log as a file of its own: a link planted there is removed, never touched through."""
        if self.log.is_symlink():
            self.log.unlink()
        # O_NONBLOCK: a FIFO planted there would otherwise block the open until a reader comes, for ever.
        try:
            fd = os.open(self.log, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC,
                         safefile.PRIVATE)
        except OSError as e:      # ENXIO: a FIFO with no reader
            raise HarnessError(f"cannot use {self.log} as the server log: {e.strerror or e} (not a regular file?)") from None
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                raise HarnessError(f"{self.log} is not a regular file (planted by another user?): remove it")
        finally:
            os.close(fd)

    def start(self, bindir: Path, port: int, owner: str) -> None:
        self.init(bindir)
        self._own_log()
        self._chown(self.home)
        self._run([str(bindir / "pg_ctl"), "-D", str(self.data), "-l", str(self.log), "-w",
                   "-t", str(START_TIMEOUT_S), "-o", f"-p {port}", "start"], "start", START_TIMEOUT_S + 10)
        pm = self.postmaster()
        try:
            if pm is None or pm[1] != str(self.data):
                raise ProcessLookupError
            rec = pidrecord.capture(pm[0], self.marks(), group=self.group, ports={"postgres": port}, owner=owner)
        except ProcessLookupError:
            raise HarnessError("PostgreSQL started but left no usable postmaster.pid", self.log_tail())
        pidrecord.write(self.pidfile, rec)

    # -- roles -----------------------------------------------------------------
    def _connect(self, role: str, password: str, port: int, dbname: str):
        return pgconn.connect(host="127.0.0.1", port=port, user=role, password=password, dbname=dbname,
                              autocommit=True, connect_timeout=10)

    def _can_login(self, role: str, password: str, port: int) -> bool:
        import psycopg
        try:
            with self._connect(role, password, port, DATABASE):
                return True
        except psycopg.OperationalError:
            return False

    def _admin(self, port: int, dbname: str):
        """A superuser connection. A folder from an older harness has no harness_admin yet: its `harness`
        (then the bootstrap superuser) makes it, with a password of its own."""
        import psycopg
        try:
            return self._connect(ADMIN, self.admin_password(), port, dbname)
        except psycopg.OperationalError as first:
            try:
                with self._connect(USER, self.password(), port, "postgres") as old:
                    if not old.execute("select rolsuper from pg_roles where rolname = current_user").fetchone()[0]:
                        raise first
                    attrs = "superuser login password {}"
                    exists = old.execute("select 1 from pg_roles where rolname = %s", (ADMIN,)).fetchone()
                    from psycopg import sql
                    old.execute(sql.SQL(("alter" if exists else "create") + " role {} " + attrs).format(
                        sql.Identifier(ADMIN), sql.Literal(pg_roles.verifier(old, ADMIN, self.admin_password()))))
            except psycopg.Error:
                raise HarnessError(f"cannot connect to PostgreSQL as its superuser {ADMIN!r} to set up its roles: "
                                   f"{redact(str(first).splitlines()[0] if str(first) else repr(first))}",
                                   "if the password files under the state folder were lost, "
                                   "`harness down --purge` starts afresh (it deletes the stack's data)") from None
            return self._connect(ADMIN, self.admin_password(), port, dbname)

    def ensure_roles(self, port: int) -> list[str]:
        """The roles, database and schema as `pg_roles` describes them (set up, or put right); returns notes.
        When all is as it should be this only reads the catalogs."""
        import psycopg
        passwords = {USER: self.password(), AUDITOR: self.audit_password()}
        force = not all(self._can_login(role, pw, port) for role, pw in passwords.items())   # a password file lost
        notes: list[str] = []
        try:
            with self._admin(port, "postgres") as conn:
                if force or not pg_roles.cluster_settled(conn, USER, AUDITOR, ADMIN, DATABASE):
                    notes += pg_roles.settle_cluster(conn, ADMIN, USER, AUDITOR, DATABASE, passwords, force)
            with self._admin(port, DATABASE) as conn:
                if not pg_roles.database_settled(conn, USER, AUDITOR, SCHEMA):
                    pg_roles.settle_database(conn, USER, AUDITOR, SCHEMA)
        except psycopg.Error as e:
            raise HarnessError(f"setting up PostgreSQL's roles failed: {redact(str(e).splitlines()[0] if str(e) else repr(e))}",
                               self.log_tail()) from None
        return notes

    def stop(self) -> tuple[bool, str | None]:
        # SIGINT is Postgres's fast shutdown (SIGTERM would wait for every client to leave).
        stopped, note = self.stop_ours(grace=30.0, first=signal.SIGINT)
        ended = end_orphaned_backends(self.data, self.server_uids())
        if ended:
            left = f"ended {len(ended)} leftover PostgreSQL process(es) of a dead server (pid(s) {', '.join(map(str, ended))})"
            note = f"{note}; {left}" if note else left
        return stopped, note


def _seen(pid: int) -> Seen | None:
    try:
        return Seen(pid, os.readlink(f"/proc/{pid}/cwd"), os.readlink(f"/proc/{pid}/exe"),
                    os.stat(f"/proc/{pid}").st_uid, procs.argv(pid))
    except OSError:
        return None


def orphaned_backends(seen: list["Seen"], data: str, uids: set[int], names: frozenset = frozenset()) -> list[int]:
    """The processes of a dead server of `data`: each runs `postgres` as a server user in `data` (a server's
    processes work in their data folder), and none of them is a postmaster (its command line names `data`;
    its children show their titles; `names`: other spellings of `data`): while one runs there, nothing is
    touched."""
    ours = [s for s in seen if s.cwd == data and os.path.basename(s.exe) == "postgres" and s.uid in uids]
    if any(arg in names or arg == data for s in ours for arg in s.argv):
        return []
    return sorted(s.pid for s in ours)


def end_orphaned_backends(data: Path, uids: set[int]) -> list[int]:
    """SIGKILL what is left of a dead server of our data folder (backends a SIGSTOP kept from noticing their
    postmaster's death: SIGKILL ends a stopped process too); the pids ended."""
    try:
        real = os.path.realpath(data)
    except OSError:
        return []
    pids = [int(d) for d in os.listdir("/proc") if d.isdigit() and int(d) != os.getpid()]
    ended = []
    names = frozenset({str(data)})
    for pid in orphaned_backends([s for s in map(_seen, pids) if s], real, uids, names):
        try:
            fd = os.pidfd_open(pid)
        except OSError:
            continue
        try:
            again = _seen(pid)           # the pidfd names this process for good: is it still one of them?
            if again is None or not orphaned_backends([again], real, uids, names):
                continue
            signal.pidfd_send_signal(fd, signal.SIGKILL)
            ended.append(pid)
        except OSError:
            continue
        finally:
            os.close(fd)
    for pid in ended:
        procs.wait_gone(pid, 5.0)
    return ended


def _check_traversable(path: Path) -> None:
    """The postgres user must be able to reach the data folder through every parent."""
    for parent in path.parents:
        mode = parent.stat().st_mode
        if not mode & 0o001:
            raise HarnessError(f"the postgres user cannot enter {parent} (mode {oct(mode & 0o777)}); "
                               f"set HARNESS_HOME to a folder under a world-searchable path such as /tmp")
