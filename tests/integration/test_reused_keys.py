"""A key reused with another payload (key-reuse, key-fingerprint) on the real stack, with real SIGKILLs:
the input topic read with confluent_kafka directly and the tables with plain SQL, not harness code."""

import json
import time

import psycopg
import pytest
from psycopg import sql

from harness.runtime.crashplan import CrashPlan
from harness.workload.sqlnames import table_identifier
from tests.conftest import harness
from tests.integration.test_experiments import run_exp
from tests import kafka_login

pytestmark = pytest.mark.integration


def input_amounts(bootstrap: str, topic: str) -> dict:
    """key -> [amount of each record with that key, in offset order], read with a plain consumer."""
    from confluent_kafka import Consumer, TopicPartition
    c = Consumer(kafka_login.config(bootstrap, {"group.id": f"plain-{time.time_ns()}",
                  "enable.auto.commit": False}))
    parts = sorted(c.list_topics(topic, timeout=10).topics[topic].partitions)
    ends = {p: c.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1] for p in parts}
    c.assign([TopicPartition(topic, p, 0) for p in parts])
    out, deadline = {}, time.time() + 60
    while time.time() < deadline:
        for m in c.consume(500, 0.5):
            if not m.error():
                out.setdefault(m.key().decode(), []).append(json.loads(m.value())["amount"])
        if all(tp.offset >= ends[tp.partition] for tp in c.position([TopicPartition(topic, p) for p in parts])):
            break
    c.close()
    return out


def rows(stack, query: str, table: str) -> list:
    with psycopg.connect(stack["dsn"]) as conn:
        return conn.execute(sql.SQL(query).format(table_identifier(table))).fetchall()


def test_a_reused_key_is_hidden_by_dedupe_and_rejected_by_a_fingerprint(stack, tmp_path):
    hidden = run_exp(stack, tmp_path / "mistake", "key-reuse", "--messages", "200", "--partitions", "2",
                     "--workers", "2")
    fixed = run_exp(stack, tmp_path / "fix", "key-fingerprint", "--messages", "200", "--partitions", "2",
                    "--workers", "2")
    for d in (hidden, fixed):
        sent = input_amounts(stack["bootstrap_servers"], d["stack"]["input_topic"])
        again = {k: v[1] for k, v in sent.items() if len(v) == 2}
        assert len(sent) == 200 and sum(len(v) for v in sent.values()) == 210 and len(again) == 10
        assert all(v[0] == 100 != v[-1] for v in sent.values() if len(v) > 1)
        # The same buggy client for both (the same seed): the same ids, the same other amounts.
        assert {r["id"]: r["amount"] for r in d["reuse"]["reused_requests"]} == again
        c = d["counts"]
        assert (c["duplicates"], c["lost"], len(d["crashes"])) == (0, 0, 20)
        assert c["dedupe_hits"] == d["predicted"]["dedupe_hits"] == 20 + 10
        assert rows(stack, "select coalesce(sum(hits), 0) from {}", d["stack"]["dedupe_table"]) == [(30,)]
        # Every effect is the payment's own amount: no reused request was ever applied.
        assert rows(stack, "select count(*), count(distinct message_id), sum(amount) from {}",
                    d["stack"]["ledger_table"]) == [(200, 200, 20_000)]
        assert d["reuse"]["applied"] == 0
        audit = harness("audit", str(tmp_path / ("mistake" if d is hidden else "fix") / "report"), env=stack["env"])
        assert audit.returncode == 0 and "the report and the recount agree" in audit.stderr, audit.stdout[-3000:]
        assert audit.stdout.count("reused keys") == (5 if d is fixed else 3)
    assert (hidden["reuse"]["hidden"], hidden["reuse"]["rejected"], hidden["stack"]["rejects_table"]) == (10, None, None)
    assert hidden["predicted"]["reuse"]["hidden"] == 10
    assert (fixed["reuse"]["hidden"], fixed["reuse"]["rejected"]) == (0, 10)
    # The rejects table holds exactly the reused requests, each once, with the amount they asked for.
    rejected = rows(stack, "select message_id, amount, input_offset from {}", fixed["stack"]["rejects_table"])
    again = {r["id"]: (r["amount"], r["offset"]) for r in fixed["reuse"]["reused_requests"]}
    assert {i: (a, o) for i, a, o in rejected} == again and len(rejected) == 10
    # Reusing keys moved no crash: both crashed on the payments the seed alone chooses.
    plan = CrashPlan.make([f"pay-{i:06d}" for i in range(1, 201)], 0.1, 25).crash_ids
    assert {c["message_id"] for c in hidden["crashes"]} == {c["message_id"] for c in fixed["crashes"]} == plan


def test_the_audit_asks_postgres_for_the_rejects_table_not_the_report(stack, tmp_path):
    """A report edited to say it had no rejects table, so every rejected request would read as hidden:
    the audit finds the run's own table anyway, and the edited numbers differ from it."""
    run_exp(stack, tmp_path, "key-fingerprint", "--messages", "100", "--crash-rate", "0")
    path = tmp_path / "report" / "report.json"
    d = json.loads(path.read_text())
    assert d["reuse"]["rejected"] == 5
    d["stack"]["rejects_table"] = None
    d["reuse"].update(hidden=5, rejected=None)
    path.write_text(json.dumps(d))
    audit = harness("audit", str(tmp_path / "report"), "--json", env=stack["env"])
    assert audit.returncode != 0, audit.stdout[-3000:]
    got = {r["metric"]: r for r in json.loads(audit.stdout)["report"] if r["store"] == "reused keys"}
    hidden = got["hidden (neither applied nor rejected)"]
    assert (hidden["reported"], hidden["recounted"], hidden["agrees"]) == (5, 0, False)
    assert got["rejects (rows of the rejects table)"]["recounted"] == 5     # found though the report names none
