"""Count effects from a multiset of message ids, and check each effect against its payment.

Pure functions on hand-made data; the ledger and the Kafka output audits both
reduce to this. Duplicates are effects beyond one per id; lost ids have no
effect at all; unexpected ids have effects but were never sent. `integrity`
checks what counting alone cannot see: each effect's amount against the
payment's, and the total against expected + duplicated - lost amounts.
"""

from collections import Counter
from dataclasses import dataclass, field

MAX_IDS = 20   # witnesses kept in reports: a few examples, never the whole table


@dataclass
class EffectCounts:
    effects: int = 0
    duplicates: int = 0
    lost: int = 0
    unexpected: int = 0
    duplicate_ids: list = field(default_factory=list)   # ids with more than one effect, sorted
    lost_ids: list = field(default_factory=list)
    unexpected_ids: list = field(default_factory=list)
    per_id: dict = field(default_factory=dict)          # id -> count, only for ids with count != 1


def count_effects(sent_ids, effect_ids) -> EffectCounts:
    sent = set(sent_ids)
    c = Counter(i for i in effect_ids if i is not None)
    dup_ids = sorted(i for i, n in c.items() if n > 1)
    lost_ids = sorted(sent - set(c))
    unexpected_ids = sorted(set(c) - sent)
    return EffectCounts(
        effects=sum(c.values()),
        duplicates=sum(n - 1 for n in c.values()),
        lost=len(lost_ids),
        unexpected=len(unexpected_ids),
        duplicate_ids=dup_ids, lost_ids=lost_ids, unexpected_ids=unexpected_ids,
        per_id={i: n for i, n in c.items() if n != 1})


@dataclass
class Integrity:
    """Checks beyond counting; each failing check names its ids (all of them, capped in reports)."""
    wrong_amount_ids: list = field(default_factory=list)
    unexpected_ids: list = field(default_factory=list)
    actual_total: int = 0
    total_from_counts: int = 0     # what the total must be given the observed counts and the payments

    def failures(self, store: str) -> list[tuple[str, list]]:
        out = []
        if self.wrong_amount_ids:
            out.append((f"{store} amounts: {len(self.wrong_amount_ids)} id(s) with an effect whose amount is not "
                        f"the payment's", self.wrong_amount_ids))
        if self.unexpected_ids:
            out.append((f"{store} ids never sent: {len(self.unexpected_ids)} id(s) with effects but no payment",
                        self.unexpected_ids))
        if self.actual_total != self.total_from_counts:
            out.append((f"{store} total: {self.actual_total:,} is not expected + duplicated - lost amounts "
                        f"({self.total_from_counts:,})", []))
        return out


def integrity(amounts: dict, effects: list) -> Integrity:
    """`amounts` maps each sent id to its amount; `effects` is [(id, amount)] as observed."""
    wrong = sorted({i for i, a in effects if i in amounts and a != amounts[i]})
    unexpected = sorted({str(i) for i, _ in effects if i not in amounts})
    actual = sum(a or 0 for _, a in effects)
    from_counts = sum(amounts[i] for i, _ in effects if i in amounts)
    return Integrity(wrong, unexpected, actual, from_counts)


def split_missing(missing_ids, positions: dict | None, committed: dict | None) -> tuple[list, list]:
    """Missing ids -> (lost, unprocessed). An id whose input offset is at or past its partition's
    committed offset was never acknowledged: the run stopped before it, so it is not lost. Without
    positions or committed offsets every missing id counts as lost (the run finished: nothing is
    left unacknowledged)."""
    if not positions or committed is None:
        return sorted(missing_ids), []
    lost, unprocessed = [], []
    for i in missing_ids:
        pos = positions.get(i)
        if pos is not None and pos[1] >= committed.get(pos[0], 0):
            unprocessed.append(i)
        else:
            lost.append(i)
    return sorted(lost), sorted(unprocessed)
