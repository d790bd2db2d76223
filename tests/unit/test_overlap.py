"""The overlap fault on hand-made logs and on real processes: the plan, the finished episodes, the
predictions with and without a unique key, a worker that really freezes itself and leaves once resumed,
and the fault's story driven by a real stopped process."""

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from types import SimpleNamespace

from harness.checker.predict import predict
from harness.experiments import get
from harness.faults.overlap import Overlap
from harness.runtime import overlaps
from harness.runtime.crashplan import CrashPlan, seeded_overlaps

IDS = [f"pay-{i:06d}" for i in range(1, 201)]


def expectations(p):
    return {e.metric: (e.op, e.value) for e in p.expectations}


def crash(msg, unacked=()):
    return {"point": "after-insert-before-commit", "message_id": msg, "unacked": list(unacked), "acked_unapplied": [],
            "produced": [], "time": 1.0, "worker": "w0", "attempt": 1}


def episode(msg, attempt, unacked=(), left=True, left_by=None):
    out = [{"kind": "frozen", "message_id": msg, "worker": "w0", "attempt": attempt, "unacked": list(unacked),
            "time": 1.0},
           {"kind": "applied", "message_id": msg, "worker": "w0", "attempt": attempt + 1, "time": 2.0}]
    if left:
        out.append({"kind": "left", "message_id": msg, "worker": "w0", "attempt": left_by or attempt, "time": 3.0})
    return out


def test_the_plan_draws_count_ids_apart_from_the_crash_plans():
    crashes = CrashPlan.make(IDS, 0.1, 25).crash_ids
    ids = seeded_overlaps(IDS, 10, 25, crashes)
    assert len(ids) == 10 == len(set(ids)) and not set(ids) & crashes and list(ids) == sorted(ids)
    assert seeded_overlaps(IDS, 10, 25, crashes) == ids != seeded_overlaps(IDS, 10, 26, crashes)
    assert len(seeded_overlaps(IDS[:5], 10, 25, frozenset(IDS[:3]))) == 2      # no more than are free


def test_the_plan_file_keeps_the_overlap_part_beside_the_others(tmp_path):
    CrashPlan.make(IDS, 0.1, 25).save(tmp_path / "plan.json")
    CrashPlan.amend(tmp_path / "plan.json", overlap_at="a", overlap_applied="b", overlaps=("pay-000002",))
    plan = CrashPlan.load(tmp_path / "plan.json")
    assert (plan.overlap_at, plan.overlap_applied, plan.overlaps) == ("a", "b", ("pay-000002",))
    assert len(plan.crash_ids) == 20


def test_an_episode_is_finished_only_when_the_frozen_worker_itself_left():
    log = episode("a", 1) + episode("b", 3, left=False) + episode("c", 5, left_by=6)
    assert [r["message_id"] for r in overlaps.finished(log)] == ["a"]
    assert overlaps.episodes(log)["b"].keys() == {"frozen", "applied"}


def test_two_workers_frozen_on_one_payment_are_two_episodes_and_two_more_writes():
    """A rebalancing group can hand one payment to two members at once: both may freeze on it."""
    log = episode("a", 1) + [{**r, "worker": "w1"} for r in episode("a", 1) if r["kind"] != "applied"]
    assert len(overlaps.finished(log)) == 2
    p = predict(get("key-check-then-insert"), [], overlaps=log)
    assert expectations(p)["ledger.duplicates"] == ("==", 2) and p.duplicate_counts == {"a": 2}


def test_without_a_unique_key_each_finished_episode_is_one_duplicate():
    p = predict(get("key-check-then-insert"), [crash("x", ["x"]), crash("y", ["y"])],
                overlaps=episode("a", 2, unacked=["q"]) + episode("b", 4))
    assert expectations(p) == {"ledger.duplicates": ("==", 2), "ledger.dedupe_hits": ("==", 3),
                               "ledger.lost": ("==", 0)}
    assert p.duplicate_counts == {"a": 1, "b": 1} and p.hit_counts == {"x": 1, "y": 1, "q": 1}
    assert p.exact and not p.inconsistent


def test_with_a_unique_key_the_same_episodes_are_dedupe_hits():
    p = predict(get("dedupe"), [crash("x", ["x"])], overlaps=episode("a", 2) + episode("b", 4))
    assert expectations(p)["ledger.duplicates"] == ("==", 0)
    assert expectations(p)["ledger.dedupe_hits"] == ("==", 3) and p.hit_counts == {"x": 1, "a": 1, "b": 1}


def test_a_resumed_worker_killed_before_it_left_makes_its_duplicate_a_bound():
    p = predict(get("key-check-then-insert"), [], interruptions=1,
                overlaps=episode("a", 2) + episode("b", 4, left=False))
    assert expectations(p)["ledger.duplicates"] == ("<=", 2) and not p.exact


def test_no_overlap_no_duplicate_the_check_works_one_delivery_at_a_time():
    p = predict(get("key-check-then-insert"), [crash("x", ["x"])])
    assert expectations(p)["ledger.duplicates"] == ("==", 0) and expectations(p)["ledger.dedupe_hits"] == ("==", 1)


def test_the_fault_needs_a_point_between_check_and_write():
    assert Overlap().unmet(get("key-check-then-insert")) is None and Overlap().unmet(get("dedupe")) is None
    assert "overlap_point" in Overlap().unmet(get("offset-after"))
    assert Overlap().unmet(get("key-reuse"))                   # its dedupe loop declares no such point


WORKER = textwrap.dedent("""
    import sys
    from pathlib import Path
    from harness.runtime.crashplan import CrashPlan
    from harness.runtime.evidence import KillSwitch

    class Msg:
        def __init__(self, k, o): self.k, self.o = k, o
        def key(self): return self.k.encode()
        def partition(self): return 0
        def offset(self): return self.o

    run, attempt = Path(sys.argv[1]), int(sys.argv[2])
    kill = KillSwitch(CrashPlan.load(run / "plan.json"), run / "crash-log.jsonl", "w0", attempt, "x")
    for i, k in enumerate(["pay-000001", "pay-000002", "pay-000003"]):
        kill.at("after-check", Msg(k, i), unacked=[])
        kill.at("after-write", Msg(k, i))
        print("handled", k, flush=True)
""")


def _stopped(pid: int) -> bool:
    with open(f"/proc/{pid}/stat", "rb") as f:
        return f.read().rsplit(b")", 1)[1].split()[0] in (b"T", b"t")


def _worker(tmp_path, attempt: int) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", WORKER, str(tmp_path), str(attempt)], stdout=subprocess.PIPE,
                            text=True, cwd=os.getcwd())


def _wait(cond, timeout=20.0):
    deadline = time.time() + timeout
    while not cond():
        assert time.time() < deadline, "timed out"
        time.sleep(0.02)


def test_a_real_worker_freezes_after_its_check_and_leaves_at_its_next_gap_once_resumed(tmp_path):
    CrashPlan(seed=1, crash_rate=0.0, overlap_at="after-check", overlap_applied="after-write",
              overlaps=("pay-000002",)).save(tmp_path / "plan.json")
    log = tmp_path / overlaps.FILE_NAME
    first, second = _worker(tmp_path, 1), None
    try:
        _wait(lambda: _stopped(first.pid))
        assert [r["kind"] for r in overlaps.read(log)] == ["frozen"]
        # The replacement handles everything, the frozen payment included, and says when its write is done;
        # it does not freeze again on a payment already frozen on.
        second = _worker(tmp_path, 2)
        assert second.communicate(timeout=30)[0].split("\n")[:3] == ["handled pay-000001", "handled pay-000002",
                                                                    "handled pay-000003"]
        assert [r["kind"] for r in overlaps.read(log)] == ["frozen", "applied"]
        first.send_signal(signal.SIGCONT)
        out, _ = first.communicate(timeout=30)
        assert first.returncode == 0 and out == "handled pay-000001\n"     # it left before handling more
        recs = overlaps.read(log)
        assert [(r["kind"], r["attempt"]) for r in recs] == [("frozen", 1), ("applied", 2), ("left", 1)]
        assert recs[2]["point"] == "after-write" and [r["message_id"] for r in overlaps.finished(recs)] == ["pay-000002"]
    finally:
        for p in (first, second):
            if p is not None and p.poll() is None:
                p.kill()


def _stopped_child():
    return subprocess.Popen([sys.executable, "-c", "import os, signal; os.kill(os.getpid(), signal.SIGSTOP)"])


def _fault(log):
    fault = Overlap(count=1)
    fault.log, fault.planned = log, 1
    return fault


def test_two_frozen_processes_on_one_payment_are_each_replaced_and_resumed(tmp_path):
    log, fault = tmp_path / overlaps.FILE_NAME, _fault(tmp_path / overlaps.FILE_NAME)
    a, b = _stopped_child(), _stopped_child()
    try:
        sup = FakeSupervisor(a)
        sup.slots.append(SimpleNamespace(name="w1", attempt=1, proc=b))
        for w in ("w0", "w1"):
            overlaps.append(log, "frozen", message_id="pay-000007", worker=w, attempt=1, unacked=[])
        _wait(lambda: _stopped(a.pid) and _stopped(b.pid))
        fault.tick(sup)
        assert sup.adopted == [a, b]
        overlaps.append(log, "applied", message_id="pay-000007", worker="w0", attempt=2)
        fault.tick(sup)
        a.wait(timeout=10), b.wait(timeout=10)                # both resumed: nobody left stopped
        fault.tick(sup)
        assert not fault.busy() and fault.story([])["resumed"] == 2
    finally:
        for p in (a, b):
            if p.poll() is None:
                p.kill()


def test_a_worker_that_says_it_froze_and_never_stops_is_killed_not_left_beside_a_replacement(tmp_path):
    log, fault = tmp_path / overlaps.FILE_NAME, _fault(tmp_path / overlaps.FILE_NAME)
    running = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        crashlog_line = {"kind": "frozen", "message_id": "pay-000007", "worker": "w0", "attempt": 1, "unacked": [],
                         "time": time.time() - 60}
        log.write_text(json.dumps(crashlog_line) + "\n")
        sup = FakeSupervisor(running)
        fault.tick(sup)
        assert running.wait(timeout=10) == -signal.SIGKILL and sup.started == [] and not fault.busy()
        assert fault.story([])["happened"] == 1 and fault.story([])["replaced"] == 0
    finally:
        if running.poll() is None:
            running.kill()


def test_a_left_written_just_before_the_exit_is_still_read(tmp_path):
    """The resumed worker writes `left` and exits between the fault's read of the log and its poll."""
    log, fault = tmp_path / overlaps.FILE_NAME, _fault(tmp_path / overlaps.FILE_NAME)
    child = _stopped_child()
    try:
        sup = FakeSupervisor(child)
        overlaps.append(log, "frozen", message_id="pay-000007", worker="w0", attempt=1, unacked=[])
        _wait(lambda: _stopped(child.pid))
        fault.tick(sup)
        overlaps.append(log, "applied", message_id="pay-000007", worker="w0", attempt=2)
        fault.tick(sup)                                       # resumed: the child exits at once
        child.wait(timeout=10)
        overlaps.append(log, "left", message_id="pay-000007", worker="w0", attempt=1)
        # The step after the tick's read: the process is gone, and its last line must still count.
        fault._advance(next(iter(fault.episodes.values())), sup, time.time())
        story = fault.story([])
        assert (story["finished"], story["unknown_outcome"]) == (1, 0) and fault.interruptions(story) == 0
        assert fault.entries([], [])[0]["late_write"] is True
    finally:
        if child.poll() is None:
            child.kill()


class FakeSupervisor:
    def __init__(self, proc):
        self.slots = [SimpleNamespace(name="w0", attempt=1, proc=proc)]
        self.adopted, self.started = [], []

    def adopt(self, proc):
        self.adopted.append(proc)

    def start(self, slot):
        slot.attempt += 1
        self.started.append(slot.attempt)


def test_the_fault_replaces_a_frozen_worker_and_resumes_it_after_its_replacement_wrote(tmp_path):
    log = tmp_path / overlaps.FILE_NAME
    fault = Overlap(count=1)
    fault.log, fault.planned = log, 1
    frozen = subprocess.Popen([sys.executable, "-c", "import os, signal; os.kill(os.getpid(), signal.SIGSTOP)"])
    try:
        sup = FakeSupervisor(frozen)
        overlaps.append(log, "frozen", message_id="pay-000007", worker="w0", attempt=1, unacked=[])
        _wait(lambda: _stopped(frozen.pid))
        fault.tick(sup)
        assert sup.adopted == [frozen] and sup.started == [2] and fault.busy()
        fault.tick(sup)
        assert frozen.poll() is None and _stopped(frozen.pid)          # not resumed before the replacement wrote
        overlaps.append(log, "applied", message_id="pay-000007", worker="w0", attempt=2)
        fault.tick(sup)
        frozen.wait(timeout=10)
        fault.tick(sup)
        story = fault.story([])
        assert not fault.busy() and story["episodes"][0]["state"] == "done"
        assert story["episodes"][0]["replacement_attempt"] == 2 and not story["episodes"][0]["left"]
        assert fault.interruptions(story) == 1 == story["unknown_outcome"]   # resumed, no `left`: write unknown
        assert (story["happened"], story["finished"]) == (1, 0) and story["frozen_median_seconds"] >= 0
        row = fault.entries([], [])[0]
        assert (row["message_id"], row["replaced_by"], row["late_write"]) == ("pay-000007", "attempt 2", None)
        assert json.dumps(story)                         # the report can hold it
    finally:
        if frozen.poll() is None:
            frozen.kill()


def test_a_freeze_seen_while_another_episode_closes_does_not_break_the_tick(tmp_path):
    """The episode that ends re-reads the log; a new worker's `frozen` line found then is a new episode,
    added while the tick walks the others."""
    log, fault = tmp_path / overlaps.FILE_NAME, _fault(tmp_path / overlaps.FILE_NAME)
    done, frozen = subprocess.Popen([sys.executable, "-c", "pass"]), _stopped_child()
    try:
        done.wait(timeout=10)
        sup = FakeSupervisor(done)
        sup.slots.append(SimpleNamespace(name="w1", attempt=1, proc=frozen))
        fault.episodes[("pay-000001", "w0", 1)] = {"id": "pay-000001", "state": "resumed", "slot": sup.slots[0],
                                                   "proc": done, "worker": "w0", "attempt": 1,
                                                   "times": {"frozen": 1.0, "resumed": time.time()}}
        take, calls = fault._take_new, []

        def take_new(s):
            calls.append(1)
            if len(calls) == 2:               # the closing episode's own read
                overlaps.append(log, "frozen", message_id="pay-000002", worker="w1", attempt=1, unacked=[])
            take(s)
        fault._take_new = take_new
        fault.tick(sup)
        assert {k[0] for k in fault.episodes} == {"pay-000001", "pay-000002"}
    finally:
        if frozen.poll() is None:
            frozen.kill()
