"""auto-commit: the consumer's defaults, `enable.auto.commit=true`, and what a SIGKILL costs with them.

The worker polls, applies each effect, and never commits: librdkafka commits
in the background every `auto.commit.interval.ms` (5000 ms unless
`--auto-commit-interval-ms` says otherwise) the offsets of every record
`consume()` has *handed out*, applied or not. A kill therefore costs either
way: effects applied after the last auto-commit are applied again
(duplicates), and records handed out, committed, and not yet applied are never
seen again (lost). (The classic Java consumer commits inside `poll()`, after a
synchronous loop has finished the previous batch, so there it only
duplicates; librdkafka's timer can also lose.)

The supervisor's random SIGKILLs strike at instants the worker does not
choose, so its crash log says nothing of what was in flight. The prediction
comes from two other pieces of evidence instead:

- where each attempt started: the committed offsets it fetched (its
  `started` event), which is what the broker had committed when its
  predecessor died, as far as the successor is concerned;
- what each attempt applied: the worker appends each applied effect's
  partition and offset to `applied.jsonl` right after the effect commits.

Attempt k applied, per partition, the offsets from its start to its last
logged one; counting how many attempts cover each offset gives the
duplicates (covered more than once) and the losses (never covered). One thing
stays unknown: a kill between an effect's commit and its log line leaves one
applied effect unlogged, which can turn a loss into nothing or add one
duplicate. So the prediction is a range, as wide as the number of kills.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass, field

from ..checker.predict import Expectation
from ..core.options import Option
from .declaration import Experiment, Stores

POLL_BATCH = 500              # the Java client's default max.poll.records
APPLIED_LOG = "applied.jsonl"
# The consumer's defaults, as an application that never sets them gets them.
AUTO_COMMIT_CONSUMER = {"enable.auto.commit": True, "enable.auto.offset.store": True}
CLIENT_DEFAULT_INTERVAL_MS = 5000

AUTO_COMMIT_INTERVAL_MS = Option(
    "auto_commit_interval_ms", int, "auto-commit only: the consumer's auto.commit.interval.ms.",
    shown=f"the client's, {CLIENT_DEFAULT_INTERVAL_MS}", low=1, high=600_000, must="between 1 and 600,000",
    worker=True)


def auto_commit_loop(ctx) -> None:
    """poll, apply each effect, log it; no commit: the client's timer commits what poll handed out.
    Once everything is applied, wait for that timer to commit the end, then exit."""
    ctx.assign()
    fd = os.open(os.path.join(os.path.dirname(ctx.events.path), APPLIED_LOG),
                 os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW, 0o644)
    try:
        while True:
            for msg in ctx.poll(POLL_BATCH):
                ctx.deliver(msg)
                ctx.apply_effect(msg)
                os.write(fd, (json.dumps({"w": ctx.worker, "a": ctx.attempt, "p": msg.partition(),
                                          "o": msg.offset()}) + "\n").encode())
            if ctx.at_end():
                ctx.refresh_committed()
                if ctx.caught_up():
                    return
                time.sleep(0.05)
    finally:
        os.close(fd)


# -- the prediction, from the evidence ----------------------------------------------------------------

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


AUTO_COMMIT = Experiment(
    name="auto-commit",
    steps=("poll (the client stores the offsets it hands out)", "effect",
           "auto-commit of the stored offsets, on the client's timer"),
    kill_points=(),
    default_point=None,
    stores=Stores(ledger=True),
    proves="The consumer's defaults: auto-commit on a timer commits what poll handed out, applied or not.",
    expected="duplicates (applied after the last auto-commit) and losses (committed, never applied), "
             "within the range the evidence gives",
    predictors=(AutoCommitPredictor(),),
    loop=auto_commit_loop,
    default_faults=("random-kill",),
    options=(AUTO_COMMIT_INTERVAL_MS,),
    refuses={"commit_every": "its consumer never commits; the client's timer does (--auto-commit-interval-ms)"},
    consumer=AUTO_COMMIT_CONSUMER,
    lesson="Mistake: leaving enable.auto.commit=true, which commits on a timer whatever was polled, so a crash "
           "duplicates and loses. Fix: enable.auto.commit=false and commit after the effect (offset-after), "
           "with an idempotency key in the effect's transaction (dedupe).",
    suite={"group": "mistakes", "weight": 3, "args": ["--auto-commit-interval-ms", "100", "--kills", "10"]},
)
