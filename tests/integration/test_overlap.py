"""Two deliveries of one payment in flight at once (the overlap fault) on the real stack: real SIGSTOP,
SIGCONT and SIGKILL; the tables counted with plain SQL, not harness code."""

import json

import psycopg
import pytest
from psycopg import sql

from harness.workload.sqlnames import table_identifier
from tests.conftest import harness
from tests.integration.test_experiments import run_exp

pytestmark = pytest.mark.integration


def rows(stack, query: str, table: str) -> list:
    with psycopg.connect(stack["dsn"]) as conn:
        return conn.execute(sql.SQL(query).format(table_identifier(table))).fetchall()


def steps(folder) -> list[dict]:
    return [json.loads(line) for line in (folder / "overlaps.jsonl").read_text().splitlines()]


def test_a_check_then_insert_lets_both_overlapping_deliveries_write_and_a_unique_key_stops_one(stack, tmp_path):
    mistake = run_exp(stack, tmp_path / "mistake", "key-check-then-insert", "--messages", "200")
    fixed = run_exp(stack, tmp_path / "fix", "dedupe", "--messages", "200", "--fault", "planned-crash",
                    "--fault", "overlap")
    planned = json.loads((tmp_path / "mistake" / "report" / "crash-plan.json").read_text())["overlaps"]
    assert planned == json.loads((tmp_path / "fix" / "report" / "crash-plan.json").read_text())["overlaps"]
    assert len(planned) == 10
    for d, name in ((mistake, "mistake"), (fixed, "fix")):
        assert len(d["crashes"]) == 20 and d["counts"]["lost"] == 0
        log = steps(tmp_path / name / "report")
        # Each episode in order: frozen by one attempt, applied by a later one, then the frozen one left.
        for i in planned:
            f, a, left = ([r for r in log if r["message_id"] == i and r["kind"] == k] for k in ("frozen", "applied",
                                                                                                 "left"))
            assert len(f) == len(a) == len(left) == 1
            assert f[0]["time"] < a[0]["time"] < left[0]["time"] and a[0]["attempt"] > f[0]["attempt"] == left[0]["attempt"]
        assert sorted(e["message_id"] for e in d["faults"] if e["fault"] == "overlap") == planned
        assert all(e["late_write"] for e in d["faults"] if e["fault"] == "overlap")
        audit = harness("audit", str(tmp_path / name / "report"), env=stack["env"])
        assert audit.returncode == 0 and "agree" in audit.stderr, audit.stdout[-3000:]
    # Without a unique key: every overlapped payment charged twice, by two workers; nothing else twice.
    assert mistake["counts"]["duplicates"] == mistake["predicted"]["duplicates"] == 10
    twice = rows(stack, "select message_id, count(distinct attempt) from {} group by message_id having count(*) > 1 "
                        "order by 1", mistake["stack"]["ledger_table"])
    assert twice == [(i, 2) for i in planned]
    assert rows(stack, "select count(*), count(distinct message_id), coalesce(sum(hits), 0) from {}",
                mistake["stack"]["dedupe_table"]) == [(210, 200, 20)]
    # With one: the same episodes, each late write a dedupe hit, the ledger exact.
    assert fixed["counts"]["duplicates"] == 0 and fixed["counts"]["dedupe_hits"] == 20 + 10
    assert rows(stack, "select count(*), count(distinct message_id), sum(amount) from {}",
                fixed["stack"]["ledger_table"]) == [(200, 200, 20_000)]
    hits = dict(rows(stack, "select message_id, hits from {} where hits > 0", fixed["stack"]["dedupe_table"]))
    assert all(hits[i] == 1 for i in planned)


def test_records_held_since_the_last_commit_by_a_frozen_worker_come_again_to_its_replacement(stack, tmp_path):
    """With --commit-every 5 the frozen worker holds applied, uncommitted records: its replacement gets them
    again (the check finds their keys: hits), and only the frozen payment itself is written twice."""
    d = run_exp(stack, tmp_path, "key-check-then-insert", "--messages", "200", "--commit-every", "5",
                "--crash-rate", "0")
    log = steps(tmp_path / "report")
    frozen = [r for r in log if r["kind"] == "frozen"]
    held = sum(len(r["unacked"]) for r in frozen)
    assert len(frozen) == 10 and held > 0
    assert d["counts"]["duplicates"] == 10 and d["counts"]["dedupe_hits"] == d["predicted"]["dedupe_hits"] == held
    assert rows(stack, "select coalesce(sum(hits), 0) from {}", d["stack"]["dedupe_table"]) == [(held,)]
