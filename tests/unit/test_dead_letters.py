"""A share group's dead-letter topic (--dead-letter on, KIP-1191) on hand-made data: naming a payment from a dead
letter's headers, the refusal of brokers that cannot have one, the split of the ids without an effect into lost and
dead-lettered, the predictions, the recount and what the reports show."""

import pytest

from harness.checker.observe import Observation, StoreCounts, _dead_letters, split_dead_lettered
from harness.checker.predict import predict
from harness.experiments import get
from harness.experiments.queues import share_dead_letter as dl
from harness.experiments.queues.share_facts import PERMANENT, error_kinds
from harness.run.params import RunParams
from harness.workload.naming import RunNames

INPUT = "harness.r1.input"
# The headers Kafka 4.4.0's broker writes on a dead letter (ShareGroupDLQStateManager$ProduceRequestHandler),
# as a real run showed them.
HEADERS = [("__dlq.errors.topic", INPUT.encode()), ("__dlq.errors.partition", b"1"), ("__dlq.errors.offset", b"7"),
           ("__dlq.errors.group", b"harness-r1-share"), ("__dlq.errors.delivery.count", b"5"),
           ("__dlq.errors.message", b"Offset delivery count exceeded the threshold.")]


def crash(msg, held):
    return {"point": "poison-acquired", "message_id": msg, "unacked": [], "acked_unapplied": [], "time": 1.0,
            "held": {i: [0, int(i[1:]), dc] for i, dc in held.items()}, "worker": "w0", "attempt": 1}


def expectations(p):
    return {e.metric: (e.op, e.value) for e in p.expectations}


def test_a_dead_letter_names_the_payment_at_the_input_place_its_headers_give():
    at = {(1, 7): "p7", (0, 7): "p9"}
    d = dl.parse(HEADERS, 0, 3, INPUT, at)
    assert (d.message_id, d.partition, d.offset, d.dead_letter_partition, d.dead_letter_offset) == ("p7", 1, 7, 0, 3)
    assert d.delivery_count == 5 and d.reason.startswith("Offset delivery count exceeded")
    # another topic's record, a place no payment of the run has, headers missing or not numbers: no payment
    assert dl.parse([(k, b"harness.other.input" if k.endswith("topic") else v) for k, v in HEADERS], 0, 3,
                    INPUT, at) is None
    assert dl.parse(HEADERS, 0, 3, INPUT, {(0, 7): "p9"}) is None
    assert dl.parse([], 0, 3, INPUT, at) is None and dl.parse(None, 0, 3, INPUT, at) is None
    assert dl.parse([(k, b"x" if k.endswith("offset") else v) for k, v in HEADERS], 0, 3, INPUT, at) is None
    # a REJECTed record's dead letter, without a delivery count header
    d = dl.parse([h for h in HEADERS if "count" not in h[0]], 0, 4, INPUT, at)
    assert d.message_id == "p7" and d.delivery_count is None


def test_a_broker_that_cannot_have_the_runs_dead_letter_topic_is_refused_in_one_line():
    topic = RunNames("r1").dead_letter_topic
    assert topic == "harness.r1.dlq" and topic in RunNames("r1").topics()      # `harness clean` drops it
    ok = {"metadata.version": 33, "share.version": 2}
    assert dl.refusal(ok, "harness.", topic) is None and dl.refusal(ok, "", topic) is None
    assert dl.refusal(None, "harness.", topic) is None                       # features not said: the prefix decides
    old = dl.refusal({"metadata.version": 28, "share.version": 1}, "harness.", topic)
    assert "share.version 2" in old and "share.version 1" in old and "4.4" in old
    none = dl.refusal(ok, None, topic)
    assert "errors.deadletterqueue.topic.name.prefix" in none
    kafkas = dl.refusal(ok, "dlq.", topic)
    assert "'dlq.'" in kafkas and topic in kafkas and "harness." in kafkas
    assert all("\n" not in x for x in (old, none, kafkas))


def test_the_option_and_the_groups_settings():
    from harness.core.errors import HarnessError
    from harness.experiments.queues.share_options import DEAD_LETTER_OPTION, group_settings
    assert not dl.wanted(RunParams("share-poison")) and dl.wanted(RunParams("share-poison", dead_letter="on"))
    assert dl.wanted({"dead_letter": "on"}) and not dl.wanted({})
    with pytest.raises(HarnessError, match="--dead-letter must be one of off, on"):
        DEAD_LETTER_OPTION.check("yes")
    plain = group_settings(RunParams("share-poison"))
    assert not any(k.startswith("errors.") for k in plain)
    dead = group_settings(RunParams("share-poison", dead_letter="on"), "harness.r1.dlq")
    assert dead["errors.deadletterqueue.topic.name"] == "harness.r1.dlq"
    assert dead["errors.deadletterqueue.copy.record.enable"] == "true"
    assert all(o.name != "dead_letter" or not o.worker for o in get("share-poison").options)


def test_ids_without_an_effect_are_dead_lettered_when_the_topic_holds_theirs_and_lost_otherwise():
    assert split_dead_lettered(["p1", "p2", "p3"], {"p2": object()}) == (["p1", "p3"], ["p2"])
    assert split_dead_lettered([], {"p2": 1}) == ([], [])
    a = Observation(ledger=StoreCounts(7, 0, 3, 0, lost_ids=["p1", "p2", "p3"]))
    a.evidence.ledger_lost_ids = ["p1", "p2", "p3"]
    found = dl.DeadLetters("harness.r1.dlq", by_id={"p2": dl.DeadLetter("p2", 0, 2, 0, 0, 5, "x"),
                                                    "p3": dl.DeadLetter("p3", 0, 3, 0, 1, 5, "x"),
                                                    "p8": dl.DeadLetter("p8", 0, 8, 0, 2, 5, "x")}, records=3)
    _dead_letters(a, found)
    # p8 was applied before its record was archived (ack-after at the limit): in the topic, but not dead-lettered
    assert (a.ledger.lost, a.ledger.lost_ids) == (1, ["p1"]) and a.evidence.ledger_lost_ids == ["p1"]
    assert a.metrics["ledger.dead_lettered"] == 2 and a.evidence.ids["ledger.dead_lettered"] == ["p2", "p3"]


def test_an_unreadable_dead_letter_topic_leaves_lost_and_dead_lettered_unknown_never_0():
    a = Observation(ledger=StoreCounts(7, 0, 3, 0, lost_ids=["p1", "p2", "p3"]))
    _dead_letters(a, dl.DeadLetters("harness.r1.dlq", records=None, error="dead-letter topic harness.r1.dlq: gone"))
    assert a.ledger.lost is None and a.metrics["ledger.dead_lettered"] is None
    assert a.evidence.errors == ["dead-letter topic harness.r1.dlq: gone"]


def test_with_a_dead_letter_topic_the_poison_is_predicted_dead_lettered_and_nothing_lost():
    limit = 2
    deaths = [crash("p3", {"p3": n, "p4": 1}) for n in range(1, limit + 1)]
    params = RunParams("share-poison", delivery_limit=limit, dead_letter="on")
    later = [{"event": "accepted", "worker": "w1", "records": [[0, 4, 2]]}]    # p4, its poll-mate, was seen again
    p = predict(get("share-poison"), deaths, params=params, events=later)
    assert expectations(p) == {"ledger.duplicates": ("==", 0), "ledger.lost": ("==", 0),
                               "ledger.dead_lettered": ("==", 1)}
    assert p.lost_ids == set() and p.id_sets["ledger.dead_lettered"] == ["p3"]
    # without it the same deaths lose p3
    p = predict(get("share-poison"), deaths, params=RunParams("share-poison", delivery_limit=limit), events=later)
    assert expectations(p)["ledger.lost"] == ("==", 1) and "ledger.dead_lettered" not in expectations(p)


def test_a_payment_accepted_and_never_applied_stays_lost_beside_a_dead_letter_topic():
    c = crash("p2", {"p2": 1, "p5": 5})
    c.update(point="after-accept-before-effect", acked_unapplied=["p2"])
    p = predict(get("share-ack-before"), [c], params=RunParams("share-ack-before", dead_letter="on"))
    # p2: ACCEPTed, never applied: no dead letter can hold it; p5: held at the limit by the death: archived there
    assert expectations(p)["ledger.lost"] == ("==", 1) and p.lost_ids == {"p2"}
    assert expectations(p)["ledger.dead_lettered"] == ("==", 1) and p.id_sets["ledger.dead_lettered"] == ["p5"]


def test_an_undescribed_death_makes_the_dead_lettered_a_bound():
    deaths = [crash("p3", {"p3": n}) for n in range(1, 3)] + [{"by": "supervisor", "time": 2.0}]
    p = predict(get("share-poison"), deaths, params=RunParams("share-poison", delivery_limit=2, dead_letter="on"))
    assert expectations(p)["ledger.dead_lettered"][0] == "<=" and "ledger.dead_lettered" not in p.id_sets


def test_share_releases_rejected_payments_are_dead_lettered(tmp_path):
    from harness.runtime.crashplan import CrashPlan
    plan = CrashPlan.make([f"p{i:03d}" for i in range(40)], 0.1, 25)
    plan.save(tmp_path / "crash-plan.json")
    permanent = sorted(i for i, k in error_kinds(plan.crash_ids).items() if k == PERMANENT)
    p = predict(get("share-release"), [], run_dir=tmp_path, params=RunParams("share-release", dead_letter="on"))
    assert expectations(p)["ledger.lost"] == ("==", 0) and expectations(p)["ledger.dead_lettered"] == ("==", 2)
    assert p.id_sets["ledger.dead_lettered"] == permanent


def test_the_recount_names_dead_letters_by_the_input_topics_own_records():
    from harness.checker import crosscheck, recount
    from harness.checker.recount import TopicRead, _dead_letter_of
    assert _dead_letter_of(HEADERS) == (INPUT, 1, 7) and _dead_letter_of([("h", b"x")]) is None
    assert _dead_letter_of(None) is None
    sent = TopicRead(3, None, {}, at={(1, 7): "p7", (0, 1): "p1"})
    dlq = TopicRead(3, None, {}, dead_letters={(INPUT, 1, 7), ("harness.x.input", 0, 1), (INPUT, 5, 5)})
    assert recount.dead_lettered(dlq, INPUT, sent) == {"p7"}

    class Ledger:
        effects, duplicates, total, dedupe_keys, dedupe_hits = 1, 0, 100, None, None
        duplicate_ids, stray_ids, wrong_amount_ids, missing_ids = [], [], [], ["p7"]
    report = {"counts": {"sent": 2, "effects": 1, "duplicates": 0, "lost": 0, "unprocessed": 0, "dead_lettered": 1},
              "ledger": {"actual_total": 100}, "verdict": "as-predicted",
              "dead_letter": {"dead_lettered": [{"message_id": "p7"}]}}
    rows = {(r.store, r.metric.split(" (")[0]): r for r in crosscheck.compare(report, {"p7": 100, "p1": 100},
                                                                           Ledger(), dead_letters={"p7"})}
    assert rows[("dead-letter topic", "payments dead-lettered")].agrees
    missing = rows[("ledger", "ids without an effect")]
    assert "dead-lettered" in missing.metric and missing.reported == 1 and missing.agrees
    # a report that says lost where the topic holds a dead letter differs
    report["counts"].update(lost=1, dead_lettered=0)
    rows = [r for r in crosscheck.compare(report, {}, Ledger(), dead_letters={"p7"}) if r.store == "dead-letter topic"]
    assert rows[0].agrees is False and rows[0].ids == []        # named in the report's dead_letter list


def test_the_reports_say_the_dead_letters():
    from harness.reporting.scoreboard import rows
    from harness.reporting.shared import dead_letter_lines
    d = {"counts": {"sent": 2, "deliveries": 3, "effects": 1, "duplicates": 0, "lost": 0, "unprocessed": 0,
                    "dedupe_hits": None, "dead_lettered": 1},
         "predicted": {"duplicates": 0, "lost": 0, "dead_lettered": 1, "exact": True,
                       "expectations": ["ledger.dead_lettered == 1"]},
         "ledger": {"actual_total": 100, "expected_total": 200}, "stack": {"ledger_table": "harness.ledger_r1"},
         "crashes": []}
    board = {r[0]: r for r in rows(d)}
    assert board["dead-lettered"][1:] == ("Kafka dead-letter topic", "1", "1")
    del d["counts"]["dead_lettered"]
    assert "dead-lettered" not in {r[0] for r in rows(d)}
    section = {"topic": "harness.r1.dlq", "records": 2, "strays": 0, "awaited_missing": [[0, 9]], "error": None,
               "dead_lettered": [{"message_id": "p7", "partition": 1, "offset": 7, "dead_letter_partition": 0,
                                  "dead_letter_offset": 0, "delivery_count": 5, "reason": "Offset rejected by client."}]}
    lines = dead_letter_lines(section, 1)
    assert "p7 (input 1/7 -> dead-letter offset 0, delivery count 5: Offset rejected by client.)" in lines[0]
    assert "0/9" in lines[1] and "lost" in lines[1]
