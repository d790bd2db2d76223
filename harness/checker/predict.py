"""Predict a run from its crash log: the expectations the audit must meet, exact or bounded.

This is the checker's first half (the verdict, checker/verdict.py, is the
second): what the crash records say must have happened, stated before
anything is compared. It holds the types every predictor writes into
(`Expectation`, `Prediction`), the facts they read (`CrashFacts`), and
`predict`, which runs the predictors an experiment declares
(checker/predictors.py, or a family's own, experiments/<family>/*_predictors.py) without knowing any experiment by name.

A worker about to die writes what its death will do: `unacked` (effects
applied but not acknowledged: they come again), `acked_unapplied` (offsets
committed, effect not applied: nobody brings them back) and `produced`
(records in the open Kafka transaction: aborted, but read_uncommitted readers
still see them). Each predictor reads the lists its store cares about and
states what the audit must find.

When some crashes were not described by the worker (a supervisor's random
SIGKILL strikes at any instant), the numbers a kill point could change become
upper bounds: at most `commit_every` records per undescribed crash, on top of
what the described ones say (every payment, when transactions commit on a
timer). What no kill point of the experiment can cause
stays exact (offset-before never duplicates, whatever the instant).

The abort fault's aborts are planned: the worker flushed the transaction
before aborting it (every record of it is in the log) and logged what it held
(`txn_aborted` with `planned: true`), so they count exactly, like crash
records.

A broker fault can abort a transaction that no crash caused (a coordinator
gone mid-commit, a leader that moved under an open transaction). The worker
logs each abort it sees (`txn_aborted`, and `fenced` when the abort is fatal;
`txn_stuck` when a transactional call never returned and nobody can say
whether its transaction committed) with the records in that transaction and
the ledger rows it will apply again: those may or may not have reached the log, so once a broker fault struck (or
any abort was seen) the aborted copies and what aborts redo are upper bounds
(described crashes + what each abort event lists, + the record in hand whose
ledger row was written just before the produce failed). read_committed stays
exact: that is the promise under test. Experiments without an output topic
stay exact under broker faults: a failed offset commit or fetch kills the
worker, and a death no crash record describes already makes a bound.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from .damage import SOURCE_OF


@dataclass
class Expectation:
    metric: str          # e.g. "ledger.duplicates", "kafka.read_uncommitted.duplicates"
    value: int
    op: str = "=="       # "==" exact, "<=" upper bound, ">=" lower bound
    if_measured: bool = False   # judged only when the audit measured it (a store that may stay unused)

    def holds(self, observed: int | None) -> bool:
        if observed is None:
            return False
        if self.op == ">=":
            return observed >= self.value
        return observed == self.value if self.op == "==" else observed <= self.value

    def text(self) -> str:
        return f"{self.metric} {self.op} {self.value}"


@dataclass
class Prediction:
    exact: bool
    expectations: list = field(default_factory=list)
    lost_ids: set = field(default_factory=set)                 # exact only: ids the ledger must miss
    duplicate_counts: Counter = field(default_factory=Counter)  # exact only: id -> extra effects
    aborted_counts: Counter | None = None      # exact only, with an output topic: id -> aborted copies
    hit_counts: Counter | None = None          # exact only, with a dedupe table: id -> dedupe hits
    inconsistent: list = field(default_factory=list)           # crash records that contradict their kill point
    note: str = ""
    evidence: list = field(default_factory=list)   # per crash, what a predictor read beyond the crash log
    id_sets: dict = field(default_factory=dict)    # exact only: metric -> the ids the audit must name for it
    claim: str | None = None   # a claim the run tests (--expect) instead of a prediction from crash records

    def range(self, metric: str) -> list | None:
        """[low, high] when the prediction bounds `metric` on both sides, else None."""
        lo = next((e.value for e in self.expectations if e.metric == metric and e.op == ">="), None)
        hi = next((e.value for e in self.expectations if e.metric == metric and e.op == "<="), None)
        return [lo, hi] if lo is not None and hi is not None else None

    def get(self, metric: str) -> Expectation | None:
        return next((e for e in self.expectations if e.metric == metric), None)

    def value(self, metric: str) -> int | None:
        e = self.get(metric)
        return e.value if e else None


@dataclass
class CrashFacts:
    """The crash log, read once for every predictor."""
    crashes: list
    inflight_max: int = 1      # the most records a worker holds unacknowledged (commit_every, or all with a commit interval)
    interruptions: int = 0     # faults that stopped a worker at an instant it did not choose (a zombie's freeze)
    events: list = field(default_factory=list)     # every worker event (started, first_message, redelivered, done ...)
    amounts: dict = field(default_factory=dict)    # payment id -> amount, as produced
    accounts: dict = field(default_factory=dict)   # payment id -> account, for workloads with accounts
    run_dir: object = None     # the run's folder: evidence some workers write beside the crash log
    positions: dict = field(default_factory=dict)  # payment id -> (partition, offset) in the input topic
    aborts: list = field(default_factory=list)   # txn_aborted/fenced/txn_stuck/commit_lost: work no crash record describes
    planned_aborts: list = field(default_factory=list)   # the abort fault's, flushed first: as exact as crash records
    loosened: bool = False     # a fault struck that can abort transactions unseen by crash records (a broker fault)
    params: object = None      # the run's options (RunParams), for predictors that depend on them
    reused: dict = field(default_factory=dict)   # payment id -> its reused request (workload/reused_payments.py), if any
    frozen: list = field(default_factory=list)   # the overlap fault's `frozen` records: like crashes, their unacked
                                                 # come again (to the replacement)
    twins: list = field(default_factory=list)    # payments a resumed worker wrote a second time (finished overlaps)
    stopped: bool = False      # the run ended before its workers finished (interrupted, time limit)

    @property
    def described(self) -> list:
        return [c for c in self.crashes if c.get("by") != "supervisor"]

    @property
    def undescribed(self) -> int:
        return len(self.crashes) - len(self.described) + self.interruptions

    @property
    def exact(self) -> bool:
        return self.undescribed == 0 and not self.aborts and not self.loosened

    def ids(self, source: str) -> list[str]:
        return [i for c in self.described + self.planned_aborts + self.frozen for i in (c.get(source) or [])
                if isinstance(i, str)]

    def slack(self, source: str | None = None) -> int:
        """How much more than the described crashes say a number may be: `inflight_max` per undescribed
        crash, plus, per abort event, the ids it lists under `source` (and one more for `unacked`: the
        record in hand, whose ledger row may be written when its produce failed); an event whose lists
        could not be written counts like an undescribed crash."""
        extra = sum((max(1, self.inflight_max) if a.get("evidence_errors") else len(a.get(source) or []))
                    + (1 if source == "unacked" else 0) for a in self.aborts) if source else 0
        return self.undescribed * max(1, self.inflight_max) + extra


def _frozen(records: list) -> list:
    return [r for r in records if r.get("kind") == "frozen"]


def _twins(records: list) -> list:
    """The payment of each finished overlap episode (frozen, then left by the same worker and attempt), once
    per episode: two workers frozen on one payment wrote it twice more."""
    left = {(r.get("message_id"), r.get("worker"), r.get("attempt")) for r in records if r.get("kind") == "left"}
    return sorted(r["message_id"] for r in _frozen(records)
                  if (r.get("message_id"), r.get("worker"), r.get("attempt")) in left)


def expect_or_bound(p: Prediction, facts: CrashFacts, metric: str, known: int, can_happen: bool,
                    source: str | None = None) -> None:
    """Expect `known` exactly, unless crashes nobody described (or aborts) could have added to it and
    `can_happen` says the experiment's kill points can cause it: then expect at most that much more."""
    if facts.exact or not can_happen:
        p.expectations.append(Expectation(metric, known))
    else:
        p.expectations.append(Expectation(metric, known + facts.slack(source), "<="))


def check_declared_damage(exp, crashes: list) -> list[str]:
    """A described crash whose lists show a damage its kill point does not declare: the declaration
    (or the worker) is wrong, and the verdict must say so rather than predict from it."""
    out = []
    for i, c in enumerate(crashes, 1):
        point = exp.point(c.get("point"))
        if point is None or c.get("by") == "supervisor":
            continue
        for damage, source in SOURCE_OF.items():
            if c.get(source) and not any(SOURCE_OF[d] == source for d in point.damage):
                out.append(f"crash {i} at {point.name} lists {len(c[source])} {source} ids, "
                           f"a damage ({damage}) this kill point does not declare")
                break
    return out


def predict(exp, crashes: list[dict], inflight_max: int = 1, interruptions: int = 0, events: list | None = None,
            amounts: dict | None = None, accounts: dict | None = None, run_dir=None,
            positions: dict | None = None, aborts: list | None = None, loosened: bool = False,
            params=None, reused: dict | None = None, overlaps: list | None = None,
            stopped: bool = False) -> Prediction:
    """`inflight_max`: the most records one worker holds unacknowledged (its commit_every, or every
    payment when it commits on a timer). `interruptions`: workers stopped at an instant nobody
    described (a zombie's freeze, a death no fault caused): like undescribed crashes, they turn the
    numbers a crash can change into bounds. `events`, `amounts`, `accounts`, `run_dir` and `positions`
    are for predictors that need more than the crash log (when a redelivery happened, what each
    payment moved and where, evidence beside the crash log, each payment's input offset). `aborts`:
    the workers' abort events; `loosened`: a broker fault struck. `params`: the run's options, for
    predictors that depend on them. `reused`: the requests the run produced again under a used key.
    `overlaps`: the overlap log (runtime/overlaps.py's records): each frozen delivery's unacked come again,
    and each finished episode is its payment written a second time. `stopped`: the run did not finish."""
    # Only an experiment that writes Kafka output can have a transaction (or a produce) a broker fault
    # undoes behind its back; a consumer that commits offsets either succeeds or dies, and a death is counted.
    planned = [a for a in aborts or [] if a.get("event") == "txn_aborted" and a.get("planned") is True]
    facts = CrashFacts(crashes, inflight_max, interruptions, events=list(events or []),
                       amounts=dict(amounts or {}), accounts=dict(accounts or {}), run_dir=run_dir,
                       positions=dict(positions or {}), aborts=[a for a in aborts or [] if a not in planned],
                       planned_aborts=planned, loosened=loosened and exp.stores.output, params=params,
                       reused=dict(reused or {}), frozen=_frozen(overlaps or []), twins=_twins(overlaps or []),
                       stopped=stopped)
    p = Prediction(exact=facts.exact)
    for pr in exp.predictors:
        pr.add(p, facts, exp)
    p.inconsistent = check_declared_damage(exp, facts.described)
    if not facts.exact:
        why = []
        if facts.undescribed:
            why.append(f"{facts.undescribed} crash(es) or freeze(s) struck at instants the worker did not choose, "
                       f"so what was in flight is unknown")
        if facts.loosened or facts.aborts:
            stuck = sum(1 for a in facts.aborts if a.get("event") == "txn_stuck" and a.get("outcome") != "aborted")
            why.append(("broker faults can abort transactions no crash caused" if facts.loosened else
                        "transactions ended that no crash caused") + f" ({len(facts.aborts)} abort(s) seen "
                       f"by the workers, each counted with the records it held"
                       + (f"; {stuck} of them a transactional call that never returned, its transaction committed "
                          f"or aborted, unknown" if stuck else "") + ")")
        general = "; ".join(why) + ": the affected numbers are upper bounds; the audit itself is exact"
        # A predictor's own note (what it could not call) stays; what the broker faults loosened is added to it.
        if not p.note:
            p.note = general
        elif facts.loosened or facts.aborts:
            p.note += "; " + general
    return p
