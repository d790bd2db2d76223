"""The read_committed reader that runs beside the workers, on a real broker: once it says it is ready, it
has read every partition to its end (the last stable offset, under an open transaction), so the workers
that start then cannot finish before it has seen anything.

Before: the reader joined a consumer group and nothing waited for it. A short run on a busy CI machine
(eos-dedupe, 120 payments) ended before its first fetch, so `harness audit` had no row for it."""

import uuid

import pytest

from harness.checker.output_watcher import OutputWatcher
from harness.workload.payments import create_topic
from tests import kafka_login

pytestmark = pytest.mark.integration


def test_the_reader_is_ready_only_once_it_has_read_every_partition_to_its_last_stable_offset(stack):
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient
    boot = stack["bootstrap_servers"]
    topic = f"harness.test-watcher-{uuid.uuid4().hex[:8]}"
    create_topic(boot, topic, 3)
    open_txn = Producer(kafka_login.config(boot, {"transactional.id": f"test-watcher-{uuid.uuid4().hex[:8]}",
                         "transaction.timeout.ms": 60000}))
    watcher = None
    try:
        plain = Producer(kafka_login.config(boot, {"enable.idempotence": True}))
        for i in range(30):                       # partitions 0 and 1 hold committed records, partition 2 none
            plain.produce(topic, key=f"k{i}", value=b"{}", partition=i % 2)
        assert plain.flush(30) == 0
        open_txn.init_transactions(30)
        open_txn.begin_transaction()
        open_txn.produce(topic, key="open", value=b"{}", partition=0)   # the last stable offset stays below it
        assert open_txn.flush(30) == 0

        watcher = OutputWatcher(boot, topic)
        assert watcher.wait_ready(30), watcher.failed
        placed = watcher.placed()
        assert sorted(placed) == sorted([(0, o) for o in range(15)] + [(1, o) for o in range(15)])
        assert "open" not in placed.values()
        assert watcher.reach() == {"0": {"records": 15, "first_offset": 0, "last_offset": 14},
                                   "1": {"records": 15, "first_offset": 0, "last_offset": 14}}
    finally:
        if watcher:
            watcher.stop()
        open_txn.abort_transaction(30)
        admin = AdminClient(kafka_login.config(boot))     # kept until its answer has come
        for fut in admin.delete_topics([topic], operation_timeout=30).values():
            fut.result(45)


def test_a_reader_of_a_topic_that_does_not_exist_is_never_ready_and_says_why(stack):
    watcher = OutputWatcher(stack["bootstrap_servers"], f"harness.test-watcher-absent-{uuid.uuid4().hex[:8]}")
    try:
        assert watcher.wait_ready(30) is False
        assert "not found" in watcher.failed
        assert watcher.placed() is None
    finally:
        watcher.stop()
