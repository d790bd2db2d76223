"""auto-commit, dual-write and outbox on the real stack, with real SIGKILLs, re-counted independently:
psql-style queries on the run's tables and a plain Kafka read of its topics."""

import os
import signal
import subprocess
import sys
import time
import uuid
from collections import Counter

import pytest

from tests.conftest import ROOT, harness
from tests.integration.test_experiments import _wait_for_workers, run_exp, worker_pids
from tests import kafka_login

pytestmark = pytest.mark.integration


def sql(stack, query: str):
    import psycopg
    with psycopg.connect(stack["dsn"], autocommit=True) as conn:
        return conn.execute(query).fetchall()


def table(name: str) -> str:
    schema, _, t = name.partition(".")
    return f'{schema}."{t}"'


def topic_keys(stack, topic: str) -> Counter:
    """Every record of every partition, read from the beginning by a plain consumer: key -> copies."""
    from confluent_kafka import Consumer, TopicPartition
    c = Consumer(kafka_login.config(stack["bootstrap_servers"], {"group.id": f"test-{uuid.uuid4().hex[:8]}",
                  "enable.auto.commit": False, "auto.offset.reset": "earliest"}))
    parts = sorted(c.list_topics(topic, timeout=15).topics[topic].partitions)
    ends = {p: c.get_watermark_offsets(TopicPartition(topic, p), timeout=15)[1] for p in parts}
    c.assign([TopicPartition(topic, p, 0) for p in parts])
    keys, left, deadline = Counter(), {p for p in parts if ends[p] > 0}, time.time() + 60
    while left and time.time() < deadline:
        for m in c.consume(500, timeout=0.5):
            if not m.error():
                keys[m.key().decode()] += 1
                if m.offset() + 1 >= ends[m.partition()]:
                    left.discard(m.partition())
    c.close()
    assert not left, f"could not read {topic} to its end"
    return keys


def ledger_counts(stack, d) -> tuple[int, int, int]:
    """(rows, duplicated effects, lost payments) of the run's ledger, by SQL alone."""
    rows, distinct = sql(stack, f"select count(*), count(distinct message_id) from {table(d['stack']['ledger_table'])}")[0]
    return rows, rows - distinct, d["counts"]["sent"] - distinct


def test_auto_commit_loses_or_duplicates_within_the_evidence_bounds(stack, tmp_path):
    # A 50 ms timer commits mid-batch: kills after it lose the rest of the batch, kills before it duplicate.
    # Enough payments that every kill lands while a batch is in flight (3,000 were done before most
    # kills struck on a quiet machine, and one kill between two batches can do no harm).
    d = run_exp(stack, tmp_path, "auto-commit", "--messages", "20000", "--auto-commit-interval-ms", "50",
                "--kills", "6", "--seed", "11")
    c, p = d["counts"], d["predicted"]
    assert d["params"]["auto_commit_interval_ms"] == 50 and d["faults_configured"][0]["fault"] == "random-kill"
    assert len(d["crashes"]) == 6 and all(x["by"] == "supervisor" for x in d["crashes"])
    assert c["lost"] + c["duplicates"] > 0
    for k in ("duplicates", "lost"):
        lo, hi = p["ranges"][k]
        assert lo <= c[k] <= hi and hi - lo <= len(d["crashes"])
    # Per kill, what its successor read again and what it skipped: at least what the ledger shows in the end
    # (give or take one unlogged effect per kill), since a successor may itself die before re-applying.
    assert len(p["evidence"]) == len(d["crashes"])
    assert sum(e["redelivered"] for e in p["evidence"]) + len(d["crashes"]) >= c["duplicates"]
    assert sum(e["skipped"] for e in p["evidence"]) >= c["lost"]
    assert ledger_counts(stack, d) == (c["effects"], c["duplicates"], c["lost"])
    assert d["lesson"].startswith("Mistake: leaving enable.auto.commit=true")


def test_dual_write_rows_without_events_equal_crashes(stack, tmp_path):
    d = run_exp(stack, tmp_path, "dual-write", "--messages", "150", "--seed", "9")
    s, crashes = d["service"], d["crashes"]
    assert len(crashes) == 15 and s["unpublished"] == d["predicted"]["service"]["unpublished"] == 15
    assert (s["orphaned"], s["event_duplicates"], s["rows"], s["events"]) == (0, 0, 150, 135)
    assert set(s["unpublished_ids"]) == {x["message_id"] for x in crashes}
    assert d["counts"]["lost"] == 15 and d["counts"]["duplicates"] == 0
    assert d["stack"]["tables"] == [d["stack"]["ledger_table"], d["stack"]["dedupe_table"],
                                    d["stack"]["tables"][2]] and len(d["stack"]["topics"]) == 2
    # Independently: psql on the rows, a plain read of the topic.
    rows = {r[0] for r in sql(stack, f"select message_id from {table(d['stack']['tables'][2])}")}
    events = topic_keys(stack, d["stack"]["topics"][1])
    assert len(rows) == 150 and sum(events.values()) == 135 and len(rows - set(events)) == 15
    assert ledger_counts(stack, d) == (135, 0, 15)
    assert {w["worker"] for w in crashes} == {"service-0"}
    proc = harness("clean", d["run_id"], env=stack["env"], check=True)
    assert "removed 2 topics and 3 tables" in proc.stdout


def test_dual_write_event_first_leaves_orphan_events(stack, tmp_path):
    d = run_exp(stack, tmp_path, "dual-write", "--messages", "150", "--seed", "9", "--kill-point",
                "after-produce-before-row")
    s = d["service"]
    assert d["steps"].startswith("accept the request (commit its offset), produce the event")
    assert s["orphaned"] == len(d["crashes"]) == 15 and (s["unpublished"], s["rows"], s["events"]) == (0, 135, 150)
    rows = {r[0] for r in sql(stack, f"select message_id from {table(d['stack']['tables'][2])}")}
    assert len(set(topic_keys(stack, d["stack"]["topics"][1])) - rows) == 15
    assert ledger_counts(stack, d) == (150, 0, 0)        # the downstream applied every event, orphans included


def test_outbox_topic_duplicates_equal_relay_crashes_and_downstream_is_exact(stack, tmp_path):
    d = run_exp(stack, tmp_path, "outbox", "--messages", "150", "--seed", "9", "--partitions", "2", "--workers", "2")
    s, c = d["service"], d["counts"]
    relay = [x for x in d["crashes"] if x["worker"] == "relay-0"]
    assert len(relay) == len(d["crashes"]) == 15
    assert s["event_duplicates"] == d["predicted"]["service"]["event_duplicates"] == 15
    assert (s["rows"], s["outbox_rows"], s["outbox_unsent"], s["unpublished"], s["orphaned"]) == (150, 150, 0, 0, 0)
    assert (c["lost"], c["duplicates"]) == (0, 0) and c["dedupe_hits"] == 15
    events = topic_keys(stack, d["stack"]["topics"][1])
    assert sum(events.values()) == 165 and sum(n - 1 for n in events.values()) == 15
    assert {k for k, n in events.items() if n > 1} == {x["message_id"] for x in relay}
    assert sql(stack, f"select count(*) from {table(d['stack']['tables'][3])} where sent_at is null")[0][0] == 0
    assert ledger_counts(stack, d) == (150, 0, 0)
    assert sql(stack, f"select sum(hits) from {table(d['stack']['dedupe_table'])}")[0][0] == 15


def _start(stack, out, *args):
    return subprocess.Popen([sys.executable, "-m", "harness.cli", "run", *args, "--quiet", "--out", str(out)],
                            env={**os.environ, **stack["env"]}, cwd=ROOT, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def _roles_running(out) -> set:
    deadline = time.time() + 60
    while time.time() < deadline:
        roles = {a.split("--role ")[1].split()[0] for a in _cmdlines(str(out)) if "--role " in a}
        if {"service", "relay", "downstream"} <= roles:
            return roles
        time.sleep(0.1)
    raise AssertionError("the roles never all ran")


def _cmdlines(marker: str) -> list[str]:
    from tests.conftest import pids_where
    out = []
    for pid in pids_where(lambda cmd: "harness" in cmd and "worker" in cmd and marker in cmd):
        try:
            out.append(open(f"/proc/{pid}/cmdline", "rb").read().replace(b"\0", b" ").decode())
        except OSError:
            pass
    return out


def test_ctrl_c_stops_every_role(stack, tmp_path):
    out = tmp_path / "interrupted"
    proc = _start(stack, out, "outbox", "--messages", "4000", "--crash-rate", "0.01")
    _wait_for_workers(out, str(out))
    _roles_running(out)
    proc.send_signal(signal.SIGINT)
    _stdout, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 130 and "Traceback" not in stderr, stderr[-2000:]
    assert worker_pids(str(out)) == []


def test_a_killed_harness_takes_every_role_along(stack, tmp_path):
    out = tmp_path / "killed"
    proc = _start(stack, out, "outbox", "--messages", "4000", "--crash-rate", "0.01")
    _wait_for_workers(out, str(out))
    _roles_running(out)
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=10)
    deadline = time.time() + 30        # each role dies by its parent's death signal: a loaded machine is slow to say so
    while worker_pids(str(out)) and time.time() < deadline:
        time.sleep(0.1)
    assert worker_pids(str(out)) == []
