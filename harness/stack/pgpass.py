"""Postgres passwords kept in a libpq password file, never in a command line or an environment.

`harness env` hands users plain `PG*` settings and a `PGPASSFILE` that this
module writes (mode 0600, in the state folder), so `psql` works after
`eval "$(harness env)"` and the password itself is never printed. Clients
that do not read password files (the JDBC driver of the Kafka Streams
worker) get the password from `lookup`, the same rules libpq applies: the
first line whose host, port, database and user match, `*` matching anything.
"""

import os
from pathlib import Path


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace(":", "\\:")


def _fields(line: str) -> list[str]:
    out, cur, i = [], [], 0
    while i < len(line):
        ch = line[i]
        if ch == "\\" and i + 1 < len(line):
            cur.append(line[i + 1])
            i += 2
            continue
        if ch == ":":
            out.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
        i += 1
    out.append("".join(cur))
    return out


def write(path: Path, host: str, port: str | int, database: str, user: str, password: str) -> Path:
    """Write a one-line password file, readable by its owner only (libpq ignores looser ones)."""
    from ..core.safefile import PRIVATE, make_folder, write_text
    make_folder(path.parent, 0o700)
    return write_text(path, ":".join(_escape(str(v)) for v in (host, port, database, user, password)) + "\n",
                      PRIVATE)


def default_path() -> Path:
    return Path(os.environ.get("PGPASSFILE") or Path.home() / ".pgpass")


def lookup(host: str, port: str | int, database: str, user: str, path: Path | None = None) -> str | None:
    """The password libpq would take from the password file for these settings, or None."""
    try:
        text = (path or default_path()).read_text()
    except OSError:
        return None
    want = (str(host), str(port), str(database), str(user))
    for line in text.splitlines():
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        f = _fields(line)
        if len(f) != 5:
            continue
        if all(p == "*" or p == w for p, w in zip(f[:4], want)):
            return f[4]
    return None
