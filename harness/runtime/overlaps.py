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
    try:
        return parse(Path(path).read_bytes())
    except OSError:
        return []


def parse(data: bytes) -> list[dict]:
    """The overlap records of these lines; torn or foreign lines are skipped."""
    return [r for r in crashlog.parse(data) if r.get("kind") in KINDS and isinstance(r.get("message_id"), str)
            and isinstance(r.get("time"), (int, float))]


def episodes(records: list[dict]) -> dict[str, dict]:
    """payment id -> {kind: its first record of that kind}: the steps each episode got to."""
    out: dict[str, dict] = {}
    for r in records:
        out.setdefault(r["message_id"], {}).setdefault(r["kind"], r)
    return out


def finished(records: list[dict]) -> list[dict]:
    """The `frozen` records whose worker came back and left after its late write (a `left` of the same
    payment, worker and attempt): their second write is known to be done. Two workers frozen on one
    payment (a rebalancing group) are two episodes."""
    left = {(r["message_id"], r.get("worker"), r.get("attempt")) for r in records if r["kind"] == "left"}
    return [r for r in records if r["kind"] == "frozen" and (r["message_id"], r.get("worker"), r.get("attempt")) in left]
