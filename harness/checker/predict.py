"""Predict a run's anomalies from its crash log, then judge the observation.

The crash log says, for every crash, what the worker had done but not
acknowledged (`unacked`). Each mode turns that into a prediction:

- offset-before: every unacked id is lost (committed, never charged), no duplicates.
- offset-after / eos-boundary: every unacked id is charged once more (a duplicate).
- dedupe / eos-dedupe: no loss, no duplicate; every unacked id is one dedupe hit.
- eos family: read_committed output exact; read_uncommitted holds one aborted
  copy per unacked id (the worker flushes before it dies).

With `--kill-mode random` the supervisor kills at arbitrary instants and the
worker cannot say what it had in flight: predictions become upper bounds
(kills x commit_every) and the audit is still exact. The verdict is
`as-predicted` when every expectation holds, `unexpected` otherwise, with the
ids that differ.
"""

from collections import Counter
from dataclasses import dataclass, field

LEDGER_MODES = {"offset-before", "offset-after", "dedupe", "eos-boundary", "eos-dedupe", "eos-streams-pg"}
KAFKA_MODES = {"eos", "eos-boundary", "eos-dedupe", "eos-streams", "eos-streams-pg"}
DEDUPE_MODES = {"dedupe", "eos-dedupe"}
LOSING_MODES = {"offset-before"}
DUPLICATING_MODES = {"offset-after", "eos-boundary", "eos-streams-pg"}


@dataclass
class Expectation:
    metric: str          # e.g. "ledger.duplicates", "kafka.read_uncommitted.duplicates"
    value: int
    op: str = "=="       # "==" exact, "<=" bound

    def holds(self, observed: int | None) -> bool:
        if observed is None:
            return False
        return observed == self.value if self.op == "==" else observed <= self.value

    def text(self) -> str:
        return f"{self.metric} {self.op} {self.value}"


@dataclass
class Prediction:
    exact: bool
    expectations: list = field(default_factory=list)
    lost_ids: set = field(default_factory=set)            # exact mode only
    duplicate_counts: Counter = field(default_factory=Counter)
    note: str = ""

    def get(self, metric: str) -> Expectation | None:
        return next((e for e in self.expectations if e.metric == metric), None)

    def value(self, metric: str) -> int | None:
        """The predicted number for `metric`, or None when this mode predicts nothing about it."""
        e = self.get(metric)
        return e.value if e else None


def predict(mode: str, crashes: list[dict], kill_mode: str = "points", commit_every: int = 1) -> Prediction:
    unacked = [i for c in crashes for i in (c.get("unacked") or []) if isinstance(i, str)]
    redelivered = len(unacked)
    exact = kill_mode == "points"
    bound = redelivered if exact else max(redelivered, len(crashes) * max(1, commit_every))
    op = "==" if exact else "<="
    p = Prediction(exact=exact)
    if mode in LEDGER_MODES:
        if mode in LOSING_MODES:
            p.expectations += [Expectation("ledger.lost", len(set(unacked)) if exact else bound, op),
                               Expectation("ledger.duplicates", 0)]
            p.lost_ids = set(unacked)
        elif mode in DUPLICATING_MODES:
            p.expectations += [Expectation("ledger.duplicates", bound, op), Expectation("ledger.lost", 0)]
            p.duplicate_counts = Counter(unacked)
        else:
            p.expectations += [Expectation("ledger.duplicates", 0), Expectation("ledger.lost", 0)]
        if mode in DEDUPE_MODES:
            p.expectations.append(Expectation("ledger.dedupe_hits", bound, op))
    if mode in KAFKA_MODES:
        p.expectations += [Expectation("kafka.read_committed.duplicates", 0),
                           Expectation("kafka.read_committed.lost", 0),
                           Expectation("kafka.read_uncommitted.duplicates", bound, op),
                           Expectation("kafka.read_uncommitted.lost", 0)]
    if mode == "zombie":
        # No planned crash: the expectations are an exact output and a fenced zombie.
        p.expectations = [Expectation("kafka.read_committed.duplicates", 0), Expectation("kafka.read_committed.lost", 0),
                          Expectation("zombie.fenced", 1)]
    if not exact:
        p.note = ("prediction is a bound: the crash instants were not chosen by the worker, "
                  "so what was in flight is unknown; the audit itself is exact")
    return p


@dataclass
class Verdict:
    verdict: str                                # "as-predicted" | "unexpected"
    failed: list = field(default_factory=list)  # "ledger.lost: predicted == 3, observed 4"
    differing_ids: dict = field(default_factory=dict)


def judge(p: Prediction, observed: dict, ledger_per_id: dict | None = None, ledger_lost_ids: list | None = None) -> Verdict:
    """`observed` maps metric names to numbers; per-id data refines exact ledger predictions."""
    v = Verdict("as-predicted")
    for e in p.expectations:
        got = observed.get(e.metric)
        if not e.holds(got):
            v.failed.append(f"{e.metric}: predicted {e.op} {e.value}, observed {got}")
    if p.exact and ledger_lost_ids is not None and p.lost_ids:
        missing = sorted(set(ledger_lost_ids) ^ p.lost_ids)
        if missing:
            v.differing_ids["lost"] = missing[:20]
    if p.exact and ledger_per_id is not None and p.duplicate_counts:
        got = Counter({i: n - 1 for i, n in ledger_per_id.items() if n > 1})
        diff = sorted(i for i in set(got) | set(p.duplicate_counts) if got[i] != p.duplicate_counts[i])
        if diff:
            v.differing_ids["duplicates"] = diff[:20]
    if v.failed or v.differing_ids:
        v.verdict = "unexpected"
    return v
