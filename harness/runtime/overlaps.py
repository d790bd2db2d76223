"""The overlap log: two deliveries of one payment in flight at once, one fsynced line per step.

The overlap fault (faults/overlap.py) makes two deliveries of a payment
overlap, the way a consumer that stalls (a GC pause, a frozen VM) overlaps the
member that took its partitions: a worker that has just checked the payment's
key freezes itself (SIGSTOP), a replacement takes its partitions and handles
the payment, then the frozen worker is resumed and finishes what it started:
its write, on a key it checked before anyone wrote it. Each step is a line in
`overlaps.jsonl` beside the crash log, written by the process that took it:

- `frozen`: the first delivery, right after its check, before it stops itself
  (the payment, and `unacked`: its records since the last commit, which the
  replacement gets again);
- `applied`: the replacement, once past its own write of that payment;
- `left`: the resumed worker, at its next gap after its late write, just
  before it exits without committing offsets (its partitions are the
  replacement's now; a group would refuse its commit).

The fault drives the story from these lines and the predictor reads the
finished episodes: each one is a second write of its payment, a duplicate
without a unique key, a dedupe hit with one.
"""

from __future__ import annotations

import time
from pathlib import Path

from . import crashlog

FILE_NAME = "overlaps.jsonl"
KINDS = ("frozen", "applied", "left")


def path_beside(crash_log: Path) -> Path:
    return Path(crash_log).with_name(FILE_NAME)


def append(path: Path, kind: str, **fields) -> None:
    crashlog.append(path, {"kind": kind, **fields, "time": time.time()})


def read(path: Path) -> list[dict]:
    return [r for r in crashlog.read(path) if r.get("kind") in KINDS and isinstance(r.get("message_id"), str)]


def episodes(records: list[dict]) -> dict[str, dict]:
    """payment id -> {kind: its first record of that kind}: the steps each episode got to."""
    out: dict[str, dict] = {}
    for r in records:
        out.setdefault(r["message_id"], {}).setdefault(r["kind"], r)
    return out


def finished(records: list[dict]) -> list[dict]:
    """The `frozen` records of the episodes whose frozen worker came back and left after its late write
    (its own `left`, same worker and attempt): their second write is known to be done."""
    out = []
    for steps in episodes(records).values():
        f, left = steps.get("frozen"), steps.get("left")
        if f and left and (left.get("worker"), left.get("attempt")) == (f.get("worker"), f.get("attempt")):
            out.append(f)
    return out
