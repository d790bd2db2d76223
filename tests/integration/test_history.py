"""The workers' histories and Jepsen's anomaly classes on the real stack, with real SIGKILLs: runs that keep
their promises show no anomaly, the history agrees with the topic as an independent reader sees it, and a
record another producer writes into a run's output topic is caught and named with its offsets."""

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import ROOT
from tests.integration.plain_reader import read_topic
from tests.integration.test_experiments import run_exp, worker_pids
from tests.unit.sample_report import validate
from tests import kafka_login
from harness.reporting.summary import whole

pytestmark = pytest.mark.integration
CLASSES = {"lost-write", "duplicate", "inconsistent-offsets", "aborted-read", "torn-transaction", "out-of-order",
           "poll-skip",
           "nonmonotonic-poll", "nonmonotonic-send", "unseen", "hanging-transaction"}


def _ops(out: Path) -> dict[str, list]:
    return {f.name: [json.loads(line) for line in f.read_text().splitlines()]
            for f in sorted((out / "history").glob("*.jsonl"))}


def _read_topic(bootstrap: str, topic: str) -> dict:
    """{(partition, offset): key} of `topic` as a fresh read_committed consumer sees it: not harness code."""
    return read_topic(bootstrap, topic, "read_committed")[0]


def test_eos_with_crashes_keeps_a_history_the_topic_confirms_and_shows_no_anomaly(stack, tmp_path):
    d = run_exp(stack, tmp_path, "eos", "--messages", "300", "--commit-every", "5")
    ac = d["anomaly_classes"]
    assert {n: c["count"] for n, c in ac["classes"].items()} == {n: 0 for n in CLASSES}
    assert not any(c["allowed"] for c in ac["classes"].values())        # eos allows none of them
    ops = _ops(tmp_path / "report")
    assert ac["history"]["processes"] == len(ops) == len(d["crashes"]) + 1 and ac["history"]["bad_lines"] == 0
    # Every send of a committed transaction is in the topic at the offset its delivery report gave; every
    # record of the topic is such a send: the history and the log agree, as an independent reader sees it.
    committed = {}
    for lines in ops.values():
        last = {line[3]: line[2] for line in lines if line[1] == "txn"}
        committed.update({(line[3], line[4]): line[5] for line in lines
                          if line[1] == "send" and last.get(line[6]) == "commit"})
    assert committed == _read_topic(d["stack"]["bootstrap_servers"], d["stack"]["output_topic"])
    assert len(committed) == 300


def test_consumers_polls_are_monotonic_and_skip_nothing_through_crashes(stack, tmp_path):
    d = run_exp(stack, tmp_path, "offset-before", "--messages", "200", "--commit-every", "10")
    classes = d["anomaly_classes"]["classes"]
    assert set(classes) == {"poll-skip", "nonmonotonic-poll"}             # no output topic: only the polls
    assert (classes["poll-skip"]["count"], classes["nonmonotonic-poll"]["count"]) == (0, 0)
    polled = [op for lines in _ops(tmp_path / "report").values() for op in lines if op[1] == "poll"]
    assert sum(b - a + 1 for op in polled for runs in op[3].values() for a, b in runs) >= 200


def _start_eos(stack, out: Path) -> tuple[subprocess.Popen, str]:
    """An eos run in the background, and its output topic once a worker names it."""
    proc = subprocess.Popen([sys.executable, "-m", "harness.cli", "run", "eos", "--messages", "600",
                             "--crash-rate", "0.01", "--quiet", "--out", str(out)], env={**os.environ, **stack["env"]},
                            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 120
    while True:
        assert time.time() < deadline and proc.poll() is None, "no worker named its output topic"
        for pid in worker_pids(str(out)):
            try:
                argv = Path(f"/proc/{pid}/cmdline").read_bytes().decode().replace("\0", " ").split()
            except OSError:
                continue
            if "--output-topic" in argv:
                return proc, argv[argv.index("--output-topic") + 1]
        time.sleep(0.05)


def test_a_record_another_producer_writes_into_the_output_topic_is_a_named_duplicate(stack, tmp_path):
    from confluent_kafka import Producer
    out = tmp_path / "foreign"
    proc, topic = _start_eos(stack, out)
    placed = []
    p = Producer(kafka_login.config(stack["bootstrap_servers"]))
    p.produce(topic, key=b"pay-000001", value=json.dumps({"id": "pay-000001", "amount": 100}).encode(),
              partition=0, on_delivery=lambda err, m: placed.append((err, m.partition(), m.offset())))
    p.flush(30)
    assert placed and placed[0][0] is None, placed
    _out, err = proc.communicate(timeout=600)
    assert proc.returncode == 1, err[-3000:]
    d = json.loads((out / "report.json").read_text())
    validate(d)
    dup = d["anomaly_classes"]["classes"]["duplicate"]
    assert d["verdict"] == "unexpected" and dup["count"] == 1 and not dup["allowed"]
    assert dup["witnesses"][0]["id"] == "pay-000001" and [0, placed[0][2]] in dup["witnesses"][0]["at"]
    assert "Forbidden anomalies: duplicate (1)" in whole(d)
    assert "anomaly.duplicate: predicted == 0, observed 1" in d["verdict_detail"]["failed"]



# about 40 s (it waits out the foreign producer's open transaction): nightly
@pytest.mark.slow
def test_a_transaction_a_foreign_producer_leaves_open_on_the_output_topic_is_caught_with_its_offset(stack, tmp_path):
    """A transactional producer that is not the harness's begins a transaction on the run's output topic, writes
    one record and then does nothing (paused): every read_committed reader stops at that record. The run is
    unexpected, and the partition and the offset where readers stay are named."""
    from confluent_kafka import Producer
    out = tmp_path / "hanging"
    proc, topic = _start_eos(stack, out)
    p = Producer(kafka_login.config(stack["bootstrap_servers"], {"transactional.id": f"foreign-{time.time_ns()}",
                  "transaction.timeout.ms": 900_000}))
    placed = []
    try:
        p.init_transactions(30)
        p.begin_transaction()
        p.produce(topic, key=b"pay-000002", value=json.dumps({"id": "pay-000002", "amount": 100}).encode(),
                  partition=0, on_delivery=lambda err, m: placed.append((err, m.offset())))
        p.flush(30)
        assert placed and placed[0][0] is None, placed
        _out, err = proc.communicate(timeout=600)
    finally:
        p.abort_transaction(30)         # nothing left behind: the foreign transaction ends with the test
    assert proc.returncode == 1, err[-3000:]
    d = json.loads((out / "report.json").read_text())
    validate(d)
    hanging = d["anomaly_classes"]["classes"]["hanging-transaction"]
    assert d["verdict"] == "unexpected" and hanging["count"] == 1
    w = hanging["witnesses"][0]
    assert (w["partition"], w["last_stable_offset"]) == (0, placed[0][1]) and w["high_watermark"] > placed[0][1]
    # who holds it open, as the broker says (DescribeProducers through Kafka's TransactionsCommand): one
    # producer, its open transaction starting at the foreign record
    (holder,) = w["producers"]
    assert holder["transaction_start_offset"] == placed[0][1] and holder["producer_id"] >= 0
    assert holder["producer_epoch"] >= 0
    assert "hanging-transaction (1)" in whole(d)
    # what read_committed readers could not reach is missing for them, and said as such
    assert d["kafka_output"]["read_committed"]["lost"] > 0 and d["verdict_detail"]["audit_errors"] == []
