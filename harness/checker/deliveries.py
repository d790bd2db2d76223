"""The producer under test's delivery log, and what it lets the audit say about its topic.

A producer's promise is about what the broker ACKNOWLEDGED: a record whose
delivery report said "ok" must be in the topic (once, with idempotence),
while a record that failed, or whose report never came, was never promised.
So the producer worker appends one JSON line per delivery report (id, ok,
partition, offset, error), and the audit counts `lost` as acknowledged and
missing, and sets aside what was never acknowledged. Reordering is measured on
the topic itself: in each partition, a record whose first copy comes after
the first copy of a record that was produced later.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path

FILE_NAME = "deliveries.jsonl"


def append(fd: int, message_id: str, err, partition: int | None, offset: int | None) -> None:
    """One delivery report as one O_APPEND write (a killed worker leaves whole lines)."""
    line = json.dumps({"id": message_id, "ok": err is None, "partition": partition,
                       "offset": offset if err is None else None,
                       "error": None if err is None else str(err)}, separators=(",", ":")) + "\n"
    os.write(fd, line.encode())


@dataclass
class DeliveryLog:
    acked: set = field(default_factory=set)           # ids with an ok report
    failed: dict = field(default_factory=dict)        # id -> the last error, for ids never acknowledged
    reports: int = 0
    error: str | None = None                          # the log could not be read: every number is unknown


def read(path: Path) -> DeliveryLog:
    log = DeliveryLog()
    try:
        text = path.read_text(errors="replace")
    except OSError as e:
        log.error = f"delivery log {path.name}: {e.strerror or e}"
        return log
    for line in text.splitlines():
        try:
            d = json.loads(line)
        except ValueError:
            continue
        if not isinstance(d, dict) or not isinstance(d.get("id"), str):
            continue
        log.reports += 1
        if d.get("ok"):
            log.acked.add(d["id"])
            log.failed.pop(d["id"], None)
        elif d["id"] not in log.acked:
            log.failed[d["id"]] = d.get("error")
    return log


def reordered(read_order: list, input_position: dict) -> list[str]:
    """Ids whose first copy in a partition comes after the first copy of an id produced later.

    `read_order`: output keys as one reader got them (each partition in log order);
    `input_position`: id -> (partition, offset) of its input record (the producer writes each record
    to its input's partition, in input order)."""
    seen: set = set()
    highest: dict = {}
    out = []
    for key in read_order:
        if key in seen or key not in input_position:
            continue
        seen.add(key)
        partition, offset = input_position[key]
        if offset < highest.get(partition, -1):
            out.append(key)
        highest[partition] = max(highest.get(partition, -1), offset)
    return sorted(out)
