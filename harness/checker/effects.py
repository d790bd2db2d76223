"""Count effects from a multiset of message ids: duplicates, lost, unexpected.

Pure functions on hand-made data; the ledger and the Kafka output audits both
reduce to this. Duplicates are effects beyond one per id; lost ids have no
effect at all; unexpected ids have effects but were never sent.
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
