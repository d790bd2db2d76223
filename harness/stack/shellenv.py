"""`harness env`: shell settings that let anyone audit the stack with plain psql and kcat.

A run's topics and tables stay for audit, but the stack's password lives only
in the state folder. Rather than print it, `harness env` exports libpq's own
variables (PGHOST, PGPORT, PGUSER, PGDATABASE) and a PGPASSFILE that the
harness keeps with mode 0600, so `psql` needs no argument and no password
prompt. HARNESS_BOOTSTRAP_SERVERS is the address to give `kcat -b` (and
HARNESS_KAFKA_CONFIG_FILE, when the stack needs client settings, the file to
give `kcat -F`); together
with HARNESS_POSTGRES_DSN (without its password: libpq reads the password
file) it is also what the harness's own commands read, and the harness
recognises its own local stack behind them (see `resolve`).

Settings for a stack that does not answer would send every later command of
that shell to a dead address, so `unusable()` checks first that each
service runs and answers, and `harness env` refuses in one line otherwise.
"""

import shlex
from pathlib import Path

import psycopg

from ..core.errors import HarnessError
from . import health, pgpass
from .stack import Stack, redact

PGPASS_NAME = "pgpass"
PROBE_S = 8.0        # a stack that answers does so in well under this


def settings(stack: Stack, state: Path, kafka_config_file: Path | None = None) -> dict[str, str]:
    """The variables to export, in order. The password goes into `<state>/pgpass`, never in here;
    Kafka credentials stay in their 0600 client settings file, which kcat reads with -F."""
    try:
        d = psycopg.conninfo.conninfo_to_dict(stack.postgres_dsn)
    except psycopg.ProgrammingError:
        raise HarnessError("the stack's Postgres address is not a valid connection string")
    host, port = d.get("host") or "127.0.0.1", str(d.get("port") or 5432)
    user, db = d.get("user") or "", d.get("dbname") or d.get("user") or ""
    out = {"PGHOST": host, "PGPORT": port}
    if user:
        out["PGUSER"] = user
    if db:
        out["PGDATABASE"] = db
    password = d.pop("password", None)
    if password:
        try:
            out["PGPASSFILE"] = str(pgpass.write(state / PGPASS_NAME, host, port, db or "*", user or "*", password))
        except OSError as e:
            raise HarnessError(f"cannot write the password file {state / PGPASS_NAME}: {e.strerror or e}") from None
    out["HARNESS_BOOTSTRAP_SERVERS"] = stack.bootstrap_servers
    if kafka_config_file:
        out["HARNESS_KAFKA_CONFIG_FILE"] = str(Path(kafka_config_file).absolute())
    out["HARNESS_POSTGRES_DSN"] = psycopg.conninfo.make_conninfo(**d)
    return out


def unusable(stack: Stack) -> str | None:
    """Why the settings of `stack` would not reach it (a service stopped or not answering), else None."""
    down = sorted(k for k, pid in (stack.pids or {}).items() if not pid) if stack.kind == "local" else []
    if down:
        return (f"{', '.join(down)} of the local stack {'is' if len(down) == 1 else 'are'} not running: "
                f"start {'it' if len(down) == 1 else 'them'} with `harness up`")
    err = health.kafka_probe(stack.bootstrap_servers, PROBE_S, brokers=stack.brokers if stack.owned else 1)
    if err:
        return f"Kafka at {stack.bootstrap_servers} does not answer: {err}"
    err = health.postgres_probe(stack.postgres_dsn, PROBE_S)
    if err:
        return f"PostgreSQL at {redact(stack.postgres_dsn)} does not answer: {redact(err)}"
    return None


def shell_lines(values: dict[str, str]) -> str:
    """`export NAME=value` lines, each value quoted for sh, bash and zsh."""
    return "".join(f"export {k}={shlex.quote(v)}\n" for k, v in values.items())
