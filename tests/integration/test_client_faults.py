"""The abort and client-pause faults on the real stack: real SIGKILLs, real SIGSTOPs of transactional
workers, aborts the workers chose. Kafka's promise (read_committed: every payment once, no record of an
aborted or torn transaction, no transaction left open) is checked by the harness and, independently, by a
plain consumer written here; the aborted copies are predicted exactly where the workers flushed first."""

import pytest

from tests.integration.plain_reader import read_topic as _read
from tests.integration.test_experiments import run_exp

pytestmark = pytest.mark.integration


def _classes(d) -> dict:
    return {n: c["count"] for n, c in d["anomaly_classes"]["classes"].items()}


def test_crashes_pauses_and_planned_aborts_keep_eos_exact_and_its_aborted_copies_predicted(stack, tmp_path):
    d = run_exp(stack, tmp_path, "eos", "--messages", "600", "--commit-every", "5", "--fault", "planned-crash",
                "--fault", "client-pause:at=before-commit,seconds=0.6,count=3", "--fault", "abort:rate=0.2")
    by = {}
    for f in d["faults"]:
        by.setdefault(f["fault"], []).append(f)
    assert len(by["planned-crash"]) == len(d["crashes"]) > 0
    assert len(by["client-pause"]) == 3 and all(p["paused_seconds"] >= 0.3 for p in by["client-pause"])
    assert len(by["abort"]) > 0 and all(a["exact"] for a in by["abort"])
    # every abort was the workers' own and flushed first: the prediction stays exact, and it holds
    assert d["predicted"]["exact"] is True
    ko = d["kafka_output"]
    aborted_records = sum(a["records"] for a in by["abort"])
    crash_records = sum(len(c.get("produced") or []) for c in d["crashes"])
    assert ko["read_uncommitted"]["duplicates"] == aborted_records + crash_records \
        == d["predicted"]["kafka_output"]["read_uncommitted"]["duplicates"]
    assert (ko["read_committed"]["duplicates"], ko["read_committed"]["lost"]) == (0, 0)
    classes = _classes(d)
    assert classes["aborted-read"] == classes["torn-transaction"] == classes["hanging-transaction"] == 0
    assert set(classes.values()) == {0}
    # an independent reader: read_committed holds each payment once, nothing is left open, and the aborted
    # transactions' records are in the log for read_uncommitted readers
    seen, stable, ends = _read(d["stack"]["bootstrap_servers"], d["stack"]["output_topic"], "read_committed")
    assert sorted(seen.values()) == sorted(set(seen.values())) and len(seen) == 600
    assert stable == ends
    everything, _, _ = _read(d["stack"]["bootstrap_servers"], d["stack"]["output_topic"], "read_uncommitted")
    assert len(everything) - 600 == ko["read_uncommitted"]["duplicates"]


@pytest.mark.parametrize("step", ["mid-produce", "after-send-offsets"])
def test_a_pause_longer_than_the_transaction_timeout_is_aborted_under_the_sleeping_worker(stack, tmp_path, step):
    # pauses of 3-9 s against a 2 s transaction timeout (the coordinator looks for expired ones every second)
    d = run_exp(stack, tmp_path, "eos", "--messages", "300", "--commit-every", "5", "--transaction-timeout-ms", "2000",
                "--fault", f"client-pause:at={step},seconds=6,count=1")
    (pause,) = [f for f in d["faults"] if f["fault"] == "client-pause"]
    assert pause["step"] == step and pause["paused_seconds"] >= 3
    # the coordinator aborted the transaction while its worker slept: the worker met that when it woke
    assert pause["next_abort"] is not None, pause
    ko = d["kafka_output"]
    assert (ko["read_committed"]["duplicates"], ko["read_committed"]["lost"]) == (0, 0)
    classes = _classes(d)
    assert classes["aborted-read"] == classes["torn-transaction"] == classes["hanging-transaction"] == 0
    seen, stable, ends = _read(d["stack"]["bootstrap_servers"], d["stack"]["output_topic"], "read_committed")
    assert len(seen) == len(set(seen.values())) == 300 and stable == ends
