"""The run's Postgres tables: the ledger (one row per applied effect), the dedupe table, and a service's rows and outbox.

The ledger is what a payment system would have: a row per charge. The checker
reads only this table (and the dedupe table) to count effects, so anyone can
re-check a run with psql. The dedupe table's primary key is what makes
redeliveries harmless in `dedupe` and `eos-dedupe`; `hits` counts how many
redeliveries it absorbed.

The rejects table (key-fingerprint) holds each request refused because its
key was stored with another fingerprint (the same id, another payload).

The accounts table (experiments with balances) holds one row per account:
its balance, its version and `stale_updates`, the conditional updates that
found a newer version and changed nothing (redeliveries absorbed).

The harness's own workers fill `worker` and `attempt`; a consumer under test
(`harness run custom`) writes only `message_id` and `amount`, so every other
column has a default (null, or the time of the insert in `applied_at`).

Every table name goes into SQL as a quoted identifier (`sqlnames`), and the
listing used by `harness clean` returns only names this harness creates.
"""

from psycopg import sql

from .naming import SCHEMA, is_run_table
from .sqlnames import table_identifier
from ..clients import pgconn


def ensure_schema(conn) -> None:
    """The `harness` schema, created only when missing: the local stack's run role owns it but may not
    create schemas (CREATE on the database), and `create schema if not exists` asks for that first."""
    if conn.execute("select 1 from pg_namespace where nspname = %s", (SCHEMA,)).fetchone() is None:
        conn.execute(sql.SQL("create schema {}").format(sql.Identifier(SCHEMA)))


def create(dsn: str, ledger: str, dedupe: str | None, accounts_table: str | None = None,
           accounts: list | tuple = (), dedupe_unique: bool = True) -> None:
    with pgconn.connect(dsn, autocommit=True, connect_timeout=10) as conn:
        ensure_schema(conn)
        conn.execute(sql.SQL("""create table {} (
            id          bigserial primary key,
            message_id  text not null,
            amount      bigint not null,
            worker      text,
            attempt     integer,
            applied_at  timestamptz not null default clock_timestamp())""").format(table_identifier(ledger)))
        if dedupe:
            # Without `dedupe_unique` the key is a plain indexed column: nothing stops two rows of one key.
            conn.execute(sql.SQL("""create table {} (
                message_id  text {},
                first_at    timestamptz not null default clock_timestamp(),
                hits        integer not null default 0,
                fingerprint text,
                response    text)""").format(table_identifier(dedupe),
                                             sql.SQL("primary key" if dedupe_unique else "not null")))
            if not dedupe_unique:
                conn.execute(sql.SQL("create index on {} (message_id)").format(table_identifier(dedupe)))
        if accounts_table:
            conn.execute(sql.SQL("""create table {} (
                account        text primary key,
                balance        bigint not null default 0,
                version        integer not null default 0,
                stale_updates  integer not null default 0)""").format(table_identifier(accounts_table)))
            for a in accounts:
                conn.execute(sql.SQL("insert into {} (account) values (%s)").format(table_identifier(accounts_table)),
                             (a,))


def create_rejects(dsn: str, rejects: str) -> None:
    """Requests refused because their key was already stored with another fingerprint: one row per input
    record (its partition and offset), so a redelivered rejection adds none."""
    with pgconn.connect(dsn, autocommit=True, connect_timeout=10) as conn:
        ensure_schema(conn)
        conn.execute(sql.SQL("""create table {} (
            message_id       text not null,
            amount           bigint not null,
            fingerprint      text not null,
            key_fingerprint  text,
            input_partition  integer not null,
            input_offset     bigint not null,
            rejected_at      timestamptz not null default clock_timestamp(),
            primary key (input_partition, input_offset))""").format(table_identifier(rejects)))


def create_service_tables(dsn: str, rows: str, outbox: str | None) -> None:
    """A service's business rows (one per payment request, keyed by its id) and, for the outbox
    pattern, the outbox: the event to publish, written in the row's transaction, `sent_at` set by
    the relay once published."""
    with pgconn.connect(dsn, autocommit=True, connect_timeout=10) as conn:
        ensure_schema(conn)
        conn.execute(sql.SQL("""create table {} (
            message_id  text primary key,
            amount      bigint not null,
            worker      text not null,
            attempt     integer not null,
            created_at  timestamptz not null default clock_timestamp())""").format(table_identifier(rows)))
        if outbox:
            conn.execute(sql.SQL("""create table {} (
                id          bigserial primary key,
                message_id  text not null unique,
                payload     text not null,
                created_at  timestamptz not null default clock_timestamp(),
                sent_at     timestamptz)""").format(table_identifier(outbox)))


def drop(dsn: str, tables: list[str]) -> None:
    with pgconn.connect(dsn, autocommit=True, connect_timeout=10) as conn:
        for t in tables:
            conn.execute(sql.SQL("drop table if exists {}").format(table_identifier(t)))


def list_run_tables(dsn: str) -> list[str]:
    """`harness.<name>` for each table of the harness schema that this harness could have created.

    Anything else in the schema (a table someone made by hand, a crafted name) is not listed,
    so `harness clean --all` never touches it.
    """
    with pgconn.connect(dsn, autocommit=True, connect_timeout=10) as conn:
        rows = conn.execute("select table_name from information_schema.tables where table_schema = %s",
                            (SCHEMA,)).fetchall()
    return [f"{SCHEMA}.{r[0]}" for r in rows if is_run_table(r[0])]
