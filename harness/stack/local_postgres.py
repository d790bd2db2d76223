"""PostgreSQL from Debian's server binaries, in our own data folder and port.

`initdb` refuses to run as root, and our CI runs as root: then every server
command runs as the `postgres` system user (created by Debian's package), and
the data folder belongs to it. The server listens on 127.0.0.1 only, requires
a password (scram-sha-256) and keeps its socket inside its own folder, so it
never collides with a system cluster. The password is generated once and
kept in `<state>/postgres.password` (mode 0600); it is never printed.

`pg_ctl start` makes the server; we then record its pid record in
`postgres/postgres.pid` (see `pidrecord`). The server is only ever signalled,
by pid and never as a group (pg_ctl made that session, not us), when the
record matches (pid, start time, our data folder on its command line) and
Postgres's own `postmaster.pid` names the same pid and data folder. We do not
use `pg_ctl stop`: it would signal whatever pid postmaster.pid holds.
"""

import glob
import os
import pwd
import secrets
import shutil
import signal
import subprocess
from pathlib import Path

from ..errors import HarnessError
from . import pidrecord

USER = "harness"
DATABASE = "harness"
SERVER_SETTINGS = {
    "listen_addresses": "127.0.0.1",
    "max_connections": "200",
    "shared_buffers": "128MB",
    # Durable commits, as in production: a crash test should not lean on a lenient database.
    "fsync": "on",
    "log_min_messages": "warning",
}
# pg_ctl -w waits for the server to accept connections; a healthy one starts in ~1 s.
START_TIMEOUT_S = 60
MISSING = ("PostgreSQL server binaries (initdb, pg_ctl, postgres) not found: "
           "install Debian's package `postgresql` (apt-get install postgresql), or set HARNESS_PG_BIN")


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
        if os.geteuid() == 0:
            pw = pwd.getpwnam("postgres")
            for root, dirs, files in os.walk(path):
                for name in [root, *[os.path.join(root, d) for d in dirs], *[os.path.join(root, f) for f in files]]:
                    os.chown(name, pw.pw_uid, pw.pw_gid)

    def password(self) -> str:
        if not self.password_file.exists():
            self.password_file.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.password_file, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "w") as f:
                f.write(secrets.token_urlsafe(18) + "\n")
        return self.password_file.read_text().strip()

    def dsn(self, port: int) -> str:
        return f"postgresql://{USER}:{self.password()}@127.0.0.1:{port}/{DATABASE}"

    # -- lifecycle -----------------------------------------------------------
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
        try:
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""

    def _run(self, cmd: list[str], what: str, timeout: float) -> None:
        try:
            proc = subprocess.run(self._as_server_user() + cmd, capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            raise HarnessError(f"PostgreSQL {what} did not finish within {timeout:.0f} s", self.log_tail())
        if proc.returncode != 0:
            raise HarnessError(f"PostgreSQL {what} failed (exit {proc.returncode})",
                               ((proc.stdout + proc.stderr).strip() + "\n" + self.log_tail())[-3000:])

    def init(self, bindir: Path) -> None:
        if (self.data / "PG_VERSION").exists():
            return
        self.home.mkdir(parents=True, exist_ok=True)
        pwfile = self.home / "initdb.pw"
        pwfile.write_text(self.password() + "\n")
        self._chown(self.home)
        if os.geteuid() == 0:
            _check_traversable(self.home)
        try:
            self._run([str(bindir / "initdb"), "-D", str(self.data), "-U", USER, "--pwfile", str(pwfile),
                       "--auth", "scram-sha-256", "-E", "UTF8", "--locale", "C", "--no-sync"], "initdb", 120)
        finally:
            pwfile.unlink(missing_ok=True)
        with open(self.data / "postgresql.conf", "a") as f:
            f.write("\n# written by harness\n")
            f.write("".join(f"{k} = '{v}'\n" for k, v in SERVER_SETTINGS.items()))
            f.write(f"unix_socket_directories = '{self.home}'\n")

    def start(self, bindir: Path, port: int, owner: str) -> None:
        self.init(bindir)
        self.log.touch()
        self._chown(self.home)
        self._run([str(bindir / "pg_ctl"), "-D", str(self.data), "-l", str(self.log), "-w",
                   "-t", str(START_TIMEOUT_S), "-o", f"-p {port}", "start"], "start", START_TIMEOUT_S + 10)
        pm = self.postmaster()
        try:
            if pm is None or pm[1] != str(self.data):
                raise ProcessLookupError
            rec = pidrecord.capture(pm[0], [str(self.data)], group=False, ports={"postgres": port}, owner=owner)
        except ProcessLookupError:
            raise HarnessError("PostgreSQL started but left no usable postmaster.pid", self.log_tail())
        pidrecord.write(self.pidfile, rec)
        # The database named in the DSN (initdb made only `postgres`).
        import psycopg
        admin_dsn = self.dsn(port).rsplit("/", 1)[0] + "/postgres"
        with psycopg.connect(admin_dsn, autocommit=True, connect_timeout=10) as conn:
            if not conn.execute("select 1 from pg_database where datname = %s", (DATABASE,)).fetchone():
                conn.execute(f"create database {DATABASE}")

    def stop(self) -> tuple[bool, str | None]:
        # SIGINT is Postgres's fast shutdown (SIGTERM would wait for every client to leave).
        return self.stop_ours(grace=30.0, first=signal.SIGINT)


def _check_traversable(path: Path) -> None:
    """The postgres user must be able to reach the data folder through every parent."""
    for parent in path.parents:
        mode = parent.stat().st_mode
        if not mode & 0o001:
            raise HarnessError(f"the postgres user cannot enter {parent} (mode {oct(mode & 0o777)}); "
                               f"set HARNESS_HOME to a folder under a world-searchable path such as /tmp")
