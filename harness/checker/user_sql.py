"""SQL the harness did not write (a custom run's `--audit-sql`): run it with the least the database allows.

The query is the user's, given on a command line (`harness run custom
--audit-sql`, `harness audit --audit-sql`); a report's copy of it is never run,
since anyone can edit a report. It runs:

- as the stack's read-only role when the harness made the database (the local
  stack's `harness_audit`: it can SELECT the `harness` schema's tables and
  nothing else, is no superuser and holds no server role, so `COPY ... TO
  PROGRAM` and server file reads fail), else as the stack's own role;
- in a READ ONLY transaction with a statement timeout;
- as ONE prepared statement: the extended protocol refuses a second one, so a
  `; commit; drop table ...` cannot end the read-only transaction.

On an external or compose stack there is no read-only role to use: the
transaction and the timeout hold, and what the query may read is whatever the
user's own role may.
"""

from psycopg import sql
from ..clients import pgconn

TIMEOUT_MS = 60_000


def dsn_for(stack) -> str:
    """Where SQL read from a command line or a file runs: the stack's read-only role if it has one."""
    return getattr(stack, "audit_dsn", "") or stack.postgres_dsn


def select(dsn: str, query: str, timeout_ms: int = TIMEOUT_MS) -> tuple[int, list]:
    """(columns, rows) of `query`, run read-only, as one prepared statement, with a statement timeout.
    Raises psycopg.Error as the server refused it."""
    with pgconn.connect(dsn, connect_timeout=10) as conn:
        conn.read_only = True
        with conn.transaction(force_rollback=True):
            conn.execute(sql.SQL("set local statement_timeout = {}").format(sql.Literal(int(timeout_ms))))
            cur = conn.execute(query, prepare=True)
            return (0, []) if cur.description is None else (len(cur.description), cur.fetchall())
