"""Audit a run yourself on the real stack: `harness env` + psql, and `harness audit` agreeing,
then catching a row someone added, then saying the data is gone after `harness clean`."""

import json
import shlex
import shutil
import subprocess
import sys

import pytest

from tests.conftest import ROOT, harness, searchable_dir

pytestmark = pytest.mark.integration


def test_env_then_plain_psql_works_and_never_shows_the_password(stack):
    password = stack["dsn"].split("@")[0].split(":")[-1]
    env = harness("env", env=stack["env"], check=True)
    assert password not in env.stdout + env.stderr
    assert "export PGPASSFILE=" in env.stdout and "export HARNESS_BOOTSTRAP_SERVERS=" in env.stdout
    js = json.loads(harness("env", "--json", env=stack["env"], check=True).stdout)
    assert password not in json.dumps(js) and js["HARNESS_BOOTSTRAP_SERVERS"] == stack["bootstrap_servers"]
    if not shutil.which("psql"):
        pytest.skip("psql is not installed")
    # The Python that runs the tests has the harness: a fresh machine's python3 may not (scripts/setup.sh's venv).
    script = f'unset PGPASSWORD; eval "$({shlex.quote(sys.executable)} -m harness.cli env)"; psql -w -At -c "select 40 + 2"'
    proc = subprocess.run(["bash", "-c", script], capture_output=True, text=True, cwd=ROOT, timeout=60,
                          env={**__import__("os").environ, **stack["env"]})
    assert proc.returncode == 0 and proc.stdout.strip() == "42", proc.stderr
    assert password not in proc.stdout + proc.stderr


def test_audit_agrees_then_names_an_added_row_then_says_the_data_is_gone(stack, tmp_path):
    out = tmp_path / "run"
    run = harness("run", "eos-dedupe", "--messages", "120", "--seed", "11", "--quiet", "--out", str(out),
                  env=stack["env"], timeout=600)
    assert run.returncode == 0, run.stderr[-2000:]
    assert f"report: {out / 'report.html'}" in run.stderr and f"harness audit {out}" in run.stderr
    ok = harness("audit", str(out), "--json", env=stack["env"])
    assert ok.returncode == 0, ok.stdout + ok.stderr
    rows = json.loads(ok.stdout)[out.name]
    stores = {r["store"] for r in rows}
    assert {"input", "ledger", "dedupe table", "output read_committed", "output read_uncommitted",
            "anomalies"} <= stores
    assert all(r["agrees"] for r in rows)
    classes = {r["metric"].split(":")[0]: r for r in rows if r["store"] == "anomalies"}
    assert set(classes) == {"duplicate", "torn-transaction"}            # the eos workers name their transactions
    assert all(r["reported"] == r["recounted"] == 0 for r in classes.values())
    # the read_committed reader that ran beside the workers saw exactly the committed records up to where it got
    (during,) = [r for r in rows if r["metric"].startswith("records the reader during the run saw")]
    assert during["agrees"] and 0 < during["reported"] <= 120

    d = json.loads((out / "report.json").read_text())
    import psycopg
    from psycopg import sql
    from harness.workload.sqlnames import table_identifier
    never_crashed = next(f"pay-{i:06d}" for i in range(1, 121)
                         if f"pay-{i:06d}" not in {c["message_id"] for c in d["crashes"]})
    with psycopg.connect(stack["dsn"], autocommit=True) as conn:
        conn.execute(sql.SQL("insert into {} (message_id, amount, worker, attempt) values (%s, 100, 'someone', 1)")
                     .format(table_identifier(d["stack"]["ledger_table"])), (never_crashed,))
    bad = harness("audit", str(out), env=stack["env"])
    assert bad.returncode == 1, bad.stdout + bad.stderr
    assert f"ids the report accounts for nowhere: {never_crashed}" in bad.stdout
    assert "DIFFERS" in bad.stdout

    harness("clean", d["run_id"], env=stack["env"], check=True)
    gone = harness("audit", str(out), env=stack["env"])
    assert gone.returncode == 2 and "data is gone" in gone.stderr and "Traceback" not in gone.stderr


def test_audit_with_the_stack_down_says_how_to_bring_it_up(tmp_path):
    home = searchable_dir("harness-audit-down-")
    try:
        run = tmp_path / "run"
        run.mkdir()
        from tests.unit.sample_report import sample
        (run / "report.json").write_text(json.dumps(sample()))
        proc = harness("audit", str(run), env={"HARNESS_HOME": str(home), "HARNESS_BOOTSTRAP_SERVERS": "",
                                               "HARNESS_POSTGRES_DSN": "", "HARNESS_STACK": "local"})
        assert proc.returncode == 2 and "harness up" in proc.stderr and "Traceback" not in proc.stderr
        assert len([l for l in proc.stderr.splitlines() if l.strip()]) == 1
    finally:
        shutil.rmtree(home, ignore_errors=True)


def test_an_external_cluster_is_asked_its_version_and_our_own_addresses_mean_our_stack(stack):
    own = json.loads(harness("status", "--json", env=stack["env"], check=True).stdout)
    assert own["kind"] == "local" and own["kafka_version"]
    elsewhere = searchable_dir("harness-external-")
    try:
        ext = json.loads(harness("status", "--json", env={**stack["env"], "HARNESS_HOME": str(elsewhere)},
                                 check=True).stdout)
        assert ext["kind"] == "external"
        assert ext["kafka_version"].startswith("metadata.version ")
        assert ext["kafka_version"].split()[-1].startswith(own["kafka_version"].rsplit(".", 1)[0])
    finally:
        shutil.rmtree(elsewhere, ignore_errors=True)


def test_audit_recounts_a_services_rows_outbox_and_events(stack, tmp_path):
    out = tmp_path / "outbox"
    run = harness("run", "outbox", "--messages", "90", "--seed", "13", "--quiet", "--out", str(out),
                  env=stack["env"], timeout=600)
    assert run.returncode == 0, run.stderr[-2000:]
    ok = harness("audit", str(out), "--json", env=stack["env"])
    assert ok.returncode == 0, ok.stdout + ok.stderr
    rows = {(r["store"], r["metric"]): r for r in json.loads(ok.stdout)[out.name]}
    assert rows[("service", "duplicated events")]["agrees"] and rows[("service", "outbox rows")]["recounted"] == 90
    assert all(r["agrees"] is not False for r in rows.values())


def test_audit_recounts_the_balances_and_the_keys_a_mistake_left(stack, tmp_path):
    """increment: each account's balance recounted in SQL (a balance changed by hand is caught);
    key-before-effect: its dedupe table keeps the keys of the payments it lost, and still agrees."""
    runs = {}
    for name, seed in (("increment", 17), ("key-before-effect", 19)):
        out = tmp_path / name
        run = harness("run", name, "--messages", "150", "--seed", str(seed), "--quiet", "--out", str(out),
                      env=stack["env"], timeout=600)
        assert run.returncode == 0, run.stderr[-2000:]
        ok = harness("audit", str(out), "--json", env=stack["env"])
        assert ok.returncode == 0, ok.stdout + ok.stderr
        runs[name] = (out, {(r["store"], r["metric"]): r for r in json.loads(ok.stdout)[out.name]})
        assert all(r["agrees"] is not False for r in runs[name][1].values())
    out, rows = runs["increment"]
    balances = [r for (store, metric), r in rows.items() if store == "accounts" and metric.endswith(": balance")]
    assert balances and all(r["agrees"] for r in balances)
    d = json.loads((out / "report.json").read_text())
    assert sum(r["recounted"] for r in balances) == d["accounts"]["actual_total"] > d["accounts"]["expected_total"]
    kb_out, kb = runs["key-before-effect"]
    kb_report = json.loads((kb_out / "report.json").read_text())
    assert kb_report["counts"]["lost"] > 0 and kb[("dedupe table", "keys")]["agrees"]
    assert kb[("dedupe table", "keys")]["recounted"] > kb_report["counts"]["effects"] - kb_report["counts"]["duplicates"]

    import psycopg
    from psycopg import sql
    from harness.workload.sqlnames import table_identifier
    account = d["accounts"]["accounts"][0]["account"]
    with psycopg.connect(stack["dsn"], autocommit=True) as conn:
        conn.execute(sql.SQL("update {} set balance = balance + 1 where account = %s")
                     .format(table_identifier(d["stack"]["accounts_table"])), (account,))
    bad = harness("audit", str(out), env=stack["env"])
    assert bad.returncode == 1 and f"accounts {account}: balance" in bad.stdout, bad.stdout + bad.stderr


def test_the_audit_sql_a_report_names_cannot_write(stack):
    """`harness audit` runs a custom run's --audit-sql again from its report.json, which anyone can edit:
    a second statement (after a `commit` that ends the read-only transaction) must not run."""
    import psycopg
    from harness.checker import recount
    table = "harness.audit_sql_must_not_create_this"
    for query in (f"select 'pay-1', 1; commit; create table {table} (x int); select 'pay-1', 1",
                  f"create table {table} (x int)"):
        with pytest.raises(recount.Unreadable):
            recount.effects_from_sql(stack["dsn"], query)
    with psycopg.connect(stack["dsn"]) as conn:
        assert conn.execute("select to_regclass(%s)", (table,)).fetchone()[0] is None
    assert recount.effects_from_sql(stack["dsn"], "select 'pay-1', 2") == [("pay-1", 2)]
