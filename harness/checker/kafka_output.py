"""Audit an output topic the way its readers would see it.

Two fresh consumers read every partition to its end: one with
isolation.level=read_committed (what exactly-once promises), one with
read_uncommitted (what the log physically holds, aborted copies included).
Each gives records, duplicates and lost against the ids that were sent, and
every record is checked against its input: its value must name the key's id
and carry the payment's amount. A reader that failed gives unknown (None)
counts and its error, never zeros.
"""

import json
import time
import uuid
from dataclasses import dataclass, field

from ..clients import consume, pgconn
from .effects import count_effects

# An idle local topic is read in well under this; it bounds the audit of a huge or stuck topic.
READ_TIMEOUT_S = 60
# After a transaction commits, its markers reach each partition a moment later, and only then does the last
# stable offset move: it is asked again until it reaches the end, or has not moved for this long.
# Markers of a coordinator that is failing over may take several seconds; a transaction this old at the
# end of a run is open, not slow (our producers' transaction timeout is 10 to 60 s).
STABLE_WAIT_S = 30.0


def audited(required: bool, records) -> bool:
    """Whether an output topic is audited: always when the experiment requires it (`Stores.output`), else
    (`Stores.output_if_written`: the consumer under test may never produce) only when a reader found
    records in it or could not read it. `records`: each reader's count, None where it failed. The run's
    own audit (observe.py) and `harness audit` decide by this one rule."""
    return required or any(n != 0 for n in records)


@dataclass
class LogRead:
    """What one fresh reader got: each record as (key, value, partition, offset), and how far it got in
    each partition (its position at the end: the last stable offset for read_committed)."""
    records: list = field(default_factory=list)
    reached: dict = field(default_factory=dict)
    error: str | None = None
    high: dict = field(default_factory=dict)       # each partition's end (high watermark) when read
    stable: dict | None = None     # read_committed: each partition's last stable offset (below `high`: open)


def stable_ends(bootstrap: str, topic: str, parts: list, wait_s: float = STABLE_WAIT_S) -> tuple[dict, dict]:
    """(last stable offsets, ends) of each partition, asked of the brokers (ListOffsets under read_committed
    and read_uncommitted: a read_committed consumer's own watermark query answers the last stable offset
    for both) until every last stable offset reaches its end or stops moving for `wait_s`. A partition
    left below its end holds a transaction still open."""
    from confluent_kafka import IsolationLevel, TopicPartition
    from confluent_kafka.admin import AdminClient, OffsetSpec
    from ..clients import kafka_client, kafka_logging
    admin = AdminClient(kafka_client.config(bootstrap, kafka_logging.client_config()))

    def latest(isolation) -> dict:
        futures = admin.list_offsets({TopicPartition(topic, p): OffsetSpec.latest() for p in parts},
                                     isolation_level=isolation, request_timeout=15)
        return {tp.partition: f.result().offset for tp, f in futures.items()}
    last, moved = None, time.monotonic()
    while True:
        lso, high = latest(IsolationLevel.READ_COMMITTED), latest(IsolationLevel.READ_UNCOMMITTED)
        if all(lso[p] >= high[p] for p in parts):
            return lso, high
        if lso != last:
            last, moved = lso, time.monotonic()
        elif time.monotonic() - moved > wait_s:
            return lso, high
        time.sleep(0.2)


def read_ids(bootstrap: str, topic: str, isolation: str) -> tuple[list, str | None]:
    """All records in `topic` as `isolation` sees them: ([(key, value, partition, offset)], error)."""
    got = read_log(bootstrap, topic, isolation)
    return got.records, got.error


def read_log(bootstrap: str, topic: str, isolation: str, take=None) -> LogRead:
    """All records in `topic` as a fresh `isolation` reader sees them, from the beginning of every partition.
    `take(message)`, when given, makes what is kept of each record (None: nothing), instead of (key, value,
    partition, offset)."""
    from confluent_kafka import Consumer, TopicPartition, OFFSET_BEGINNING
    from ..clients import kafka_client, kafka_logging
    try:
        c = Consumer(kafka_client.config(bootstrap, {
            "group.id": f"harness-audit-{uuid.uuid4().hex[:8]}", "enable.auto.commit": False,
            "isolation.level": isolation, **kafka_logging.client_config()}))
        md = c.list_topics(topic, timeout=15)
        if topic not in md.topics or md.topics[topic].error is not None:
            c.close()
            return LogRead(error=f"topic {topic} not found")
        parts = sorted(md.topics[topic].partitions)
        stable = None
        if isolation == "read_committed" and parts:
            # read to the last stable offset, once it has settled, and say where it stayed below the end
            # (the consumer's own watermark query would answer the last stable offset for both)
            stable, high = stable_ends(bootstrap, topic, parts)
        else:
            high = {p: c.get_watermark_offsets(TopicPartition(topic, p), timeout=15)[1] for p in parts}
        ends = dict(stable) if stable else dict(high)
        c.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in parts])
        ids = []
        done = {p for p in parts if ends[p] == 0}
        deadline = time.time() + READ_TIMEOUT_S
        while len(done) < len(parts) and time.time() < deadline and not pgconn.interrupted():
            for m in consume.ready(c, 1000, 0.5):
                if m.error():
                    continue
                kept = take(m) if take else (m.key().decode(errors="replace") if m.key() is not None else None,
                                             m.value(), m.partition(), m.offset())
                if kept is not None:
                    ids.append(kept)
                if m.offset() + 1 >= ends[m.partition()]:
                    done.add(m.partition())
            # read_committed stops at the last stable offset: control records and aborted data
            # never reach us, so check the position, not the last record seen.
            for tp in c.position([TopicPartition(topic, p) for p in parts if p not in done]):
                if tp.offset >= ends[tp.partition]:
                    done.add(tp.partition)
        reached = {tp.partition: max(tp.offset, 0) for tp in c.position([TopicPartition(topic, p) for p in parts])}
        c.close()
        # where each unfinished partition stood: evidence for a read that never reached its end
        short = ", ".join(f"partition {p} at {reached[p]} of {ends[p]}" for p in parts if p not in done)
        err = None if len(done) == len(parts) else (
            f"not read to its end, the run was interrupted ({pgconn.interrupted()}): {short}" if pgconn.interrupted()
            else f"timed out reading {topic} ({isolation}): {short}")
        return LogRead(ids, reached, err, high, stable)
    except Exception as e:  # noqa: BLE001
        return LogRead(error=str(e).splitlines()[0] if str(e) else repr(e))


def _key(r):
    return r[0] if isinstance(r, tuple) else r


def bad_records(amounts: dict | None, records: list) -> list[str]:
    """Ids of records whose value does not match their input payment (id and amount)."""
    if not amounts:
        return []
    bad = set()
    for r in records:
        if not isinstance(r, tuple):
            continue
        key, value = r[0], r[1]
        if key not in amounts:
            continue                      # counted apart, as an id never sent
        try:
            v = json.loads(value)
            ok = v.get("id") == key and v.get("amount") == amounts[key]
        except (TypeError, ValueError, AttributeError):
            ok = False
        if not ok:
            bad.add(str(key))
    return sorted(bad)


def tagged(records: list) -> dict | None:
    """{(partition, offset): ("worker/attempt", transaction number)} of the records whose value names its
    writer and transaction (our transactional workers' do: experiments/eos/); values are untrusted, so
    only well-formed names and small numbers count. None when a record lacks its place."""
    if not all(isinstance(r, tuple) and len(r) == 4 for r in records):
        return None
    out = {}
    for key, value, partition, offset in records:
        if not value or b'"txn"' not in value[:4096]:
            continue
        try:
            v = json.loads(value)
        except (ValueError, UnicodeDecodeError, RecursionError):
            continue
        if not isinstance(v, dict):
            continue
        worker, attempt, txn = v.get("worker"), v.get("attempt"), v.get("txn")
        if (isinstance(worker, str) and len(worker) <= 64 and type(attempt) is int and type(txn) is int
                and 0 < attempt < 2 ** 31 and 0 < txn < 2 ** 53):
            out[(partition, offset)] = (f"{worker}/{attempt}", txn)
    return out


def placed(records: list) -> dict | None:
    """{(partition, offset): key} of records read with their place (None when any lacks it)."""
    if not all(isinstance(r, tuple) and len(r) == 4 for r in records):
        return None
    return {(r[2], r[3]): r[0] for r in records}


def audit_records(sent_ids: list[str], seen: dict[str, list], errors: dict | None = None,
                  amounts: dict | None = None, reached: dict | None = None, open_at: dict | None = None) -> dict:
    """Pure part of the audit: `seen` maps an isolation level to the records that reader got, in order
    (keys, (key, value) pairs whose values are checked against `amounts`, or (key, value, partition,
    offset) as read_log gives them); `reached` each reader's position per partition at its end; `open_at`
    the partitions a transaction was still open on, {partition: (last stable offset, end)}."""
    out = {}
    for isolation in ("read_committed", "read_uncommitted"):
        err = (errors or {}).get(isolation)
        records = seen.get(isolation, [])
        c = count_effects(sent_ids, [_key(r) for r in records])
        if err:
            out[isolation] = {"records": None, "duplicates": None, "lost": None, "duplicate_ids": [], "lost_ids": [],
                              "unexpected_ids": [], "bad_value_ids": [], "error": err,
                              "per_id": {}, "at": None, "reached": None}
            continue
        # Every id, uncapped: the verdict counts them in full; reports cap what they show.
        out[isolation] = {"records": c.effects, "duplicates": c.duplicates, "lost": c.lost,
                          "duplicate_ids": c.duplicate_ids, "lost_ids": c.lost_ids,
                          "unexpected_ids": c.unexpected_ids,
                          "bad_value_ids": bad_records(amounts, records), "error": None,
                          "per_id": c.per_id, "at": placed(records), "reached": (reached or {}).get(isolation),
                          **({"tags": tagged(records)} if isolation == "read_uncommitted" else {})}
    rc, ru = out["read_committed"]["records"], out["read_uncommitted"]["records"]
    # Records the log holds but committed readers never see: aborted (or still open) transactions.
    out["aborted_records"] = ru - rc if rc is not None and ru is not None else None
    out["open_transactions"] = open_at
    return out


def audit_output(bootstrap: str, topic: str, sent_ids: list[str], amounts: dict | None = None) -> dict:
    seen, errors, reached, open_at = {}, {}, {}, None
    for isolation in ("read_committed", "read_uncommitted"):
        got = read_log(bootstrap, topic, isolation)
        seen[isolation], errors[isolation], reached[isolation] = got.records, got.error, got.reached
        if got.stable is not None:
            open_at = {p: (got.stable[p], h) for p, h in got.high.items() if got.stable[p] < h}
    out = audit_records(sent_ids, seen, errors, amounts, reached, open_at)
    if open_at:
        from . import open_transactions
        out["open_transaction_producers"] = open_transactions.describe(bootstrap, topic, open_at)
    return out
