"""Why a fault struck fewer times than asked: "the workers finished first" only when they did; a run that
stopped (its time limit, an interrupt) says so instead."""

from harness.faults.broker import BrokerKill
from harness.faults.random_kill import RANDOM, RandomKill


def _one_kill():
    return [{"by": "supervisor", "point": RANDOM, "worker": "w0", "attempt": 1}]


def test_random_kills_missed_because_the_workers_finished():
    f = RandomKill(3, seed=1)
    f.run_end = ("complete", None)
    text = f.shortfall(_one_kill(), f.story([]))
    assert "Only 1 of 3 random kills struck: the workers finished first (more payments" in text


def test_random_kills_missed_because_the_run_stopped_say_how():
    f = RandomKill(3, seed=1)
    f.run_end = ("incomplete", "time limit of 5 s reached")
    text = f.shortfall(_one_kill(), f.story([]))
    assert "finished first" not in text and "more payments" not in text
    assert "Only 1 of 3 random kills struck: the run stopped first, incomplete: time limit of 5 s reached." in text


def test_broker_faults_missed_because_the_run_was_interrupted_say_so():
    f = BrokerKill(count=2, seed=7)
    f.run_end = ("interrupted", "interrupted by the user")
    text = f.shortfall([], {"planned": 2, "struck": 0, "skipped": []})
    assert text == " Only 0 of 2 broker-kill faults struck (the run stopped first, interrupted: interrupted by the user)."
    f.run_end = ("complete", None)
    assert "(the workers finished first)" in f.shortfall([], {"planned": 2, "struck": 0, "skipped": []})


def test_a_plan_whose_payments_meet_errors_not_deaths_claims_no_missed_crash():
    """share-release's plan names payments that meet a seeded error, never a death: its report once said
    "0 of 100 planned crashes struck" as if the run had missed them."""
    from harness.faults.planned import PlannedCrash
    from harness.experiments import get
    f = PlannedCrash(0.1)
    f.planned = 100
    assert "0 of 100 planned crashes struck" in f.shortfall([], f.story([]))
    f.errors = bool(get("share-release").plan_errors)
    assert f.shortfall([], f.story([])) == "" and not get("share-ack-after").plan_errors
