"""The run's Postgres tables: the ledger (one row per applied effect) and the dedupe table.

The ledger is what a payment system would have: a row per charge. The checker
reads only this table (and the dedupe table) to count effects, so anyone can
re-check a run with psql. The dedupe table's primary key is what makes
redeliveries harmless in `dedupe` and `eos-dedupe`; `hits` counts how many
redeliveries it absorbed.
"""

import psycopg

from .naming import SCHEMA


def create(dsn: str, ledger: str, dedupe: str | None) -> None:
    with psycopg.connect(dsn, autocommit=True, connect_timeout=10) as conn:
        conn.execute(f"create schema if not exists {SCHEMA}")
        conn.execute(f"""create table {ledger} (
            id          bigserial primary key,
            message_id  text not null,
            amount      bigint not null,
            worker      text not null,
            attempt     integer not null,
            applied_at  timestamptz not null default clock_timestamp())""")
        if dedupe:
            conn.execute(f"""create table {dedupe} (
                message_id  text primary key,
                first_at    timestamptz not null default clock_timestamp(),
                hits        integer not null default 0)""")


def drop(dsn: str, tables: list[str]) -> None:
    with psycopg.connect(dsn, autocommit=True, connect_timeout=10) as conn:
        for t in tables:
            conn.execute(f"drop table if exists {t}")


def list_run_tables(dsn: str) -> list[str]:
    with psycopg.connect(dsn, autocommit=True, connect_timeout=10) as conn:
        rows = conn.execute("select table_name from information_schema.tables where table_schema = %s",
                            (SCHEMA,)).fetchall()
    return [f"{SCHEMA}.{r[0]}" for r in rows]
