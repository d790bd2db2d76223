"""`harness clean --all` on a real Postgres: a crafted table name is never run as SQL."""

import uuid

import psycopg
import pytest
from psycopg import sql

from harness.workload import tables
from harness.workload.naming import RunNames, new_run_id
from tests.conftest import harness

pytestmark = pytest.mark.integration


def exists(conn, schema: str, table: str) -> bool:
    return conn.execute("select count(*) from information_schema.tables where table_schema = %s and table_name = %s",
                        (schema, table)).fetchone()[0] == 1


def test_clean_all_never_runs_a_table_name_as_sql(stack):
    """Before quoting, `drop table if exists harness.ledger_q; drop table <victim>; --` dropped the victim."""
    schema = f"victims_{uuid.uuid4().hex[:8]}"
    crafted = f"ledger_q; drop table {schema}.victim2; --"
    run = RunNames(new_run_id("dedupe"))
    with psycopg.connect(stack["admin_dsn"], autocommit=True) as conn:     # the run role creates no schema
        conn.execute(sql.SQL("create schema {}").format(sql.Identifier(schema)))
        conn.execute(sql.SQL("create table {} (a int)").format(sql.Identifier(schema, "victim2")))
        conn.execute(sql.SQL("grant all on schema {} to harness").format(sql.Identifier(schema)))
        conn.execute(sql.SQL("grant all on {} to harness").format(sql.Identifier(schema, "victim2")))
    with psycopg.connect(stack["dsn"], autocommit=True) as conn:
        conn.execute(sql.SQL("create table {} (a int)").format(sql.Identifier("harness", crafted)))
    tables.create(stack["dsn"], run.ledger_table, run.dedupe_table)   # a genuine run's tables, quoted too
    try:
        proc = harness("clean", "--all", env=stack["env"], timeout=180)
        assert proc.returncode == 0, proc.stderr[-2000:]
        with psycopg.connect(stack["dsn"], autocommit=True) as conn:
            assert exists(conn, schema, "victim2"), "the crafted name ran as SQL and dropped the victim"
            assert exists(conn, "harness", crafted), "a name that is not the harness's own was touched"
            for t in (run.ledger_table, run.dedupe_table):
                assert not exists(conn, *t.split(".", 1)), f"{t} should have been cleaned"
    finally:
        with psycopg.connect(stack["admin_dsn"], autocommit=True) as conn:
            conn.execute(sql.SQL("drop table if exists {}").format(sql.Identifier("harness", crafted)))
            conn.execute(sql.SQL("drop schema if exists {} cascade").format(sql.Identifier(schema)))
