"""The checker's Outcome on hand-made runs: the prediction, what was observed, the judgement, the final verdict."""

from types import SimpleNamespace

from harness.checker.run_outcome import decide
from harness.checker.verdict import Evidence
from harness.experiments import get
from harness.run.params import RunParams


class Fault:
    """A stand-in fault: a story, an observation, and `stopped` workers it froze without a crash record."""
    name = "stand-in"

    def __init__(self, stopped=0):
        self.stopped = stopped

    def story(self, events):
        return {"events": len(events)}

    def interruptions(self, story):
        return self.stopped

    def bounds_aborts(self, story):
        return False

    def observed(self, story):
        return {"fault.stand-in.events": story["events"]}


def outcome(status="complete", stopped=0):
    p = RunParams("offset-after", messages=5)
    exp = get("offset-after").resolve(p)
    crashes = [{"point": "after-effect-before-commit", "message_id": "b", "time": 1.0, "worker": "w0",
                "attempt": 1, "unacked": ["b"]}]
    result = SimpleNamespace(status=status, events=[{"event": "done", "worker": "w0", "t": 2.0}],
                             unplanned_deaths=[], killed_at_end=0)
    audit = SimpleNamespace(metrics={"ledger.duplicates": 1, "ledger.lost": 0},
                            evidence=Evidence(ledger_per_id={"b": 2}, ledger_lost_ids=[]))
    return decide(exp, p, crashes, result, [Fault(stopped)], audit, amounts={}, positions={}, accounts={},
                  run_dir=None)


def test_a_finished_run_is_predicted_observed_and_judged_in_one_outcome():
    o = outcome()
    assert o.prediction.exact and o.prediction.value("ledger.duplicates") == 1
    assert o.observed == {"ledger.duplicates": 1, "ledger.lost": 0, "fault.stand-in.events": 1}
    assert o.stories == {"stand-in": {"events": 1}}
    assert o.judgement.verdict == o.verdict == "as-predicted"


def test_an_unfinished_run_says_so_whatever_its_numbers_say():
    for status in ("incomplete", "interrupted"):
        o = outcome(status)
        assert o.judgement.verdict == "as-predicted" and o.verdict == status


def test_a_worker_a_fault_stopped_without_a_crash_record_turns_the_prediction_into_bounds():
    o = outcome(stopped=1)
    assert not o.prediction.exact and o.prediction.get("ledger.duplicates").op == "<="


def test_a_transaction_whose_call_never_returned_makes_what_it_held_a_bound():
    p = RunParams("eos", messages=5)
    exp = get("eos").resolve(p)
    stuck = {"event": "txn_stuck", "worker": "w0", "attempt": 1, "t": 1.5, "call": "commit_transaction",
             "seconds": 60.0, "produced": ["a", "b"], "unacked": []}
    result = SimpleNamespace(status="complete", events=[stuck, {"event": "done", "worker": "w0", "t": 2.0}],
                             unplanned_deaths=[], killed_at_end=0)
    audit = SimpleNamespace(metrics={"kafka.read_committed.duplicates": 0, "kafka.read_committed.lost": 0,
                                     "kafka.read_uncommitted.duplicates": 2, "kafka.read_uncommitted.lost": 0},
                            evidence=Evidence())
    o = decide(exp, p, [], result, [], audit, amounts={}, positions={}, accounts={}, run_dir=None)
    pred = o.prediction
    # committed or aborted, nobody can say: the aborted copies are 0 or 2, read_committed stays exact
    assert not pred.exact and pred.get("kafka.read_uncommitted.duplicates").text() == "kafka.read_uncommitted.duplicates <= 2"
    assert pred.get("kafka.read_committed.duplicates").op == "=="
    assert "1 of them a transactional call that never returned" in pred.note
    assert o.verdict == "as-predicted"
