"""The common mistakes (idempotency keys, blind increments) on the real stack, with real SIGKILLs:
observed == predicted, and the tables re-counted here with plain SQL."""

import json

import psycopg
import pytest
from psycopg import sql

from harness.workload.sqlnames import table_identifier
from tests.conftest import harness
from tests.integration.test_experiments import run_exp
from tests.unit.sample_report import validate_suite

pytestmark = pytest.mark.integration


def count(stack, query: str, table: str) -> int:
    with psycopg.connect(stack["dsn"]) as conn:
        return conn.execute(sql.SQL(query).format(table_identifier(table))).fetchone()[0]


def crashed(d) -> set:
    return {c["message_id"] for c in d["crashes"]}


def test_key_after_effect_charges_again_what_crashed_before_its_key(stack, tmp_path):
    d = run_exp(stack, tmp_path / "one", "key-after-effect", "--messages", "200")
    c = d["counts"]
    assert c["duplicates"] == d["predicted"]["duplicates"] == len(d["crashes"]) == 20
    assert set(d["anomalies"]["duplicate_ids"]) <= crashed(d)
    assert c["dedupe_hits"] == 0 < c["deliveries"] - c["sent"]
    assert count(stack, "select count(*) from {}", d["stack"]["ledger_table"]) == 220
    # Committing every 5: the earlier uncommitted records find their keys, the crashed one does not.
    d = run_exp(stack, tmp_path / "five", "key-after-effect", "--messages", "200", "--commit-every", "5")
    c = d["counts"]
    assert c["duplicates"] == len(d["crashes"]) and 0 < c["dedupe_hits"] < c["deliveries"] - c["sent"]
    assert c["dedupe_hits"] == d["predicted"]["dedupe_hits"]
    assert count(stack, "select coalesce(sum(hits), 0) from {}", d["stack"]["dedupe_table"]) == c["dedupe_hits"]


def test_key_before_effect_skips_what_crashed_after_its_key_forever(stack, tmp_path):
    d = run_exp(stack, tmp_path, "key-before-effect", "--messages", "200")
    c = d["counts"]
    assert c["lost"] == d["predicted"]["lost"] == len(d["crashes"]) == 20 and c["duplicates"] == 0
    assert set(d["anomalies"]["lost_ids"]) == crashed(d)
    assert c["dedupe_hits"] == 20
    assert count(stack, "select count(*) from {}", d["stack"]["dedupe_table"]) == 200    # a key for every payment
    assert count(stack, "select count(distinct message_id) from {}", d["stack"]["ledger_table"]) == 180


def test_key_per_attempt_never_finds_its_key(stack, tmp_path):
    d = run_exp(stack, tmp_path, "key-per-attempt", "--messages", "200")
    c = d["counts"]
    assert c["duplicates"] == d["predicted"]["duplicates"] == 20 and c["dedupe_hits"] == 0
    assert count(stack, "select count(*) from {}", d["stack"]["dedupe_table"]) == c["effects"] == 220


def test_key_expiry_charges_again_only_when_the_ttl_is_shorter_than_the_redelivery(stack, tmp_path):
    short = run_exp(stack, tmp_path / "short", "key-expiry", "--messages", "30", "--dedupe-ttl", "1",
                    "--restart-delay", "4")
    assert short["counts"]["duplicates"] == short["predicted"]["duplicates"] == len(short["crashes"]) == 3
    assert short["predicted"]["exact"] and short["counts"]["dedupe_hits"] is None     # purged keys take their hits
    assert short["params"]["dedupe_ttl"] == 1 and short["params"]["restart_delay"] == 4
    long = run_exp(stack, tmp_path / "long", "key-expiry", "--messages", "30", "--dedupe-ttl", "60",
                   "--restart-delay", "4")
    assert long["counts"]["duplicates"] == long["predicted"]["duplicates"] == 0 and len(long["crashes"]) == 3
    assert long["ledger"]["actual_total"] == long["ledger"]["expected_total"]


def test_a_blind_increment_is_over_by_each_accounts_redelivered_amounts(stack, tmp_path):
    d = run_exp(stack, tmp_path, "increment", "--messages", "200", "--partitions", "2", "--workers", "2")
    bal = d["accounts"]
    assert bal["actual_total"] - bal["expected_total"] == 100 * len(d["crashes"]) == 2_000
    assert all(a["actual"] == a["predicted"] for a in bal["accounts"])
    with psycopg.connect(stack["dsn"]) as conn:
        rows = dict(conn.execute(sql.SQL("select account, balance from {}").format(
            table_identifier(d["stack"]["accounts_table"]))).fetchall())
    assert rows == {a["account"]: a["actual"] for a in bal["accounts"]}


def test_a_versioned_write_keeps_every_balance_exact(stack, tmp_path):
    d = run_exp(stack, tmp_path, "versioned", "--messages", "200", "--partitions", "2", "--workers", "2")
    bal, c = d["accounts"], d["counts"]
    assert all(a["actual"] == a["expected"] for a in bal["accounts"]) and len(bal["accounts"]) == 5
    assert c["dedupe_hits"] == d["predicted"]["dedupe_hits"] == len(d["crashes"]) == 20
    assert (c["duplicates"], c["lost"]) == (0, 0)
    assert count(stack, "select sum(stale_updates) from {}", d["stack"]["accounts_table"]) == 20


@pytest.mark.slow          # 26 s; the default run keeps the mistakes' own runs and test_experiment_files' suite groups
def test_suite_group_runs_the_mistakes_only(stack, tmp_path):
    out = tmp_path / "suite"
    proc = harness("suite", "--group", "mistakes", "--messages", "30", "--parallel", "2", "--quiet", "--out",
                   str(out), env=stack["env"], timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    s = json.loads((out / "suite.json").read_text())
    validate_suite(s)
    assert s["group"] == "mistakes"
    names = [r["experiment"] for r in s["experiments"]]
    assert {"key-after-effect", "key-before-effect", "key-per-attempt", "key-expiry", "increment",
            "versioned"} <= set(names)
    assert "offset-after" not in names and {r["verdict"] for r in s["experiments"]} == {"as-predicted"}
    assert "versioned" in s["conclusion"]
