"""Audit an output topic the way its readers would see it.

Two fresh consumers read every partition to its end: one with
isolation.level=read_committed (what exactly-once promises), one with
read_uncommitted (what the log physically holds, aborted copies included).
Each gives records, duplicates and lost against the ids that were sent.
"""

import time
import uuid

from .effects import count_effects

# An idle local topic is read in well under this; it bounds the audit of a huge or stuck topic.
READ_TIMEOUT_S = 60


def read_ids(bootstrap: str, topic: str, isolation: str) -> tuple[list, str | None]:
    """All keys in `topic` as `isolation` sees them; (ids, error)."""
    from confluent_kafka import Consumer, TopicPartition, OFFSET_BEGINNING
    try:
        c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"harness-audit-{uuid.uuid4().hex[:8]}",
                      "enable.auto.commit": False, "isolation.level": isolation, "log_level": 3})
        md = c.list_topics(topic, timeout=15)
        if topic not in md.topics or md.topics[topic].error is not None:
            c.close()
            return [], f"topic {topic} not found"
        parts = sorted(md.topics[topic].partitions)
        ends = {}
        for p in parts:
            _low, high = c.get_watermark_offsets(TopicPartition(topic, p), timeout=15)
            ends[p] = high
        c.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in parts])
        ids = []
        done = {p for p in parts if ends[p] == 0}
        deadline = time.time() + READ_TIMEOUT_S
        while len(done) < len(parts) and time.time() < deadline:
            for m in c.consume(num_messages=1000, timeout=0.5):
                if m.error():
                    continue
                ids.append(m.key().decode(errors="replace") if m.key() is not None else None)
                if m.offset() + 1 >= ends[m.partition()]:
                    done.add(m.partition())
            # read_committed stops at the last stable offset: control records and aborted data
            # never reach us, so check the position, not the last record seen.
            for tp in c.position([TopicPartition(topic, p) for p in parts if p not in done]):
                if tp.offset >= ends[tp.partition]:
                    done.add(tp.partition)
        c.close()
        err = None if len(done) == len(parts) else f"timed out reading {topic} ({isolation})"
        return ids, err
    except Exception as e:  # noqa: BLE001
        return [], str(e).splitlines()[0] if str(e) else repr(e)


def audit_records(sent_ids: list[str], seen: dict[str, list], errors: dict | None = None) -> dict:
    """Pure part of the audit: `seen` maps an isolation level to the keys that reader got, in order."""
    out = {}
    for isolation in ("read_committed", "read_uncommitted"):
        c = count_effects(sent_ids, seen.get(isolation, []))
        out[isolation] = {"records": c.effects, "duplicates": c.duplicates, "lost": c.lost,
                          "duplicate_ids": c.duplicate_ids[:20], "lost_ids": c.lost_ids[:20],
                          "error": (errors or {}).get(isolation)}
    # Records the log holds but committed readers never see: aborted (or still open) transactions.
    out["aborted_records"] = out["read_uncommitted"]["records"] - out["read_committed"]["records"]
    return out


def audit_output(bootstrap: str, topic: str, sent_ids: list[str]) -> dict:
    seen, errors = {}, {}
    for isolation in ("read_committed", "read_uncommitted"):
        seen[isolation], errors[isolation] = read_ids(bootstrap, topic, isolation)
    return audit_records(sent_ids, seen, errors)
