"""The predictors every experiment family shares: one small class per store, and the user's claim.

Each is a frozen dataclass with `add(prediction, facts, exp)`: it reads the
crash records' lists its store cares about (checker/predict.py's `CrashFacts`)
and appends what the audit must find. An experiment lists the ones it uses in
its declaration (experiments/<family>/__init__.py); predictors a single family
needs live in that family's folder (experiments/keys/key_predictors.py, ...).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from .damage import ABORTED, DEDUPED, DUPLICATED, LOST, ORPHANED, REPUBLISHED, UNPUBLISHED
from .predict import CrashFacts, Expectation, Prediction, expect_or_bound


@dataclass(frozen=True)
class LedgerPredictor:
    """The Postgres ledger: duplicates from `unacked`, losses from `acked_unapplied`; with a dedupe
    table, `unacked` become dedupe hits instead of duplicates. A payment written a second time by a
    worker resumed after its key check (an overlap, `facts.twins`) is a dedupe hit when the key is
    unique, and a duplicate when it is not (`unique_key` False: a check-then-insert)."""
    dedupe: bool = False
    unacked: str = "unacked"
    acked_unapplied: str = "acked_unapplied"
    unique_key: bool = True

    def add(self, p: Prediction, facts: CrashFacts, exp) -> None:
        damage = exp.damage_anywhere()
        again = facts.ids(self.unacked)
        lost = set(facts.ids(self.acked_unapplied))
        if self.dedupe:
            hits, dup = (again + facts.twins, []) if self.unique_key else (again, list(facts.twins))
            expect_or_bound(p, facts, "ledger.duplicates", len(dup), not self.unique_key and bool(facts.frozen))
            expect_or_bound(p, facts, "ledger.dedupe_hits", len(hits), DEDUPED in damage or bool(facts.aborts),
                            self.unacked)
            if facts.exact:
                p.hit_counts, p.duplicate_counts = Counter(hits), Counter(dup)
        else:
            expect_or_bound(p, facts, "ledger.duplicates", len(again), DUPLICATED in damage or bool(facts.aborts),
                    self.unacked)
            if facts.exact:
                p.duplicate_counts = Counter(again)
        expect_or_bound(p, facts, "ledger.lost", len(lost), LOST in damage)
        if facts.exact:
            p.lost_ids = lost


@dataclass(frozen=True)
class OutputPredictor:
    """The transactional output topic: read_committed exact; read_uncommitted holds one aborted
    copy per record that was in an open transaction at a crash (the worker flushes before dying)."""
    produced: str = "produced"

    def add(self, p: Prediction, facts: CrashFacts, exp) -> None:
        p.expectations += [Expectation("kafka.read_committed.duplicates", 0),
                           Expectation("kafka.read_committed.lost", 0)]
        produced = facts.ids(self.produced)
        expect_or_bound(p, facts, "kafka.read_uncommitted.duplicates", len(produced), ABORTED in exp.damage_anywhere(),
                self.produced)
        if facts.exact:
            p.aborted_counts = Counter(produced)
        p.expectations.append(Expectation("kafka.read_uncommitted.lost", 0))


@dataclass(frozen=True)
class FencedPredictor:
    """A producer that comes back after its transactional.id was taken over must be fenced."""

    def add(self, p: Prediction, facts: CrashFacts, exp) -> None:
        p.expectations.append(Expectation("fault.zombie.fenced", 1))


@dataclass(frozen=True)
class EventsPredictor:
    """The events topic of a service that writes a row and publishes an event: rows without events
    (`row_only`), events without rows (`event_only`) and extra copies (`republished`), one per id a crash
    record lists."""

    def add(self, p: Prediction, facts: CrashFacts, exp) -> None:
        damage = exp.damage_anywhere()
        for metric, source, kind in (("events.unpublished", "row_only", UNPUBLISHED),
                                     ("events.orphaned", "event_only", ORPHANED),
                                     ("events.duplicates", "republished", REPUBLISHED)):
            ids = facts.ids(source)
            expect_or_bound(p, facts, metric, len(ids), kind in damage)
            if facts.exact:
                p.id_sets[metric] = set(ids)
        if exp.stores.outbox:
            p.expectations.append(Expectation("outbox.unsent", 0))
# What each delivery claim forbids: (no duplicates, no losses).
CLAIMS = {"exactly-once": (True, True), "at-least-once": (False, True), "at-most-once": (True, False)}


@dataclass(frozen=True)
class ClaimPredictor:
    """A consumer the harness did not write keeps no crash records: what is predicted is the user's
    claim itself (`--expect`), per id, whatever the kills did. The claim is exact: zero duplicates
    and/or zero losses, each id named when it fails. An output topic is held to the same claim
    under read_committed, when the consumer wrote to it."""
    claim: str = "exactly-once"

    def add(self, p: Prediction, facts: CrashFacts, exp) -> None:
        no_dup, no_loss = CLAIMS[self.claim]
        p.exact, p.claim = True, self.claim
        p.note = (f"the claim under test is {self.claim}: "
                  + " and ".join(w for w, on in (("no effect applied twice", no_dup), ("none lost", no_loss)) if on)
                  + f", whatever the {len(facts.crashes)} kill(s) did")
        for on, what in ((no_dup, "duplicates"), (no_loss, "lost")):
            if on:
                p.expectations.append(Expectation(f"ledger.{what}", 0))
                if exp.stores.output_if_written:
                    p.expectations.append(Expectation(f"kafka.read_committed.{what}", 0, if_measured=True))
