"""auto-commit's predictor: duplicates and losses as ranges, from where each attempt started and what it logged.

Pure functions of the run's events and applied.jsonl (see the package's docstring), tested on hand-made attempts.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field

from ...checker.predict import Expectation
from .auto_commit_loops import APPLIED_LOG


@dataclass
class Attempt:
    """One worker process: where it started (partition -> offset) and the last offset it logged as applied
    per partition (absent: none). `clean` when it exited by itself: nothing applied is unlogged."""
    worker: str
    attempt: int
    start: dict
    last: dict = field(default_factory=dict)
    clean: bool = False


def coverage(attempts: list[Attempt], ends: dict) -> dict:
    """(partition, offset) -> how many attempts applied it, for every offset below its partition's end."""
    cover = {(p, o): 0 for p, end in ends.items() for o in range(end)}
    for a in attempts:
        for p, last in a.last.items():
            for o in range(a.start.get(p, 0), last + 1):
                if (p, o) in cover:
                    cover[(p, o)] += 1
    return cover


def bounds(attempts: list[Attempt], ends: dict) -> dict:
    """Duplicates and losses implied by the evidence: {"duplicates": [lo, hi], "lost": [lo, hi], "unlogged": k}.
    Each attempt that did not exit by itself may have applied one effect more than it logged (killed
    between the effect's commit and the log line): that one either is a duplicate or is not lost."""
    cover = coverage(attempts, ends)
    dup = sum(n - 1 for n in cover.values() if n > 1)
    lost = sum(1 for n in cover.values() if n == 0)
    k = sum(1 for a in attempts if not a.clean)
    return {"duplicates": [dup, dup + k], "lost": [max(0, lost - k), lost], "unlogged": k}


def per_kill(attempts: list[Attempt]) -> list[dict]:
    """For each attempt that died, against its successor on the same worker slot: `redelivered`, the offsets it
    had applied (as logged) that the successor read again, from the committed offset it fetched; `skipped`,
    the offsets between its last applied one and that committed offset (committed, not applied by it).
    Per kill, not net: a successor may die before it re-applies what it read, and an offset one attempt
    skipped may have been applied by an earlier one. Summed, redelivered >= duplicates and skipped >= lost
    (give or take one unlogged effect per kill); the ledger's counts are the audit's."""
    out = []
    by_worker: dict = {}
    for a in sorted(attempts, key=lambda a: (a.worker, a.attempt)):
        by_worker.setdefault(a.worker, []).append(a)
    for worker, seq in by_worker.items():
        for dead, nxt in zip(seq, seq[1:]):
            again = skipped = 0
            for p, resumed in nxt.start.items():
                applied_to = dead.last.get(p, dead.start.get(p, 0) - 1)
                again += max(0, applied_to + 1 - resumed)
                skipped += max(0, resumed - applied_to - 1)
            out.append({"worker": worker, "attempt": dead.attempt,
                        "resumed_from": {str(p): o for p, o in sorted(nxt.start.items())},
                        "last_applied": {str(p): o for p, o in sorted(dead.last.items())},
                        "redelivered": again, "skipped": skipped})
    return out


def read_attempts(events: list, applied_lines: list, clean: set) -> list[Attempt]:
    """Attempts from the workers' `started` events and the applied log's lines."""
    attempts: dict = {}
    for ev in events:
        if ev.get("event") == "started" and isinstance(ev.get("offsets"), dict):
            key = (ev.get("worker"), ev.get("attempt"))
            attempts[key] = Attempt(key[0], key[1], {int(p): int(o) for p, o in ev["offsets"].items()},
                                    clean=key in clean)
    for line in applied_lines:
        a = attempts.get((line.get("w"), line.get("a")))
        if a is not None:
            p, o = int(line["p"]), int(line["o"])
            a.last[p] = max(a.last.get(p, -1), o)
    return list(attempts.values())


def _read_applied(run_dir) -> list:
    out = []
    try:
        with open(os.path.join(run_dir, APPLIED_LOG)) as f:
            for line in f:
                try:
                    out.append(json.loads(line))
                except ValueError:
                    continue        # a line cut by the kill
    except (OSError, TypeError):
        pass
    return out


@dataclass(frozen=True)
class AutoCommitPredictor:
    """Ledger duplicates and losses as a range, from where each attempt started and what it logged."""

    def add(self, p, facts, exp) -> None:
        ends: dict = {}
        for _id, (part, off) in facts.positions.items():
            ends[part] = max(ends.get(part, 0), off + 1)
        clean = {(e.get("worker"), e.get("attempt")) for e in facts.events if e.get("event") == "done"}
        attempts = read_attempts(facts.events, _read_applied(facts.run_dir), clean)
        b = bounds(attempts, ends)
        for metric, key in (("ledger.duplicates", "duplicates"), ("ledger.lost", "lost")):
            lo, hi = b[key]
            p.expectations += [Expectation(metric, hi, "<="), Expectation(metric, lo, ">=")]
        p.evidence = per_kill(attempts)
        p.note = (f"predicted from where each of {len(attempts)} worker attempt(s) started (the committed offsets it "
                  f"fetched) and the effects each logged; {b['unlogged']} killed attempt(s) may each have applied one "
                  f"effect they did not log, hence the ranges")
