"""The checker's answer for one run: predict from the crash log, judge against the audit, one `Outcome`.

A run goes through one pipeline: run (the supervisor and the faults) -> observe
(checker/observe.py) -> predict (checker/predict.py) -> judge
(checker/verdict.py) -> an Outcome -> render (reporting/build.py). `decide` is
the step between the audit and the report: it reads what the run left behind
(the crash log, the workers' events, what each fault says it did) and what the
audit measured, predicts, judges, and hands back the lot. The report builder
shows an Outcome; it neither predicts nor judges.

The run's pieces come in as plain values and duck-typed objects (the
experiment, the supervisor's result, the faults), so the checker imports
nothing from the runner, the experiments or the faults.
"""

from __future__ import annotations

from dataclasses import dataclass

from .predict import Expectation, Prediction, predict
from .verdict import Verdict, judge

# Worker events for work undone behind the crash records' back: aborted transactions, transactions whose
# call never returned (committed or aborted: unknown), and offsets a rebalance took away before they were
# committed (their records come again).
ABORT_EVENTS = ("txn_aborted", "fenced", "txn_stuck", "commit_lost")
# A run that did not finish is reported as such, whatever its numbers say.
UNFINISHED = ("incomplete", "interrupted")


@dataclass(frozen=True)
class Outcome:
    stories: dict            # fault name -> what the fault says it did (Fault.story): judged here, shown in the report
    prediction: Prediction   # what the crash log says the audit must find
    observed: dict           # metric -> value: the audit's metrics and the faults' own observations
    judgement: Verdict       # the prediction against the observed: failures and the ids that differ
    verdict: str             # the run's verdict: the judgement's, or "incomplete"/"interrupted" when it did not finish
    anomalies: dict | None = None   # class name -> anomalies.Found (allowed or not), None when no history was kept


def decide(exp, params, crashes: list[dict], result, faults: list, audit, *, amounts: dict,
           positions: dict, accounts: dict | None, run_dir, reused: dict | None = None,
           overlaps: list | None = None) -> Outcome:
    """The Outcome of a finished run. `result` is the supervisor's (status, events, unplanned deaths,
    workers the stop killed); `faults` the run's faults, asked for their stories, the workers they
    stopped without a crash record, whether they can abort transactions unseen, and what they observed;
    `audit` the audit's result (metrics and evidence). `amounts`, `positions`, `accounts` and `run_dir`
    are for predictors that need more than the crash log; `reused` the requests produced again under a
    used key (workload/reused_payments.py); `overlaps` the overlap log's records (runtime/overlaps.py)."""
    stories = {f.name: f.story(result.events) for f in faults}
    # The most records one worker holds unacknowledged: its commit_every, or every payment on a timer.
    inflight_max = params.messages if params.commit_interval_ms else params.commit_every
    interruptions = (sum(f.interruptions(stories[f.name]) for f in faults) + len(result.unplanned_deaths)
                     + result.killed_at_end)
    prediction = predict(exp, crashes, inflight_max, interruptions=interruptions, events=result.events,
                         amounts=amounts, accounts=accounts, run_dir=run_dir, positions=positions,
                         aborts=[e for e in result.events if e.get("event") in ABORT_EVENTS],
                         loosened=any(f.bounds_aborts(stories[f.name]) for f in faults), params=params,
                         reused=reused, overlaps=overlaps, stopped=result.status in UNFINISHED)
    observed = dict(audit.metrics)
    for f in faults:
        observed.update(f.observed(stories[f.name]))
    anomalies = getattr(audit, "anomalies", None)
    if anomalies:
        forbid_anomalies(prediction, observed, audit.evidence, anomalies)
    judgement = judge(prediction, observed, audit.evidence)
    verdict = result.status if result.status in UNFINISHED else judgement.verdict
    return Outcome(stories, prediction, observed, judgement, verdict, anomalies)


def forbid_anomalies(prediction: Prediction, observed: dict, evidence, anomalies: dict) -> None:
    """Each anomaly class the experiment does not allow must not occur: an expectation of 0, judged like
    the others (a class that could not be checked is "not measured"). `duplicate` is allowed exactly when
    the prediction lets read_committed readers see duplicates."""
    dup = prediction.get("kafka.read_committed.duplicates")
    if "duplicate" in anomalies:
        anomalies["duplicate"].allowed = not (dup is not None and dup.op == "==" and dup.value == 0)
    for name, found in anomalies.items():
        if found.allowed:
            continue
        metric = f"anomaly.{name}"
        prediction.expectations.append(Expectation(metric, 0))
        observed[metric] = found.count
        evidence.ids[metric] = found.named()
