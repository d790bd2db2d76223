"""How much disk a run's workload takes, estimated before anything is made, and the refusal when it
cannot fit.

`--messages 1000000 --payload-bytes 100000` is 100 GB of input alone: a run that size filled the
state disk, and Kafka and PostgreSQL died of it. The local stack keeps its data in the state folder,
so a run whose workload cannot fit that folder's free space is refused up front, in one line with both
numbers. The estimate is deliberately high: every record the run writes counted at its full size plus
a record overhead, once per copy (the input topic, an output or events topic, per replica: a local
cluster keeps its three replicas on one disk) and a fixed size per row of each table (with its index
and write-ahead log), and a reserve the services need to keep running.
"""

from __future__ import annotations

from dataclasses import dataclass

# Per Kafka record beyond its value: key, headers, record and batch headers, index entries (generous).
RECORD_OVERHEAD_BYTES = 200
# Per row of a run's table: tuple, primary key and message_id index entries, and its write-ahead log.
ROW_BYTES = 400
# The smallest value of a payment (its JSON without padding), so --payload-bytes 0 is not counted as 0.
MIN_VALUE_BYTES = 60
# Kept free for the services themselves (segments, checkpoints, logs): below it they fail.
RESERVE_BYTES = 512 * 1024 ** 2


@dataclass(frozen=True)
class Footprint:
    bytes: int
    copies: list            # what is written, e.g. ["input topic x1", "ledger rows"]

    def describe(self) -> str:
        return ", ".join(self.copies)


def estimate(messages: int, payload_bytes: int, stores, replicas: int = 1) -> Footprint:
    """The disk a run of `messages` payments of `payload_bytes` writes, for an experiment whose
    `stores` (its declaration's Stores) say what it writes; `replicas` copies of each topic."""
    record = max(payload_bytes, MIN_VALUE_BYTES) + RECORD_OVERHEAD_BYTES
    topics = ["input topic"] + [name for name, used in (("output topic", stores.output_topic),
                                                         ("events topic", stores.events)) if used]
    tables = [name for name, used in (("ledger", stores.ledger), ("dedupe table", stores.dedupe),
                                      ("rejects table", stores.rejects), ("service rows", stores.rows),
                                      ("outbox table", stores.outbox)) if used]
    total = messages * (record * len(topics) * replicas + ROW_BYTES * len(tables))
    copies = [f"{t} x{replicas}" for t in topics] + [f"{t} rows" for t in tables]
    return Footprint(total, copies)


def _size(n: float) -> str:
    for unit in ("B", "KB", "MB", "GB", "TB"):
        if n < 1000 or unit == "TB":
            return f"{n:.1f} {unit}" if unit != "B" else f"{int(n)} B"
        n /= 1000
    return f"{n:.1f} TB"


def refusal(fp: Footprint, messages: int, payload_bytes: int, folder: str, free: int) -> str | None:
    """The one line refusing a run whose estimate (plus the reserve) exceeds `free`; None when it fits."""
    need = fp.bytes + RESERVE_BYTES
    if need <= free:
        return None
    return (f"this run needs about {_size(need)} of disk ({messages:,} payments of {payload_bytes:,} bytes "
            f"written to: {fp.describe()}; an estimate with {_size(RESERVE_BYTES)} kept for the services), but "
            f"the state folder {folder} has {_size(free)} free: use fewer --messages or a smaller --payload-bytes")
