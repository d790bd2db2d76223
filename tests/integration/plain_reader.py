"""A topic as a plain confluent_kafka consumer sees it, for tests that check the harness against a reader it
did not write."""

import time
from tests import kafka_login


def read_topic(bootstrap: str, topic: str, isolation: str) -> tuple[dict, dict, dict]:
    """({(partition, offset): key}, last stable offsets, ends) of `topic` as a fresh reader with this isolation
    sees it, read with confluent_kafka directly: not harness code."""
    from confluent_kafka import Consumer, IsolationLevel, TopicPartition
    from confluent_kafka.admin import AdminClient, OffsetSpec
    admin = AdminClient(kafka_login.config(bootstrap))
    c = Consumer(kafka_login.config(bootstrap, {"group.id": f"plain-reader-{time.time_ns()}",
                  "isolation.level": isolation, "enable.auto.commit": False}))
    parts = sorted(c.list_topics(topic, timeout=10).topics[topic].partitions)

    def latest(level) -> dict:
        fs = admin.list_offsets({TopicPartition(topic, p): OffsetSpec.latest() for p in parts}, isolation_level=level)
        return {tp.partition: f.result().offset for tp, f in fs.items()}
    stable, ends = latest(IsolationLevel.READ_COMMITTED), latest(IsolationLevel.READ_UNCOMMITTED)
    upto = stable if isolation == "read_committed" else ends
    c.assign([TopicPartition(topic, p, 0) for p in parts])
    seen, deadline = {}, time.time() + 60
    while time.time() < deadline:
        for m in c.consume(500, 0.5):
            if not m.error():
                seen[(m.partition(), m.offset())] = m.key().decode()
        if all(tp.offset >= upto[tp.partition] for tp in c.position([TopicPartition(topic, p) for p in parts])):
            break
    c.close()
    return seen, stable, ends
