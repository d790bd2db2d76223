"""key-reuse's and key-fingerprint's predictor: what must become of the requests produced again under a used key.

Every reused request hidden (the mistake) or every one rejected with its own
amount (the fix), none applied, and the dedupe table's hits per id: the
redeliveries the crash records list, plus one per reused request (each finds
its key). A pure function of the crash log and the run's log of reused
requests; observing them is checker/reused_keys.py's.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from ...checker.damage import DEDUPED
from ...checker.predict import CrashFacts, Expectation, Prediction, expect_or_bound


@dataclass(frozen=True)
class ReusedKeyPredictor:
    """The dedupe table's crashes, plus the reused requests: each finds its key (a hit); the mistake
    (`rejects` False) hides every one, the fix rejects every one with its own amount; neither applies one."""
    rejects: bool = False

    def add(self, p: Prediction, facts: CrashFacts, exp) -> None:
        again = facts.ids("unacked")
        reused = sorted(facts.reused)
        p.expectations.append(Expectation("ledger.duplicates", 0))
        expect_or_bound(p, facts, "ledger.dedupe_hits", len(again) + len(reused), DEDUPED in exp.damage_anywhere(),
                        "unacked")
        expect_or_bound(p, facts, "ledger.lost", len(set(facts.ids("acked_unapplied"))), False)
        if facts.exact:
            p.hit_counts = Counter(again) + Counter(reused)
            p.lost_ids = set(facts.ids("acked_unapplied"))
        # A stopped run decides only the requests it reached (the rest are `unreached`): at most all of them.
        op = "<=" if facts.stopped else "=="
        if self.rejects:          # a redelivery of the same request must never be rejected: none, with nothing reused
            p.expectations.append(Expectation("reuse.rejected", len(reused), op))
        if not reused:            # --reuse-rate 0: nothing was produced again, nothing to hide
            return
        p.expectations += [Expectation("reuse.applied", 0),
                           Expectation("reuse.hidden", 0) if self.rejects else Expectation("reuse.hidden", len(reused), op)]
        if facts.exact and not facts.stopped:
            p.id_sets["reuse.rejected" if self.rejects else "reuse.hidden"] = set(reused)
