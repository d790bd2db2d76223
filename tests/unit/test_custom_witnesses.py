"""`harness run custom`'s witnesses and kill accounting on hand-made data: the ledger's own worker and
attempt columns, kill credit by effect, stalls cut by a later kill, kills aimed at the effect-to-commit gap,
and why an unfinished run did not finish."""

import signal
import subprocess
import sys
import time
from types import SimpleNamespace

from harness.checker.group_timeline import DAMAGE, MemberTies, Timeline
from harness.experiments.custom.custom_launch import GapClock
from harness.experiments.custom.custom_report import gap_warning, kill_states, no_kill_sentence, why_unfinished
from harness.experiments.custom.custom_witnesses import Placer, rebalance_times, witnesses
from harness.faults.random_kill import RandomKill
from harness.runtime import crashlog

RUN = "r1"


def group(samples, ties, kills=()):
    """A Placer for consumers in a group: ownership from the samples' members, tied to attempts by `ties`."""
    t = MemberTies(RUN)
    t.load([{"tie": m, "worker": w, "attempt": a} for m, (w, a) in ties.items()])
    return Placer(Timeline(list(samples)), t, True, [], {"w0": [0], "w1": [1]},
                  {(k["worker"], k["attempt"]): k["time"] for k in kills})


def members(**owned):
    return [{"member": m, "partitions": p} for m, p in owned.items()]


# w0 attempt 1 (member m1) owns partition 0 until it is killed at 105.0; w1 attempt 1 (member m2) takes it.
MOVED = [{"t": 104.9, "members": members(m1=[0], m2=[1]), "committed": {0: 0, 1: 0}},
         {"t": 105.3, "members": members(m2=[0, 1]), "committed": {0: 0, 1: 0}}]
TIES = {"m1": ("w0", 1), "m2": ("w1", 1)}
KILL = {"worker": "w0", "attempt": 1, "pid": 11, "time": 105.0}


def test_an_effect_committed_just_after_its_writers_kill_is_the_killed_attempts_by_the_ledgers_columns():
    # the insert was sent before the kill and committed 60 ms after it; the ledger row names w0 attempt 1
    dup = {"a": [(105.06, "w0", 1), (106.0, "w1", 1)]}
    seen, credit, _, reasons = witnesses(dup, [], [KILL], group(MOVED, TIES, [KILL]), {"a": (0, 0)}, t0=100.0)
    w = seen[0]
    assert w["explained_by"] == "kill" and [k["pid"] for k in w["kills"]] == [11]
    assert w["effects"][0] == {"t": 5.06, "worker": "w0", "attempt": 1, "by": "ledger"}
    assert credit == {0: 1} and reasons == {"kill": 1}


def test_without_the_columns_an_effect_just_after_a_kill_is_still_placed_with_its_writer():
    dup = {"a": [(105.06, None, None), (106.0, None, None)]}
    seen, credit, _, _ = witnesses(dup, [], [KILL], group(MOVED, TIES, [KILL]), {"a": (0, 0)}, t0=100.0)
    assert seen[0]["explained_by"] == "kill" and credit == {0: 1}
    assert seen[0]["effects"][0]["owners"] == ["w0 attempt 1", "w1 attempt 1"]   # either may have: both named


def test_each_kill_is_credited_with_every_effect_of_its_attempt_applied_again():
    kills = [KILL, {"worker": "w0", "attempt": 2, "pid": 12, "time": 108.0}]
    # "a" was applied by attempt 1 (killed), again by attempt 2 (killed), and a third time by attempt 3
    dup = {"a": [(104.0, "w0", 1), (107.0, "w0", 2), (109.0, "w0", 3)],
           "b": [(107.5, "w0", 2), (109.5, "w0", 3)]}
    seen, credit, _, _ = witnesses(dup, [], kills, group([], {}, kills), {"a": (0, 0), "b": (0, 1)}, t0=100.0)
    assert credit == {0: 1, 1: 2}, "the second kill left a and b behind, though the first kill explains a"
    assert {w["id"]: w["kills"][0]["pid"] for w in seen} == {"a": 11, "b": 12}


def test_a_duplicate_by_one_live_attempt_across_a_rebalance_is_said_so_and_counted():
    samples = [{"t": 101.0, "members": members(m1=[0], m2=[1]), "committed": {}},
               {"t": 102.0, "members": members(m1=[0, 1]), "committed": {}},
               {"t": 103.0, "members": members(m1=[0], m2=[1]), "committed": {}}]
    assert rebalance_times(samples) == [102.0, 103.0]
    dup = {"a": [(101.5, "w0", 1), (102.5, "w0", 1)], "b": [(101.5, "w0", 1), (101.7, "w0", 1)]}
    seen, credit, _, reasons = witnesses(dup, [], [], group(samples, TIES), {"a": (0, 0), "b": (0, 1)}, t0=100.0)
    assert {w["id"]: w["explained_by"] for w in seen} == {"a": "rebalance", "b": "unexplained"}
    assert credit == {} and reasons == {"rebalance": 1, "unexplained": 1}
    said = no_kill_sentence(reasons)
    assert "2 duplicated id(s) had no kill: 1 applied twice by the same attempt across a rebalance, " \
           "1 unexplained" in said


def assign_state(kill_times, recommitted_at):
    """kill_states for w0 (partition 0, assigning), killed at each of `kill_times`; partition 0's commit
    stands at 10 until it moves to 20 at `recommitted_at`; each attempt had worked (an effect)."""
    starts = [{"worker": "w0", "attempt": n + 1, "t": 100.0 + 10 * n} for n in range(len(kill_times))]
    samples = [{"t": t, "members": None, "committed": {0: 10 if t < recommitted_at else 20},
                "effects": {0: t}} for t in (x / 10 for x in range(1001, 1500))]
    kills = [{"worker": "w0", "attempt": n + 1, "time": t} for n, t in enumerate(kill_times)]
    return kill_states(Timeline(samples), None, kills, starts, {"w0": [0]}, {0: 100}, [], {}, False)


def test_a_stall_is_measured_only_when_no_later_kill_struck_before_the_partitions_recovered():
    alone = assign_state([101.0], recommitted_at=110.0)
    assert alone[0]["state"] == DAMAGE and not alone[0]["killed_again"] and alone[0]["stall_seconds"] == 9.0
    again = assign_state([101.0, 105.0], recommitted_at=110.0)
    assert [x["killed_again"] for x in again] == [True, False]
    assert [x["stall_seconds"] for x in again] == [None, 5.0], "not 9 s: the first kill's figure summed two"


def test_no_kill_between_an_effect_and_its_commit_is_a_warning_with_numbers():
    states = [{"state": DAMAGE, "effects_since_commit": 0}] * 3 + [{"state": "before joining",
                                                                   "effects_since_commit": 0}]
    (w,) = gap_warning(states, "as-predicted")
    assert w.startswith("0 of 4 kill(s) landed between an effect and its commit (3 struck a worker") \
        and "weak evidence" in w and "aim=gap" in w
    assert gap_warning(states[:2] + [{"state": DAMAGE, "effects_since_commit": 2}], "as-predicted") == []
    assert gap_warning(states[:2] + [{"state": DAMAGE, "effects_since_commit": None}], "as-predicted") == [], \
        "unknown is not 0"


def test_the_gap_clock_sees_an_effect_past_the_partitions_last_commit():
    clock = GapClock()
    clock.add({"t": 1.0, "committed": {0: 5, 1: 5}, "effects": {0: 0.9}})
    assert not clock.in_gap([0, 1], started_at=0.0), "the effect came before the commit moved"
    clock.add({"t": 2.0, "committed": {0: 5, 1: 5}, "effects": {0: 1.5}})
    assert clock.in_gap([0], started_at=0.0) and not clock.in_gap([1], 0.0) and not clock.in_gap([0], 1.8)
    clock.add({"t": 3.0, "committed": {0: 9, 1: 5}, "effects": {0: 1.5}})
    assert not clock.in_gap([0], started_at=0.0), "committed since"


def test_random_kills_aimed_at_the_gap_wait_for_it(tmp_path):
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        slot = SimpleNamespace(index=0, name="w0", attempt=1, finished=False, proc=proc,
                               first_message_at=time.time() - 10, has_work=True, in_gap=False)
        sup = SimpleNamespace(slots=[slot], crash_log=tmp_path / "crash-log.jsonl")
        fault = RandomKill(kills=1, seed=3, aim="gap")
        fault.setup(None)
        for _ in range(20):
            fault.tick(sup)
        assert proc.poll() is None, "due, but not in its gap: spared"
        slot.in_gap = True
        fault.tick(sup)
        assert proc.wait(10) == -signal.SIGKILL
        assert [c["point"] for c in crashlog.read(sup.crash_log)] == ["random"]
    finally:
        proc.kill()
        proc.wait()


def test_an_unfinished_run_says_what_the_group_was_doing_at_the_limit():
    samples = [{"t": 100.0 + i, "members": members(m1=[0, 1]) if i % 2 else members(m1=[0], m3=[1]),
                "committed": {0: 40 if i < 50 else 70, 1: 0}} for i in range(200)]
    starts = [{"worker": "w0", "attempt": 1, "t": 99.0}, {"worker": "w1", "attempt": 1, "t": 99.0},
              {"worker": "w1", "attempt": 2, "t": 150.0}]
    ties = MemberTies(RUN)
    ties.load([{"tie": "m1", "worker": "w0", "attempt": 1}])
    why = why_unfinished(samples, starts, ties, True, {0: 100, 1: 100}, {"w0": [0], "w1": [1]})
    assert why == ("committed 0: 70 of 100, 1: 0 of 100; the last commit moved 149.0 s before the end; "
                   "the group rebalanced 60 time(s) in its last 60 s; w1 never joined the group")
    assert why_unfinished([], starts, ties, True, {0: 1}, {"w0": [0]}) is None


def test_kills_aimed_at_the_gap_are_for_custom_runs_only():
    import pytest
    from harness.core.errors import HarnessError
    from harness.experiments import get
    from harness.faults import build
    from harness.run.params import RunParams
    (f,) = build(RunParams("custom", worker_cmd="true", faults=["random-kill:kills=4,aim=gap"]), get("custom"))
    assert (f.kills, f.aim) == (4, "gap")
    with pytest.raises(HarnessError, match="aim=gap"):
        build(RunParams("offset-after", faults=["random-kill:aim=gap"]), get("offset-after"))
    with pytest.raises(HarnessError, match="aim must be one of busy, gap"):
        build(RunParams("custom", worker_cmd="true", faults=["random-kill:aim=later"]), get("custom"))


def test_the_summary_says_kills_killed_again_effects_applied_again_no_kill_duplicates_and_why_unfinished():
    from harness.experiments.custom.custom_report import _summary
    kills = [{"worker": "w0", "attempt": n, "t": float(n)} for n in (1, 2, 3)]
    d = {"summary": "custom: NOT as predicted", "summary_detail": [],
         "consumer": {"claim_held": None, "kills_by_state": {DAMAGE: 3}, "restart_median_seconds": 11.0,
                      "membership": "group", "protocol": "classic", "witnesses": [],
                      "killed_again_before_recovery": 2, "duplicates_by_explanation": {"kill": 9, "rebalance": 100},
                      "unfinished": "committed 0: 70 of 100; the group rebalanced 118 time(s) in its last 60 s"}}
    _summary(d, "exactly-once", kills, {0: 5, 2: 7}, {}, [])
    why, text = d["summary_detail"][:2]
    assert why == "Why the run did not finish: committed 0: 70 of 100; the group rebalanced 118 time(s) in its last 60 s."
    assert "committed again 11.00 s later (median), the group's stall (classic protocol); 2 kill(s) had another " \
           "kill strike before their partitions recovered (not in the median)." in text
    assert "2 of 3 kill(s) left duplicated effects behind (12 effects of their attempts applied again)." in text
    assert "100 duplicated id(s) had no kill: 100 applied twice by the same attempt across a rebalance." in text


def test_the_consumer_section_shows_kills_in_the_gap_kills_killed_again_no_kill_witnesses_and_why_unfinished():
    from harness.reporting import consumer
    from tests.unit.test_custom import consumer_section
    c = {**consumer_section(), "kills_in_gap": 0, "killed_again_before_recovery": 1,
         "unfinished": "committed 0: 70 of 100; w1 never joined the group"}
    c["witnesses"] = [{**c["witnesses"][0], "kills": [], "explained_by": "rebalance"}]
    facts = dict(consumer.facts(c))
    assert facts["kills between an effect and its commit"] == "0"
    assert "(1 kill(s) had another kill strike before their partitions recovered: not counted)" in \
        facts["after a kill, its partitions committed again"]
    assert facts["why the run did not finish"] == "committed 0: 70 of 100; w1 never joined the group"
    assert consumer.witness_rows(c)[0][4] == "none (no kill: the same attempt applied it again across a rebalance " \
                                             "of the group, e.g. a transaction aborted there)"
    assert dict(consumer.facts({**c, "kills_in_gap": None}))["kills between an effect and its commit"] == "unknown"
