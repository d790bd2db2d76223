"""Build report.json from a finished run: typed sections, one function, no rendering.

The contract is docs/report.schema.json (schema_version 2); every report the
tests write is validated against it. The sections are dataclasses so a field
cannot be misspelt in one place and read under another name elsewhere. Numbers
the harness could not measure are None (null in JSON, "unknown" when shown),
never 0.
"""

from __future__ import annotations

import statistics
import time
from dataclasses import asdict, dataclass, field

from ..checker.effects import MAX_IDS

SCHEMA_VERSION = 2


@dataclass
class Counts:
    sent: int
    deliveries: int | None
    effects: int | None
    duplicates: int | None
    lost: int | None
    unprocessed: int | None      # never acknowledged: the run stopped before them (not lost)
    dedupe_hits: int | None


@dataclass
class Predicted:
    duplicates: int | None
    lost: int | None
    dedupe_hits: int | None
    exact: bool
    note: str
    expectations: list
    kafka_output: dict | None = None


@dataclass
class Crash:
    point: str | None
    message_id: str | None
    partition: int | None
    offset: int | None
    worker: str | None
    attempt: int | None
    time: float | None
    unacked: list = field(default_factory=list)
    acked_unapplied: list = field(default_factory=list)
    produced: list = field(default_factory=list)
    by: str = "worker"                              # "worker" (planned) or "supervisor" (random kill)
    restart_seconds: float | None = None            # kill -> the same slot's next first record
    read_committed_stall_seconds: float | None = None   # kill -> the same worker's next visible output record


@dataclass
class Anomalies:
    lost_ids: list
    lost_total: int | None
    duplicate_ids: list
    duplicates_total: int | None
    unexpected_ids: list
    unprocessed_ids: list
    unprocessed_total: int | None


@dataclass
class VerdictDetail:
    failed: list
    differing_ids: dict
    differing_totals: dict
    reason: str | None
    audit_errors: list
    unplanned_deaths: list


def crash_entries(crashes: list[dict], restarts: list, stalls: list | None) -> list[dict]:
    out = []
    for i, c in enumerate(crashes):
        out.append(asdict(Crash(
            point=c.get("point"), message_id=c.get("message_id"), partition=c.get("partition"),
            offset=c.get("offset"), worker=c.get("worker"), attempt=c.get("attempt"), time=c.get("time"),
            unacked=list(c.get("unacked") or []), acked_unapplied=list(c.get("acked_unapplied") or []),
            produced=list(c.get("produced") or []), by=c.get("by") or "worker",
            restart_seconds=restarts[i] if i < len(restarts) else None,
            read_committed_stall_seconds=stalls[i] if stalls and i < len(stalls) else None)))
    return out


def timings(wall: float, sent: int, crashes: list[dict]) -> dict:
    rs = [c["restart_seconds"] for c in crashes if c.get("restart_seconds") is not None]
    st = [c["read_committed_stall_seconds"] for c in crashes if c.get("read_committed_stall_seconds") is not None]
    return {"wall_seconds": round(wall, 3),
            "restart_seconds": rs,
            "restart_median_seconds": round(statistics.median(rs), 3) if rs else None,
            "restart_max_seconds": max(rs) if rs else None,
            "read_committed_stall_median_seconds": round(statistics.median(st), 3) if st else None,
            "read_committed_stall_max_seconds": max(st) if st else None,
            "messages_per_second": round(sent / wall, 1) if wall > 0 else None}


def timeline(samples, crashes: list[dict], events: list[dict], t0: float, faults: list[dict]) -> dict:
    """Progress samples, crashes, restarts and other faults, in seconds since the workers started (t0)."""
    starts = [e["t"] - t0 for e in events if e.get("event") == "started" and e.get("attempt", 1) > 1]
    return {"progress": [[t, v] for t, v in samples],
            "crashes": [round(c["time"] - t0, 3) for c in crashes if c.get("time")],
            "restarts": [round(s, 3) for s in starts],
            "faults": [{"fault": f["fault"], "t": round(f["time"] - t0, 3)} for f in faults
                       if f.get("time") and f["fault"] not in ("planned-crash", "random-kill")]}


def capped(ids) -> list:
    return list(ids or [])[:MAX_IDS]


def now() -> float:
    return time.time()
