"""What the queues family's predictions say beyond the ledger's numbers: the locks and delivery counts behind them.

A share-group worker's crash record lists `unacked` (effects not yet ACCEPTed:
they come again) and `acked_unapplied` (ACCEPTed, never applied: lost) as a
consumer-group worker's does, and `held`: every record it had acquired, with its
delivery count. What differs from a consumer group is how a record comes back:
its lock must expire first, its delivery count grows, and a record a death left
at the group's delivery-count limit is archived, never delivered again.
`ShareLedgerPredictor` counts, per payment, the deliveries that ran its effect:
one per crash that lists it `unacked`, plus the last one, unless a crash
archived it or its ACCEPT preceded a death (`acked_unapplied`). Runs above one
are duplicates (dedupe hits with the dedupe table); none is a loss. With a dead-letter topic
(--dead-letter on) a payment never applied that a crash archived, or a member REJECTed, is predicted
dead-lettered instead of lost (`ledger.dead_lettered`); one ACCEPTed and never applied stays lost. In share-release the crash
plan's payments meet errors instead (share_facts.error_kinds): those with a permanent one are
REJECTed, never applied, lost; those with a transient one are RELEASEd and applied once. `LockNote` reads the
workers' `accepted` events and says, per run, how many records were delivered
more than once, the highest delivery count the broker gave, and how long the
redelivered records waited under their locks (the group's lock duration, not
Kafka's 30 s default).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from ...checker.predict import Expectation, expect_or_bound
from .share_facts import (DELIVERY_LIMIT, LOCK_MS, PERMANENT, archived, dead_letter_on, error_kinds, limit_of,
                          unseen_after)


def _expect(p, facts, metric: str, known: int, unseen: int, source: str | None = None) -> None:
    """`known` as expect_or_bound has it, widened by `unseen` (negative: at most that many fewer; positive: at
    most that many more) into a range when some payments' last deliveries went unseen."""
    if not unseen:
        expect_or_bound(p, facts, metric, known, True, source)
        return
    low, high = (known + unseen, known) if unseen < 0 else (known, known + unseen)
    p.expectations.append(Expectation(metric, high + (0 if facts.exact else facts.slack(source)), "<="))
    p.expectations.append(Expectation(metric, max(low, 0), ">="))


def effect_runs(crashes: list, limit: int = DELIVERY_LIMIT) -> Counter:
    """payment id -> how many of its deliveries ran the effect, for every payment a crash record names
    (a payment no crash names ran it once)."""
    runs, finished = Counter(), {}
    for c in crashes:
        for i in c.get("unacked") or ():
            runs[i] += 1
            finished.setdefault(i, True)
        for i in c.get("acked_unapplied") or ():
            finished[i] = False
            runs[i] += 0
        for i in archived(c, limit):
            finished[i] = False
            runs[i] += 0
        for i in (c.get("held") or {}) if isinstance(c.get("held"), dict) else ():
            finished.setdefault(i, True)
            runs[i] += 0
    for i, last in finished.items():
        runs[i] += 1 if last else 0
    return runs


@dataclass(frozen=True)
class ShareLedgerPredictor:
    """The ledger (and dedupe table) of a share-group run, from `effect_runs`: exact when every death was
    described, else upper bounds (an undescribed death, or an ACCEPT the broker refused, may add to them)."""
    dedupe: bool = False
    errors: bool = False       # share-release: the crash plan's payments meet errors (RELEASE, REJECT) instead

    def add(self, p, facts, exp) -> None:
        runs = effect_runs(facts.described, limit_of(facts.params))
        kinds = error_kinds(planned_ids(facts)) if self.errors else {}
        rejected = {i for i, k in kinds.items() if k == PERMANENT}      # share-release: REJECTed, never applied
        again = Counter({i: n - 1 for i, n in runs.items() if n > 1 and i not in rejected})
        lost = rejected | {i for i, n in runs.items() if n == 0}
        # Payments whose next delivery nobody saw may have run their effect once less (share_facts.unseen_after):
        # `fewer` duplicates (or dedupe hits) and `unrun` payments never applied at most.
        unseen = [i for i in unseen_after(facts.described, facts.events, limit_of(facts.params)) if i not in rejected]
        fewer, unrun = sum(1 for i in unseen if runs[i] > 1), len([i for i in unseen if runs[i] == 1])
        dead_letters = dead_letter_on(facts.params)
        if dead_letters:       # the broker writes what it archives or a member REJECTs there
            dead = lost & (rejected | {i for c in facts.described for i in archived(c, limit_of(facts.params))})
            lost = lost - dead
            _expect(p, facts, "ledger.dead_lettered", len(dead), unrun)
            if facts.exact and not unseen:
                p.id_sets["ledger.dead_lettered"] = sorted(dead)
        if self.dedupe:
            expect_or_bound(p, facts, "ledger.duplicates", 0, False)
            _expect(p, facts, "ledger.dedupe_hits", sum(again.values()), -fewer, "unacked")
        else:
            _expect(p, facts, "ledger.duplicates", sum(again.values()), -fewer, "unacked")
        _expect(p, facts, "ledger.lost", len(lost), 0 if dead_letters else unrun)
        if unseen:
            p.exact = False
            text = (f"{len(unseen)} payment(s) a crash left to come again were never seen at a later delivery "
                    f"({', '.join(unseen[:5])}{', ...' if len(unseen) > 5 else ''}): a member that died or lost its "
                    f"lock with them still unpolled in its client spends deliveries no crash record lists, and the "
                    f"broker archives a record at the limit; whether each ran its effect once more is unknown, so "
                    f"the affected numbers are ranges")
            p.note = f"{p.note}; {text}" if p.note else text
        if facts.exact and not unseen:
            if self.dedupe:
                p.hit_counts = again
            else:
                p.duplicate_counts = again
            p.lost_ids = lost
        if self.errors:
            text = release_note(kinds, facts.events)
            p.note = f"{p.note}; {text}" if p.note else text


def redeliveries(events: list) -> dict:
    """(partition, offset) -> the delivery count of its confirmed acknowledgement, for records delivered more
    than once, from the workers' `accepted` events."""
    out = {}
    for e in events:
        if e.get("event") in ("accepted", "rejected"):
            for r in e.get("records") or ():
                if len(r) > 2 and isinstance(r[2], int) and r[2] > 1:
                    out[(r[0], r[1])] = r[2]
    return out


@dataclass(frozen=True)
class LockNote:
    """Adds the lock and delivery-count story to the prediction's note; predicts nothing itself."""
    lock_ms: int = LOCK_MS

    def add(self, p, facts, exp) -> None:
        again = redeliveries(facts.events)
        crashes, limit = len(facts.crashes), limit_of(facts.params)
        text = (f"share group: records a dead member held came back after their {self.lock_ms / 1000:g} s lock "
                f"(the run's share.record.lock.duration.ms; Kafka's default is 30 s) at any member, archived at "
                f"delivery {limit} (the run's share.delivery.count.limit; Kafka's default is {DELIVERY_LIMIT}); "
                f"{crashes} crash(es), {len(again)} record(s) acknowledged at a delivery count above 1"
                + (f" (highest {max(again.values())})" if again else ""))
        p.note = f"{p.note}; {text}" if p.note else text


def planned_ids(facts) -> frozenset:
    """The crash plan's payments (share-release's seeded errors), from the run's plan file; none without one."""
    from ...runtime.crashplan import CrashPlan
    path = Path(facts.run_dir) / "crash-plan.json" if facts.run_dir else None
    return CrashPlan.load(path).crash_ids if path and path.exists() else frozenset()


def verb_counts(events: list) -> Counter:
    """How many records the members' confirmed acknowledgements RELEASEd and REJECTed, from their events."""
    return Counter(e["event"] for e in events if e.get("event") in ("released", "rejected")
                   for _ in e.get("records") or ())


def release_note(kinds: dict, events: list) -> str:
    """share-release's two verbs side by side: the seeded errors of each kind, and the records the members'
    confirmed acknowledgements RELEASEd and REJECTed."""
    rejected, seen = sum(k == PERMANENT for k in kinds.values()), verb_counts(events)
    return (f"share-release: {len(kinds) - rejected} payment(s) met a transient error (RELEASEd, redelivered, "
            f"applied once: {seen['released']} record(s) released), {rejected} a permanent one (REJECTed, archived: "
            f"lost; {seen['rejected']} record(s) rejected)")
