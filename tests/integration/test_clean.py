"""`harness clean --all` on a real stack: a crafted table name is never run as SQL, and only the
names of runs the harness knows go, never those of a run in progress."""

import subprocess
import sys
import uuid

import psycopg
import pytest
from psycopg import sql

from harness.workload import registry, tables
from harness.workload.naming import RunNames, new_run_id
from harness.workload.payments import create_topic
from tests.conftest import ROOT, harness
from tests import kafka_login

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
    registry.register(stack["dsn"], run.run_id)                       # a genuine run, finished
    registry.finish(stack["dsn"], run.run_id)
    tables.create(stack["dsn"], run.ledger_table, run.dedupe_table)   # its tables, quoted too
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


def topics_of(bootstrap: str) -> set:
    from confluent_kafka.admin import AdminClient
    return set(AdminClient(kafka_login.config(bootstrap)).list_topics(timeout=15).topics)


def test_clean_all_keeps_foreign_names_and_a_live_runs_data_and_says_so(stack, tmp_path):
    """Before: `clean --all` dropped every `harness.*` topic, every table starting like ours, and the
    tables of a run in progress (which then ended incomplete)."""
    boot, dsn = stack["bootstrap_servers"], stack["dsn"]
    done, live = RunNames(new_run_id("dedupe")), RunNames(new_run_id("dedupe"))
    foreign_topic, foreign_tables = "harness.customer-config", ["ledger_reports", "acct_receivable"]
    create_topic(boot, foreign_topic, 1)
    with psycopg.connect(dsn, autocommit=True) as conn:      # made by the run role itself: it could drop them
        tables.ensure_schema(conn)
        for t in foreign_tables:
            conn.execute(sql.SQL("create table if not exists {} (a int)").format(sql.Identifier("harness", t)))
    registry.register(dsn, done.run_id)
    registry.finish(dsn, done.run_id)
    for names in (done, live):
        create_topic(boot, names.input_topic, 1)
        tables.create(dsn, names.ledger_table, names.dedupe_table)
    # The live run: a process that registered it and still runs, as `harness run` does.
    holder = subprocess.Popen([sys.executable, "-c", "import sys, time\n"
                               "from harness.workload import registry\n"
                               "registry.register(sys.argv[1], sys.argv[2])\n"
                               "print('registered', flush=True)\n"
                               "time.sleep(300)\n", dsn, live.run_id],
                              cwd=ROOT, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "registered"
        proc = harness("clean", "--all", env=stack["env"], timeout=180)
        assert proc.returncode == 0, proc.stderr[-2000:]
        left = topics_of(boot)
        with psycopg.connect(dsn, autocommit=True) as conn:
            assert foreign_topic in left
            for t in foreign_tables:
                assert exists(conn, "harness", t), f"harness.{t} is not the harness's, yet it was dropped"
            assert live.input_topic in left
            for t in (live.ledger_table, live.dedupe_table):
                assert exists(conn, *t.split(".", 1)), f"{t} of the run in progress was dropped"
            assert done.input_topic not in left
            for t in (done.ledger_table, done.dedupe_table):
                assert not exists(conn, *t.split(".", 1)), f"{t} of a finished run should have gone"
        err = proc.stderr
        assert f"kept {foreign_topic}: no run the harness knows" in err
        for t in foreign_tables:
            assert f"kept harness.{t}: no run the harness knows" in err
        assert f"kept {live.ledger_table}: run {live.run_id} is in progress (pid {holder.pid})" in err
        assert "kept" in proc.stdout
        assert done.run_id not in registry.entries(dsn)
    finally:
        holder.kill()
        holder.wait()
        from confluent_kafka.admin import AdminClient
        admin = AdminClient(kafka_login.config(boot))
        for fut in admin.delete_topics([foreign_topic, live.input_topic], operation_timeout=30).values():
            try:
                fut.result(timeout=60)
            except Exception:  # noqa: BLE001 - gone already
                pass
        with psycopg.connect(dsn, autocommit=True) as conn:
            for t in foreign_tables:
                conn.execute(sql.SQL("drop table if exists {}").format(sql.Identifier("harness", t)))
        tables.drop(dsn, [live.ledger_table, live.dedupe_table])
        registry.forget(dsn, [live.run_id])
