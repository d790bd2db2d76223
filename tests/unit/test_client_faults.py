"""The abort and client-pause faults: their plans, the worker's side (a real SIGSTOP of a real process),
the supervisor's SIGCONT, and what planned aborts do to the predictions, on hand-made data."""

import json
import os
import signal
import subprocess
import sys
import time
from types import SimpleNamespace

import pytest

from harness.checker.predict import predict
from harness.core.errors import HarnessError
from harness.experiments import get
from harness.faults import build
from harness.faults.client import Abort, ClientPause
from harness.core.procs import stopped as _stopped
from harness.run.params import RunParams
from harness.runtime.client_faults import BEFORE_COMMIT, MID_PRODUCE, PLANNED_ABORT, ClientFaults, paused_ids
from harness.runtime.crashplan import CrashPlan, seeded_pauses
from harness.runtime.evidence import Events

IDS = [f"pay-{i:06d}" for i in range(200)]


def ex(p) -> dict:
    return {e.metric: (e.op, e.value) for e in p.expectations}


# -- the plans ------------------------------------------------------------------------------------

def test_pauses_are_seeded_counted_and_between_half_and_one_and_a_half_times_the_mean():
    a, b = seeded_pauses(IDS, 5, 2.0, seed=7), seeded_pauses(IDS, 5, 2.0, seed=7)
    assert a == b and len(a) == 5 and all(1.0 <= s <= 3.0 for _i, s in a)
    assert seeded_pauses(IDS, 5, 2.0, seed=8) != a
    assert len(seeded_pauses(IDS[:3], 10, 1.0, seed=1)) == 3


def test_each_fault_amends_its_part_of_the_plan_file_in_any_order(tmp_path):
    from harness.faults.planned import PlannedCrash
    path = tmp_path / "crash-plan.json"
    run = SimpleNamespace(crash_plan=path, sent_ids=IDS, exp=get("eos"), params=RunParams("eos", seed=3))
    CrashPlan.make(IDS, 0.0, 3).save(path)
    ClientPause("after-send-offsets", 1.0, 4).setup(run)
    Abort(0.3).setup(run)
    PlannedCrash(0.1).setup(run)
    plan = CrashPlan.load(path)
    assert len(plan.crash_ids) == 20 and plan.abort_rate == 0.3
    assert plan.pause_at == "after-send-offsets" and len(plan.pauses) == 4
    assert plan.pauses == seeded_pauses(IDS, 4, 1.0, 3)
    # the other order gives the same plan
    CrashPlan.make(IDS, 0.0, 3).save(path)
    PlannedCrash(0.1).setup(run)
    Abort(0.3).setup(run)
    ClientPause("after-send-offsets", 1.0, 4).setup(run)
    assert CrashPlan.load(path) == plan
    # an old plan file (before the client faults) still loads, with none planned
    path.write_text(json.dumps({"seed": 1, "crash_rate": 0.0, "crash_ids": []}))
    old = CrashPlan.load(path)
    assert old.abort_rate == 0.0 and old.pauses == () and old.pause_at is None


def test_the_faults_refuse_bad_options_and_experiments_whose_loop_does_not_carry_them_out():
    def faults(name, *specs):
        p = RunParams(name, faults=list(specs))
        return build(p, get(name))
    assert [f.name for f in faults("eos", "planned-crash", "client-pause", "abort")] == \
        ["planned-crash", "client-pause", "abort"]
    for name in ("offset-after", "dedupe", "eos-streams"):
        with pytest.raises(HarnessError, match="carries out the abort fault"):
            faults(name, "abort")
    with pytest.raises(HarnessError, match="cannot run with zombie"):
        faults("zombie", "zombie", "client-pause")
    for spec, says in (("abort:rate=1", "between 0 and 0.9"), ("client-pause:at=mid-commit", "at must be one of"),
                       ("client-pause:count=0", "count must be"), ("client-pause:seconds=-1", "seconds must be"),
                       ("client-pause:when=now", "unknown option")):
        with pytest.raises(HarnessError, match=says):
            faults("eos", spec)


# -- the worker's side ----------------------------------------------------------------------------

def plan(**kw):
    return CrashPlan(seed=5, crash_rate=0.0, **kw)


def test_planned_aborts_are_a_seeded_draw_per_worker_attempt(tmp_path):
    ev = Events(tmp_path / "events.jsonl", "w0", 1)
    a = ClientFaults(plan(abort_rate=0.3), ev, "w0", 1)
    b = ClientFaults(plan(abort_rate=0.3), ev, "w0", 1)
    seq = [a.abort_due() for _ in range(400)]
    assert seq == [b.abort_due() for _ in range(400)]
    assert 60 < sum(seq) < 180                    # about 0.3 of 400 (a fixed seed: the same every time)
    c = ClientFaults(plan(abort_rate=0.3), ev, "w0", 2)
    assert [c.abort_due() for _ in range(400)] != seq
    assert not any(ClientFaults(plan(), ev, "w0", 1).abort_due() for _ in range(100))


PAUSER = """
import sys
from harness.runtime.client_faults import ClientFaults
from harness.runtime.crashplan import CrashPlan
from harness.runtime.evidence import Events
from pathlib import Path
plan = CrashPlan(seed=1, crash_rate=0.0, pause_at=sys.argv[2], pauses=(("b", 0.5),))
f = ClientFaults(plan, Events(Path(sys.argv[1]), "w0", int(sys.argv[3])), "w0", int(sys.argv[3]))
flushed = []
f.pause("after-send-offsets", ["a", "b"], lambda: flushed.append(1) or 0, produced=lambda: ["a", "b"], unacked=[])
f.pause("after-send-offsets", ["a", "b"], lambda: 0, produced=["a", "b"])      # taken: no second pause
print("flushed", len(flushed), "taken", sorted(f.taken), flush=True)
"""


def events_of(path):
    return [json.loads(x) for x in path.read_text().splitlines()] if path.exists() else []


def wait_for(cond, seconds=20):
    end = time.time() + seconds
    while time.time() < end:
        if cond():
            return True
        time.sleep(0.01)
    return False


def test_a_worker_pauses_itself_at_the_planned_step_once_after_flushing_and_says_what_it_held(tmp_path):
    events = tmp_path / "events.jsonl"
    child = subprocess.Popen([sys.executable, "-c", PAUSER, str(events), "after-send-offsets", "1"],
                             stdout=subprocess.PIPE, text=True)
    try:
        assert wait_for(lambda: _stopped(child.pid)), "the worker never stopped itself"
        paused = [e for e in events_of(events) if e["event"] == "client_paused"]
        assert len(paused) == 1 and paused[0]["message_id"] == "b" and paused[0]["seconds"] == 0.5
        assert paused[0]["produced"] == ["a", "b"] and paused[0]["unacked"] == [] and paused[0]["pid"] == child.pid
        assert paused[0]["undelivered"] == 0
        os.kill(child.pid, signal.SIGCONT)
        out, _ = child.communicate(timeout=30)
    finally:
        if child.poll() is None:
            child.kill()
    assert child.returncode == 0 and out.split() == ["flushed", "1", "taken", "['b']"]
    assert [e["event"] for e in events_of(events)] == ["client_paused", "client_resumed"]
    # its successor reads the pause it took: the same payment never freezes a worker twice
    assert paused_ids(events) == {"b"}
    again = subprocess.run([sys.executable, "-c", PAUSER, str(events), "after-send-offsets", "2"],
                           capture_output=True, text=True, timeout=60)
    assert again.returncode == 0 and "flushed 0" in again.stdout


def test_a_worker_does_not_pause_at_another_step_or_without_a_planned_payment(tmp_path):
    ev = Events(tmp_path / "events.jsonl", "w0", 1)
    f = ClientFaults(plan(pause_at=BEFORE_COMMIT, pauses=(("b", 1.0),)), ev, "w0", 1)
    f.pause(MID_PRODUCE, ["b"], lambda: pytest.fail("flushed at the wrong step"))
    f.pause(BEFORE_COMMIT, ["a", "c"], lambda: pytest.fail("flushed without a planned payment"))
    f.pause(MID_PRODUCE, lambda: pytest.fail("ids asked for at the wrong step"), lambda: 0)
    assert not (tmp_path / "events.jsonl").exists()


# -- the supervisor's side ------------------------------------------------------------------------

def sup_with(proc, events):
    return SimpleNamespace(result=SimpleNamespace(events=events), slots=[SimpleNamespace(proc=proc)])


def test_the_fault_wakes_a_paused_worker_once_its_seconds_are_over_and_only_once_it_has_stopped(tmp_path):
    go = tmp_path / "go"
    child = subprocess.Popen([sys.executable, "-c", "import os, signal, sys, time\nwhile not os.path.exists(sys.argv[1]):"
                              " time.sleep(0.01)\nos.kill(os.getpid(), signal.SIGSTOP)", str(go)])
    try:
        t = time.time()
        events = [{"event": "client_paused", "worker": "w0", "attempt": 1, "pid": child.pid, "t": t, "seconds": 0.0,
                   "step": "before-commit", "message_id": "b", "produced": ["a", "b"]}]
        fault, sup = ClientPause(), sup_with(child, events)
        fault.tick(sup)
        assert fault.busy() and fault.pauses[0]["resumed_at"] is None    # not stopped yet: no SIGCONT sent early
        go.write_text("")
        assert wait_for(lambda: (fault.tick(sup), not fault.busy())[1])
        assert child.wait(timeout=30) == 0
        (p,) = fault.story(events)["pauses"]
        assert p["paused_seconds"] is not None and p["records_held"] == 2 and p["next_abort"] is None
        assert fault.entries([], events)[0]["target"] == "w0 attempt 1"
    finally:
        if child.poll() is None:
            child.kill()


def test_the_fault_never_signals_a_pid_that_is_not_one_of_its_workers():
    stranger = subprocess.Popen([sys.executable, "-c", "import os, signal; os.kill(os.getpid(), signal.SIGSTOP)"])
    own = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        assert wait_for(lambda: _stopped(stranger.pid))
        forged = [{"event": "client_paused", "worker": "w0", "attempt": 1, "pid": stranger.pid, "t": 0, "seconds": 0}]
        fault = ClientPause()
        fault.tick(sup_with(own, forged))
        fault.finish(sup_with(own, forged))
        time.sleep(0.2)
        assert _stopped(stranger.pid) and not fault.busy()
    finally:
        for p in (stranger, own):
            p.kill()
            p.wait()


def test_the_story_names_the_first_abort_or_fencing_a_woken_worker_met():
    fault = ClientPause()
    e = {"event": "client_paused", "worker": "w0", "attempt": 1, "pid": 1, "t": 10.0, "seconds": 5.0,
         "step": "before-commit", "message_id": "b", "produced": ["a"]}
    fault.pauses = [{"event": e, "resumed_at": 15.0}]
    later = [{"event": "txn_aborted", "worker": "w0", "attempt": 1, "t": 16.0, "reason": PLANNED_ABORT},
             {"event": "fenced", "worker": "w0", "attempt": 1, "t": 17.0, "reason": "INVALID_PRODUCER_EPOCH"},
             {"event": "txn_aborted", "worker": "w1", "attempt": 1, "t": 15.5, "reason": "other worker"}]
    (p,) = fault.story([e] + later)["pauses"]
    assert p["paused_seconds"] == 5.0 and p["next_abort"]["event"] == "fenced"
    assert "1 of those worker attempts" in fault.sentence(fault.story([e] + later))


# -- the predictions ------------------------------------------------------------------------------

def test_planned_aborts_count_exactly_like_crash_records_and_other_aborts_still_make_bounds():
    planned = {"event": "txn_aborted", "reason": PLANNED_ABORT, "planned": True, "produced": ["a", "b"],
               "unacked": ["a", "b"]}
    p = predict(get("eos"), [], aborts=[planned])
    assert p.exact and ex(p)["kafka.read_uncommitted.duplicates"] == ("==", 2)
    assert p.aborted_counts == {"a": 1, "b": 1}
    b = predict(get("eos-boundary"), [], aborts=[planned])
    assert b.exact and ex(b)["ledger.duplicates"] == ("==", 2)
    d = predict(get("eos-dedupe"), [], aborts=[planned])
    assert d.exact and ex(d)["ledger.dedupe_hits"] == ("==", 2) and ex(d)["ledger.duplicates"] == ("==", 0)
    unflushed = dict(planned, planned=False)
    q = predict(get("eos"), [], aborts=[unflushed])
    assert not q.exact and ex(q)["kafka.read_uncommitted.duplicates"] == ("<=", 2)
    r = predict(get("eos"), [], aborts=[planned, {"event": "fenced", "produced": ["c"]}])
    assert not r.exact and ex(r)["kafka.read_uncommitted.duplicates"] == ("<=", 3)


def test_a_pause_as_long_as_the_transaction_timeout_makes_the_numbers_it_touches_bounds():
    fault = ClientPause(seconds=3.0, txn_timeout_s=2.0)
    story = {"pauses": [{"paused_seconds": 1.5}]}
    assert not fault.bounds_aborts(story)
    assert fault.bounds_aborts({"pauses": [{"paused_seconds": 1.5}, {"paused_seconds": 2.4}]})
    assert fault.bounds_aborts({"pauses": [{"paused_seconds": None}]})       # never woken: unknown
    assert not fault.bounds_aborts({"pauses": []}) and not fault.bounds_aborts(None)
    # the run's own timeout is the one compared
    p = RunParams("eos", faults=["client-pause"], transaction_timeout_ms=5000)
    (built,) = build(p, get("eos"))
    assert built.txn_timeout_s == 5.0


def test_planned_aborts_are_one_report_entry_per_worker_attempt():
    ev = [{"event": "txn_aborted", "reason": PLANNED_ABORT, "planned": True, "worker": "w0", "attempt": 1, "t": t,
           "produced": ["a", "b"]} for t in (1.0, 2.0, 3.0)]
    ev += [{"event": "txn_aborted", "reason": PLANNED_ABORT, "planned": False, "worker": "w1", "attempt": 2, "t": 4.0,
            "produced": ["c"]},
           {"event": "txn_aborted", "reason": "broker said so", "worker": "w1", "attempt": 2, "t": 5.0, "produced": ["d"]}]
    assert Abort(0.2).entries([], ev) == [
        {"fault": "abort", "time": 1.0, "target": "w0 attempt 1", "aborted_transactions": 3, "records": 6, "exact": True},
        {"fault": "abort", "time": 4.0, "target": "w1 attempt 2", "aborted_transactions": 1, "records": 1,
         "exact": False}]


def test_output_values_name_their_transaction_first_so_a_large_payload_keeps_its_tag():
    from harness.checker.kafka_output import tagged
    from harness.experiments.eos.eos_loops import output_value
    ctx = SimpleNamespace(worker="w1", attempt=3, history=SimpleNamespace(txn_no=9))
    value = json.dumps({"id": "pay-000001", "amount": 100, "memo": "x" * 20_000, "worker": "forged"}).encode()
    msg = SimpleNamespace(value=lambda: value, key=lambda: b"pay-000001")
    out = output_value(ctx, msg)
    assert out.startswith(b'{"worker": "w1", "attempt": 3, "txn": 9')
    assert json.loads(out)["amount"] == 100 and json.loads(out)["worker"] == "w1"
    assert tagged([("pay-000001", out, 0, 5)]) == {(0, 5): ("w1/3", 9)}
    odd = SimpleNamespace(value=lambda: b"[1, 2]", key=lambda: b"pay-000002")     # not an object: the id alone
    assert json.loads(output_value(ctx, odd))["id"] == "pay-000002"
