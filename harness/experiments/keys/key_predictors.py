"""Predictors of the idempotency-key mistakes (this family, experiments/keys/), from crash records and worker events.

They read the same crash records as predictors.py (`unacked`: the records that
come again, `acked_unapplied`: lost), plus what those records alone cannot
say: which of the redelivered payments lost their key (the crash struck
between effect and key, or the key had expired by the time the payment came
again). Crashes the worker did not describe turn the numbers they can change
into upper bounds, as in checker/predict.py. They live in the family's folder,
beside its declarations (__init__.py) and its loops (key_loops.py): pure
functions of the recorded data, like the checker's judging part, whose types
they use (provider's declaration uses NoHitsPredictor too).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from ...checker.damage import DEDUPED, DUPLICATED
from ...checker.predict import CrashFacts, Expectation, Prediction, expect_or_bound

# Postgres keeps timestamps to the microsecond: a key this close to the purge's cutoff is too close to call.
ROUNDING_S = 0.001


@dataclass(frozen=True)
class SplitKeyPredictor:
    """Key and effect in separate commits, key second: a crash at one of `unkeyed_points` leaves the
    crashed payment's effect without a key, so its redelivery charges again; every other redelivered
    payment finds its key (a dedupe hit)."""
    unkeyed_points: tuple = ()

    def add(self, p: Prediction, facts: CrashFacts, exp) -> None:
        dup, hits = Counter(), Counter()
        for c in facts.described:
            unkeyed = c.get("message_id") if c.get("point") in self.unkeyed_points else None
            for i in c.get("unacked") or []:
                (dup if i == unkeyed else hits)[i] += 1
        damage = exp.damage_anywhere()
        expect_or_bound(p, facts, "ledger.duplicates", sum(dup.values()), DUPLICATED in damage)
        expect_or_bound(p, facts, "ledger.dedupe_hits", sum(hits.values()), DEDUPED in damage)
        p.expectations.append(Expectation("ledger.lost", len(set(facts.ids("acked_unapplied")))))
        if facts.exact:
            p.duplicate_counts, p.hit_counts = dup, hits
            p.lost_ids = set(facts.ids("acked_unapplied"))


@dataclass(frozen=True)
class NoHitsPredictor:
    """Keys minted per delivery: no redelivery can find one, so the dedupe table counts no hit at all."""

    def add(self, p: Prediction, facts: CrashFacts, exp) -> None:
        p.expectations.append(Expectation("ledger.dedupe_hits", 0))
        if facts.exact:
            p.hit_counts = Counter()


def expired_at_redelivery(crash: dict, events: list) -> dict:
    """Per payment the crash left unacknowledged: True (its key had expired when it came again: charged
    again), False (the key was still there: a dedupe hit) or None (unknown: no redelivery seen, no key
    time recorded, or too close to the TTL to call).

    The evidence: the crash record's `key_at` (when each key was written) and `dedupe_ttl`, and the first
    `redelivered` event of that payment after the crash. Its `lookup_t` is the time the purge before the
    lookup used: a key older than the TTL then was purged by that very worker (expired). Its `done_t` is
    taken after the lookup's transaction: every purge that ran before the lookup (another worker's too)
    used a time before it, so a key younger than the TTL at `done_t` was still there (a hit). Between
    the two, another worker's purge may have struck first: unknown.
    """
    ttl, key_at, t = crash.get("dedupe_ttl"), crash.get("key_at") or {}, crash.get("time") or 0.0
    out = {}
    for i in crash.get("unacked") or []:
        seen = [e for e in events if e.get("event") == "redelivered" and e.get("message_id") == i
                and isinstance(e.get("lookup_t"), (int, float)) and e["lookup_t"] > t]
        k = key_at.get(i)
        if ttl is None or k is None or not seen:
            out[i] = None
            continue
        first = min(seen, key=lambda e: e["lookup_t"])
        done = first.get("done_t") if isinstance(first.get("done_t"), (int, float)) else None
        if first["lookup_t"] - k > ttl + ROUNDING_S:
            out[i] = True
        elif done is not None and done - k < ttl - ROUNDING_S:
            out[i] = False
        else:
            out[i] = None
    return out


@dataclass(frozen=True)
class KeyExpiryPredictor:
    """Key and effect in one transaction, keys purged after a TTL: a redelivered payment is charged again
    exactly when its key was older than the TTL at the redelivery's lookup. Dedupe hits are not predicted:
    the purge deletes keys with their hit counts, so the table cannot be counted afterwards."""

    def add(self, p: Prediction, facts: CrashFacts, exp) -> None:
        dup, unknown = Counter(), 0
        for c in facts.described:
            for i, expired in expired_at_redelivery(c, facts.events).items():
                if expired is None:
                    unknown += 1
                elif expired:
                    dup[i] += 1
        p.expectations.append(Expectation("ledger.lost", 0))
        if facts.exact and not unknown:
            p.expectations.append(Expectation("ledger.duplicates", sum(dup.values())))
            p.duplicate_counts = dup
            return
        bound = sum(dup.values()) + unknown + (0 if facts.exact else facts.slack())
        p.expectations.append(Expectation("ledger.duplicates", bound, "<="))
        p.exact = False
        if unknown:
            p.note = (f"{unknown} redelivered payment(s) came too close to their key's expiry to call (or were "
                      f"not seen again): duplicates are an upper bound; the audit itself is exact")
