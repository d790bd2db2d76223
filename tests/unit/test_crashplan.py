"""The crash plan is a pure function of (ids, rate, seed): same crashes in every mode."""

import pytest

from harness.runtime.crashplan import CrashPlan, random_kill_delays
from harness.workload.payments import make_payments

IDS = [p.id for p in make_payments(1000, 100)]


def test_same_seed_same_crash_ids():
    assert CrashPlan.make(IDS, 0.1, 25).crash_ids == CrashPlan.make(list(reversed(IDS)), 0.1, 25).crash_ids


def test_count_is_rate_times_messages():
    assert len(CrashPlan.make(IDS, 0.1, 25).crash_ids) == 100
    assert len(CrashPlan.make(IDS, 0.0, 25).crash_ids) == 0
    assert CrashPlan.make(IDS, 1.0, 25).crash_ids == frozenset(IDS)


def test_other_seed_other_crashes():
    assert CrashPlan.make(IDS, 0.1, 25).crash_ids != CrashPlan.make(IDS, 0.1, 26).crash_ids


def test_plan_is_independent_of_mode_and_round_trips(tmp_path):
    # Every experiment saves and loads the same file format: identical ids whatever the mode.
    plan = CrashPlan.make(IDS, 0.1, 7)
    plan.save(tmp_path / "plan.json")
    assert CrashPlan.load(tmp_path / "plan.json") == plan


@pytest.mark.parametrize("rate", [-0.1, 1.5])
def test_rate_outside_0_1_is_refused(rate):
    with pytest.raises(ValueError):
        CrashPlan.make(IDS, rate, 1)


def test_random_kill_delays_are_seeded():
    assert random_kill_delays(3, 5) == random_kill_delays(3, 5)
    assert random_kill_delays(3, 5) != random_kill_delays(4, 5)
    assert all(0.05 <= d <= 0.6 for d in random_kill_delays(3, 50))


def test_one_point_for_every_crash_and_round_trip(tmp_path):
    plan = CrashPlan.make(IDS, 0.1, 7, ["after-effect-before-commit"])
    assert {plan.point_of(i) for i in plan.crash_ids} == {"after-effect-before-commit"}
    plan.save(tmp_path / "plan.json")
    assert CrashPlan.load(tmp_path / "plan.json") == plan


def test_any_point_is_seeded_and_keeps_the_same_ids():
    points = ["a", "b", "c", "d"]
    p1, p2 = CrashPlan.make(IDS, 0.1, 7, points), CrashPlan.make(IDS, 0.1, 7, points)
    assert p1 == p2
    assert p1.crash_ids == CrashPlan.make(IDS, 0.1, 7).crash_ids == CrashPlan.make(IDS, 0.1, 7, ["x"]).crash_ids
    assert {p1.point_of(i) for i in p1.crash_ids} == set(points)
    assert p1.point_of("not-planned") is None


def test_a_fault_that_moves_partitions_is_in_the_plan_and_old_plans_have_none(tmp_path):
    import json
    path = tmp_path / "plan.json"
    CrashPlan.make(IDS, 0.1, 7).save(path)
    assert CrashPlan.load(path).partitions_move is False
    assert CrashPlan.amend(path, partitions_move=True) == CrashPlan.load(path)
    assert CrashPlan.load(path).partitions_move is True
    d = json.loads(path.read_text())
    for value in (None, "yes", 1):                  # only a JSON true says so (an older plan has no key)
        d["partitions_move"] = value
        path.write_text(json.dumps(d))
        assert CrashPlan.load(path).partitions_move is False
