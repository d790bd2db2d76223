"""Judge a run: the prediction against what the audit measured, and every integrity check.

The verdict is `as-predicted` only when every expectation holds, every id
that was predicted lost or duplicated is the one observed (exact runs), no
crash record contradicts its kill point, and every integrity check passes
(amounts, ids never sent, the ledger total, output values). Anything else is
`unexpected`, with the failures in words and the ids that differ. A metric the
audit could not measure makes the verdict `audit-failed`, never a guess.
"""

from collections import Counter
from dataclasses import dataclass, field

from .effects import MAX_IDS
from .predict import Prediction


@dataclass
class Evidence:
    """What the audit saw, beyond the headline numbers."""
    ledger_per_id: dict | None = None          # id -> effects, for ids with a count other than 1
    ledger_lost_ids: list | None = None        # ids with no effect that were acknowledged (not unprocessed)
    dedupe_hits_per_id: dict | None = None     # id -> hits, from the dedupe table
    uncommitted_per_id: dict | None = None     # id -> copies read_uncommitted readers see, for ids with != 1
    integrity: list = field(default_factory=list)   # (failure text, ids)
    errors: list = field(default_factory=list)      # audit errors: what could not be measured
    ids: dict = field(default_factory=dict)         # metric -> the ids behind it, named when it fails


@dataclass
class Verdict:
    verdict: str                                # "as-predicted" | "unexpected" | "audit-failed"
    failed: list = field(default_factory=list)  # "ledger.lost: predicted == 3, observed 4"
    differing_ids: dict = field(default_factory=dict)
    differing_totals: dict = field(default_factory=dict)   # how many distinct ids differ, before capping
    _all: dict = field(default_factory=dict, repr=False)


def judge(p: Prediction, observed: dict, ev: Evidence | None = None) -> Verdict:
    ev = ev or Evidence()
    v = Verdict("as-predicted")
    unknown = []
    for e in p.expectations:
        got = observed.get(e.metric)
        if got is None and e.if_measured and e.metric not in observed:
            continue                          # a store that was not used: nothing to judge
        if got is None:
            unknown.append(e.metric)
        elif not e.holds(got):
            v.failed.append(f"{e.metric}: predicted {e.op} {e.value}, observed {got}")
            if not p.exact or e.metric not in ("ledger.lost", "ledger.duplicates"):   # those get exact ids below
                _ids(v, e.metric, sorted(ev.ids.get(e.metric) or []))
    if p.exact and ev.ledger_lost_ids is not None and p.get("ledger.lost") is not None:
        _ids(v, "lost", sorted(set(ev.ledger_lost_ids) ^ p.lost_ids))
    if p.exact and ev.ledger_per_id is not None and p.get("ledger.duplicates") is not None:
        got = Counter({i: n - 1 for i, n in ev.ledger_per_id.items() if n > 1})
        _ids(v, "duplicates", _differ(got, p.duplicate_counts))
    if p.exact and p.hit_counts is not None and ev.dedupe_hits_per_id is not None:
        _ids(v, "dedupe hits", _differ(Counter({i: n for i, n in ev.dedupe_hits_per_id.items() if n}), p.hit_counts))
    if p.exact and p.aborted_counts is not None and ev.uncommitted_per_id is not None:
        got = Counter({i: n - 1 for i, n in ev.uncommitted_per_id.items() if n > 1})
        _ids(v, "aborted copies", _differ(got, p.aborted_counts))
    if p.exact:
        for metric, want in p.id_sets.items():
            got = ev.ids.get(metric)
            if got is not None:
                _ids(v, metric, sorted(set(got) ^ set(want)))
    for text, ids in ev.integrity:
        v.failed.append(text)
        _ids(v, text.split(":")[0].strip(), ids)
    v.failed += p.inconsistent
    if v.failed or v.differing_ids:
        v.verdict = "unexpected"
    if unknown or ev.errors:
        v.verdict = "audit-failed"
        v.failed += [f"{m}: not measured" for m in unknown] + [f"audit error: {e}" for e in ev.errors]
    return v


def _differ(got: Counter, want: Counter) -> list:
    return sorted(i for i in set(got) | set(want) if got[i] != want[i])


def _ids(v: Verdict, key: str, ids) -> None:
    """Record the ids behind a failure: distinct, sorted, capped in the report, counted in full."""
    if ids:
        every = v._all.setdefault(key, set())
        every.update(ids)
        v.differing_ids[key] = sorted(every)[:MAX_IDS]
        v.differing_totals[key] = len(every)
