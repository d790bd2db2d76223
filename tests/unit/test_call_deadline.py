"""The wall-time bound on transactional calls: its accounting on hand-made ticks, and a real watcher
thread in a real process, blocked, and stopped with SIGSTOP."""

import json
import os
import signal
import subprocess
import sys
import time

from harness.runtime.call_deadline import STUCK_EXIT, TICK_S, CallDeadline
from tests.conftest import ROOT


def test_only_a_call_in_progress_counts_and_the_stuck_one_carries_its_evidence():
    held = ["pay-000001"]
    d = CallDeadline(1.0, on_stuck=None, exit=None)
    assert d.tick(TICK_S) is None                       # no call in progress: nothing to bound
    with d.call("commit_transaction", produced=lambda: list(held), unacked=[]):
        assert d.tick(TICK_S) is None and d.tick(TICK_S) is None
        held.append("pay-000002")                       # the evidence is read when stuck, not when the call began
        assert d.tick(TICK_S) is None and d.tick(TICK_S) is None    # exactly 1.0 s: not past it
        assert d.tick(TICK_S) == ("commit_transaction", 1.2, {"produced": ["pay-000001", "pay-000002"], "unacked": []})
    assert d.tick(10 * TICK_S) is None


def test_each_call_starts_its_own_count():
    d = CallDeadline(1.0, on_stuck=None, exit=None)
    with d.call("send_offsets_to_transaction"):
        for _ in range(4):
            assert d.tick(TICK_S) is None
    with d.call("commit_transaction"):
        assert d.tick(TICK_S) is None


def test_a_long_gap_is_a_stopped_process_not_a_slow_call():
    d = CallDeadline(1.0, on_stuck=None, exit=None)
    with d.call("commit_transaction"):
        assert d.tick(30.0) is None          # frozen 30 s (SIGSTOP): at most two ticks (0.5 s) count
        assert d.tick(TICK_S) is None and d.tick(TICK_S) is None
        assert d.tick(TICK_S) is not None


def test_evidence_that_fails_is_named_and_does_not_stop_the_exit():
    d = CallDeadline(0.1, on_stuck=None, exit=None)
    with d.call("abort_transaction", produced=lambda: 1 / 0, unacked=["a"]):
        name, _, ev = d.tick(TICK_S)
    assert name == "abort_transaction" and ev["produced"] is None and ev["unacked"] == ["a"]
    assert ev["evidence_errors"] == ["produced: ZeroDivisionError: division by zero"]


# A process whose call blocks (`block` seconds) under a deadline; SIGSTOP may freeze it meanwhile.
PROGRAM = r"""
import json, sys, time
from harness.runtime.call_deadline import CallDeadline
seconds, block = float(sys.argv[1]), float(sys.argv[2])
def on_stuck(call, awake, held):
    if held.get("produced") == ["fail"]:
        raise OSError(28, "No space left on device")
    print(json.dumps({"call": call, "awake": awake, **held}), flush=True)
d = CallDeadline(seconds, on_stuck)
with d.call("commit_transaction", produced=lambda: [sys.argv[3]]):
    time.sleep(0.6)        # the watcher runs and has counted (a stop from now on happens inside the call)
    print("in", flush=True)
    time.sleep(block)      # a C call that does not return (the GIL released, as librdkafka's are)
print("returned", flush=True)
"""


def _start(seconds: float, block: float, held: str = "pay-000007") -> subprocess.Popen:
    p = subprocess.Popen([sys.executable, "-c", PROGRAM, str(seconds), str(block), held], cwd=ROOT,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert p.stdout.readline().strip() == "in"
    return p


def test_a_call_that_never_returns_ends_the_process_with_its_evidence():
    p = _start(2.0, 600)
    out, _ = p.communicate(timeout=60)
    assert p.returncode == STUCK_EXIT
    stuck = json.loads(out.strip())
    assert stuck["call"] == "commit_transaction" and stuck["produced"] == ["pay-000007"] and stuck["awake"] >= 2.0


def test_a_stuck_call_whose_evidence_cannot_be_written_exits_as_a_failure_not_as_stuck():
    p = _start(1.0, 600, held="fail")
    _, err = p.communicate(timeout=60)
    assert p.returncode == 1 and "No space left on device" in err


def test_time_spent_stopped_does_not_make_a_call_stuck():
    p = _start(4.0, 1.0)
    os.kill(p.pid, signal.SIGSTOP)         # frozen far longer than the deadline, inside the call
    time.sleep(6)
    os.kill(p.pid, signal.SIGCONT)
    out, _ = p.communicate(timeout=60)
    assert (p.returncode, out.strip()) == (0, "returned")
