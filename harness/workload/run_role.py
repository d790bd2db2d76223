"""A PostgreSQL role of one run: its consumers may touch its own tables and nothing else.

The `harness` role owns the registry of runs (`harness.runs`) and every run's
tables. A consumer under test that connected as `harness` could mark other
runs finished (and have `harness clean` drop a live run's data) or write rows
into another run's ledger (and falsify its audit). So each run's consumers,
the user's and the harness's own workers, connect as a role made for that run:

- named after the run id (`harness_run_<slug>`, quoted wherever it goes into
  SQL), with a random password made here, sent to the server as a SCRAM
  verifier computed on this side (never in argv, a log or a report);
- LOGIN and nothing else: no superuser, CREATEDB, CREATEROLE, replication or
  BYPASSRLS, no membership in any role;
- a CONNECTION LIMIT sized to the run's workers (`connection_limit`): a
  consumer that opens connections in a loop exhausts its own run's share,
  not the server's slots every other run and the harness itself need;
- CONNECT on the database, USAGE on the `harness` schema, SELECT, INSERT,
  UPDATE and DELETE on this run's own tables and USAGE on their sequences;
  nothing on `harness.runs` or any other run's table. A table the user made
  for a consumer's own effects (`--audit-sql`) is the user's to grant.

It is made with the stack's role-making connection (the local stack's
superuser; elsewhere the DSN's own role when it is a superuser or has
CREATEROLE) and carries a comment naming its run, which only such a role can
set: `drop` removes only a role with that comment, after ending its sessions
and dropping what it owns or was granted. Where no role can be made (an
external PostgreSQL whose role lacks CREATEROLE), the run's consumers get the
stack's DSN as before, and the report says what that gives up. Where a role
can be made but making it fails, the run ends with that error instead.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass

import psycopg
from psycopg import sql

from ..clients import pgconn
from ..core.errors import HarnessError

from .naming import PG_IDENTIFIER_MAX, SCHEMA, slug
from .sqlnames import table_identifier

PREFIX = "harness_run_"
COMMENT = "harness run "
LIMITED = "LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOREPLICATION NOBYPASSRLS"
TABLE_PRIVILEGES = "select, insert, update, delete"
# Each worker slot: the worker, its warm spare, a predecessor a fault keeps alive (a zombie, an overlap) and a
# pool's second connection; and a margin for a consumer's own checks and what a restart briefly overlaps.
CONNECTIONS_PER_WORKER = 4
CONNECTIONS_MARGIN = 10
# Never more than this, whatever --workers says (it goes to 64, and 4 * 64 + 10 is more than the local
# server's max_connections of 200): a run's consumers may take at most 120 of the 200 slots, so the
# harness's own audit and other runs on the stack still connect.
CONNECTIONS_AT_MOST = 120
GIVEN_UP = ("this run's consumers connect as the stack's own PostgreSQL role, which owns the registry of runs "
            "and every run's tables: a consumer could change other runs' rows and mark runs finished")


def role_name(run_id: str) -> str:
    """`harness_run_<slug of the run id>`, within PostgreSQL's 63 bytes (a long run id ends in its hash)."""
    return PREFIX + slug(run_id, PG_IDENTIFIER_MAX - len(PREFIX))


@dataclass
class Grant:
    """What a run's consumers were given: the DSN to hand them and the line the report shows."""
    dsn: str
    role: str | None            # None: no role of its own (the fallback)
    said: str
    dropped: bool = False


def connection_limit(workers: int) -> int:
    """The CONNECTION LIMIT of a run's role with `workers` worker slots (at most CONNECTIONS_AT_MOST)."""
    return min(CONNECTIONS_AT_MOST, max(1, workers) * CONNECTIONS_PER_WORKER + CONNECTIONS_MARGIN)


def _verifier(conn, role: str, password: str) -> str:
    return conn.pgconn.encrypt_password(password.encode(), role.encode(), b"scram-sha-256").decode()


def _can_make_roles(conn) -> bool:
    row = conn.execute("select rolsuper or rolcreaterole from pg_roles where rolname = current_user").fetchone()
    return bool(row and row[0])


def _sequences(conn, table: str) -> list[tuple[str, str]]:
    """(schema, name) of each sequence a column of `table` owns (a bigserial's), read from the catalog."""
    schema, _, name = table.rpartition(".")
    return conn.execute("""select sn.nspname, s.relname from pg_class t
                           join pg_namespace tn on tn.oid = t.relnamespace
                           join pg_depend d on d.refobjid = t.oid and d.classid = 'pg_class'::regclass
                                           and d.refclassid = 'pg_class'::regclass and d.deptype in ('a', 'i')
                           join pg_class s on s.oid = d.objid and s.relkind = 'S'
                           join pg_namespace sn on sn.oid = s.relnamespace
                           where tn.nspname = %s and t.relname = %s""", (schema or SCHEMA, name)).fetchall()


def create(maker_dsn: str, dsn: str, run_id: str, run_tables: list[str], workers: int = 1) -> Grant:
    """Make the run's role with rights on `run_tables` (`harness.<name>`) and connections for `workers`
    worker slots; a fallback Grant (the stack's `dsn`) when `maker_dsn`'s role may not make roles. When it may
    and the role still cannot be made (a grant refused, the server gone), HarnessError: the run does not go
    on with the stack's own login, as it once did with a warning."""
    role = role_name(run_id)
    password = secrets.token_urlsafe(24)
    r = sql.Identifier(role)
    try:
        with pgconn.connect(maker_dsn, connect_timeout=10) as conn:
            if not _can_make_roles(conn):
                return Grant(dsn, None, f"{_user(dsn)} (no role of its own: the role may not create roles; {GIVEN_UP})")
            conn.commit()
        drop(maker_dsn, run_id)             # one an earlier, killed attempt of this run id left behind
        with pgconn.connect(maker_dsn, connect_timeout=10) as conn:
            with conn.transaction():
                conn.execute(sql.SQL("create role {} " + LIMITED + " connection limit {} password {}").format(
                    r, sql.SQL(str(int(connection_limit(workers)))), sql.Literal(_verifier(conn, role, password))))
                conn.execute(sql.SQL("comment on role {} is {}").format(r, sql.Literal(COMMENT + run_id)))
                db = conn.execute("select current_database()").fetchone()[0]
                conn.execute(sql.SQL("grant connect on database {} to {}").format(sql.Identifier(db), r))
                conn.execute(sql.SQL("grant usage on schema {} to {}").format(sql.Identifier(SCHEMA), r))
                for t in run_tables:
                    conn.execute(sql.SQL("grant " + TABLE_PRIVILEGES + " on table {} to {}").format(
                        table_identifier(t), r))
                    for seq in _sequences(conn, t):
                        conn.execute(sql.SQL("grant usage, select on sequence {} to {}").format(
                            sql.Identifier(*seq), r))
    except psycopg.Error as e:      # it may make roles, so the run must not go on as the owner of every table
        first = (str(e).splitlines() or [type(e).__name__])[0]
        try:
            drop(maker_dsn, run_id)         # made in the transaction that failed, so normally gone already
        except psycopg.Error:
            pass
        raise HarnessError(f"could not make the run's PostgreSQL role {role}: {first}; its consumers would "
                           f"have connected as {_user(dsn)}, which owns the registry of runs and every run's "
                           "tables") from None
    return Grant(psycopg.conninfo.make_conninfo(dsn, user=role, password=password), role,
                 f"{role} (made for this run: only its own tables, at most {connection_limit(workers)} "
                 "connections; dropped when the run ends)")


def _user(dsn: str) -> str:
    return psycopg.conninfo.conninfo_to_dict(dsn).get("user") or "the DSN's role"


def ours(conn, role: str) -> str | None:
    """The run id in the comment of `role` when it is a run role this harness made, else None."""
    row = conn.execute("""select shobj_description(oid, 'pg_authid') from pg_roles where rolname = %s""",
                       (role,)).fetchone()
    comment = row[0] if row else None
    if not comment or not comment.startswith(COMMENT):
        return None
    run_id = comment[len(COMMENT):]
    return run_id if role_name(run_id) == role else None


def drop(maker_dsn: str, run_id: str) -> bool:
    """End the sessions of the run's role and drop it with its grants; True when it existed and went.
    A role of that name without the harness's comment is not touched."""
    role = role_name(run_id)
    with pgconn.connect(maker_dsn, autocommit=True, connect_timeout=10, even_interrupted=True) as conn:
        if ours(conn, role) != run_id:
            return False
        r = sql.Identifier(role)
        conn.execute(sql.SQL("alter role {} nologin").format(r))
        conn.execute("select pg_terminate_backend(pid) from pg_stat_activity where usename = %s "
                     "and pid <> pg_backend_pid()", (role,))
        conn.execute(sql.SQL("drop owned by {}").format(r))
        conn.execute(sql.SQL("drop role {}").format(r))
    return True


def run_ids(maker_dsn: str) -> list[str]:
    """The run ids of every run role this harness made that still exists."""
    with pgconn.connect(maker_dsn, autocommit=True, connect_timeout=10) as conn:
        names = [r[0] for r in conn.execute("select rolname from pg_roles where starts_with(rolname, %s)",
                                            (PREFIX,)).fetchall()]
        return sorted(filter(None, (ours(conn, n) for n in names)))


def give(run, made: list[str]) -> None:
    """The run's own role, allowed only `made`: its consumers connect as it (`run.worker_dsn`)."""
    run.db_role = create(run.stack.role_maker_dsn, run.stack.postgres_dsn, run.names.run_id, made,
                         workers=run.params.workers)
    run.worker_dsn = run.db_role.dsn
    if run.db_role.role is None:
        run.log(f"[{run.names.run_id}] warning: PostgreSQL role {run.db_role.said}")


def let_go(run) -> None:
    """Its sessions end and the role goes (its tables stay, owned by the stack's role); never raises."""
    if run.db_role is None or run.db_role.role is None or run.db_role.dropped:
        return
    try:
        drop(run.stack.role_maker_dsn, run.names.run_id)
    except Exception as e:  # noqa: BLE001 - `harness clean` drops it later; the report matters more
        run.log(f"[{run.names.run_id}] the run's PostgreSQL role {run.db_role.role} was not dropped "
                f"({type(e).__name__}); `harness clean {run.names.run_id}` drops it")
        # The report shows `said`: it must not keep saying the role goes when the run ends.
        run.db_role.said = (f"{run.db_role.role} (made for this run: only its own tables; NOT dropped at the "
                            f"end ({type(e).__name__}): `harness clean {run.names.run_id}` drops it)")
    run.db_role.dropped = True
