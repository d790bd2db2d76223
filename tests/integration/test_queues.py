"""The queues family on the real stack (Kafka 4.4.0's share groups, real SIGKILLs): several members of one
share group, each crash's held records back after their locks, observed == predicted, and the share group's
numbers beside the consumer group's for the same seeded crashes. On the session's stack: share-ack-after takes
about 20 s in the default run, share-release about 20 s, share-poison with a dead-letter topic about 15 s (33 s
at a load average of 37); share-ack-before with share-dedupe about 40 s, and share-poison at two delivery limits about a
minute, slow-marked."""

import json
import time

import pytest

from harness.experiments.queues.share_facts import DELIVERY_LIMIT, LOCK_MS, PERMANENT, TRANSIENT, archived, error_kinds
from harness.runtime import crashlog
from harness.runtime.crashplan import CrashPlan
from tests.integration.test_experiments import run_exp

pytestmark = pytest.mark.integration


def _archived_ids(out) -> set:
    return {i for c in crashlog.read(out / "crash-log.jsonl") for i in archived(c)}


def test_share_ack_after_duplicates_each_crash_between_effect_and_accept(stack, tmp_path):
    d = run_exp(stack, tmp_path, "share-ack-after", "--messages", "100", "--partitions", "2", "--workers", "2")
    out = tmp_path / "report"
    crashes = crashlog.read(out / "crash-log.jsonl")
    c = d["counts"]
    assert len(crashes) == 10 and all(x["point"] == "after-effect-before-accept" for x in crashes)
    # each death applied its payment and never accepted it: it comes again once its lock expires, unless the
    # death left it at the delivery-count limit (then the broker archives it: applied once, not again)
    again = [x for x in crashes if x["message_id"] not in _archived_ids(out)]
    assert c["duplicates"] == d["predicted"]["duplicates"] == len(again) > 0 and c["lost"] == 0
    # two members: the events say which one accepted what, with the broker's delivery counts
    events = [json.loads(line) for line in (out / "events.jsonl").read_text().splitlines()]
    accepted = [r for e in events if e["event"] == "accepted" for r in e["records"]]
    assert len({(p, o) for p, o, _ in accepted}) == 100
    assert {e["worker"] for e in events if e["event"] == "accepted"} == {"w0", "w1"}
    redelivered = {(p, o) for p, o, dc in accepted if dc > 1}
    assert {(x["partition"], x["offset"]) for x in again} <= redelivered
    assert all(dc <= DELIVERY_LIMIT for _, _, dc in accepted)
    assert f"{LOCK_MS / 1000:g} s lock" in d["predicted"]["note"]


@pytest.mark.slow
def test_share_ack_before_loses_and_share_dedupe_is_exact(stack, tmp_path):
    d = run_exp(stack, tmp_path, "share-ack-before", "--messages", "100", "--partitions", "2", "--workers", "2")
    lost = {x["message_id"] for x in crashlog.read(tmp_path / "report" / "crash-log.jsonl")}
    assert d["counts"]["lost"] == d["predicted"]["lost"] >= len(lost) == 10 and d["counts"]["duplicates"] == 0
    assert lost <= set(d["anomalies"]["lost_ids"])
    (tmp_path / "report").rename(tmp_path / "before")
    d = run_exp(stack, tmp_path, "share-dedupe", "--messages", "100", "--partitions", "2", "--workers", "2",
                "--kill-point", "any")
    assert (d["counts"]["lost"], d["counts"]["duplicates"]) == (0, 0)
    assert d["ledger"]["actual_total"] == d["ledger"]["expected_total"]


@pytest.mark.slow
def test_share_poison_is_archived_at_the_runs_delivery_limit_and_at_kafkas_default(stack, tmp_path):
    for limit in (2, None):
        args = ["--delivery-limit", str(limit)] if limit else []
        d = run_exp(stack, tmp_path, "share-poison", "--messages", "40", "--partitions", "2", "--workers", "2", *args)
        out = tmp_path / "report"
        crashes = crashlog.read(out / "crash-log.jsonl")
        poison = CrashPlan.load(out / "crash-plan.json").crash_ids
        want = limit or DELIVERY_LIMIT
        assert len(poison) == 4 and {x["message_id"] for x in crashes} <= poison
        # each delivery of a poison payment ended in a death (its own, or a poll-mate poison's before it reached
        # it), up to the limit, and its last death held it at the limit: archived, lost
        for i in poison:
            counts = sorted(x["held"][i][2] for x in crashes if i in x["held"])
            assert counts == list(range(1, want + 1))
        archived_ids = {i for x in crashes for i in archived(x, want)}
        assert poison <= archived_ids
        assert d["counts"]["lost"] == d["predicted"]["lost"] == len(archived_ids)
        assert set(d["anomalies"]["lost_ids"]) == archived_ids
        assert f"archived at delivery {want} " in d["predicted"]["note"]
        (tmp_path / "report").rename(tmp_path / f"limit-{want}")


def test_share_release_redelivers_the_released_and_loses_the_rejected(stack, tmp_path):
    d = run_exp(stack, tmp_path, "share-release", "--messages", "100", "--partitions", "2", "--workers", "2")
    out = tmp_path / "report"
    kinds = error_kinds(CrashPlan.load(out / "crash-plan.json").crash_ids)
    rejected = {i for i, k in kinds.items() if k == PERMANENT}
    assert len(rejected) == 5 and list(kinds.values()).count(TRANSIENT) == 5 and not d["crashes"]
    c = d["counts"]
    assert c["lost"] == d["predicted"]["lost"] == 5 and c["duplicates"] == 0
    assert set(d["anomalies"]["lost_ids"]) == rejected
    assert d["ledger"]["actual_total"] < d["ledger"]["expected_total"]
    events = [json.loads(line) for line in (out / "events.jsonl").read_text().splitlines()]
    records = {v: [r for e in events if e["event"] == v for r in e["records"]] for v in ("released", "rejected",
                                                                                        "accepted")}
    # each transient error RELEASEd its record at its first delivery; it came back at delivery 2 and was ACCEPTed
    assert len(records["released"]) == 5 and all(dc == 1 for _, _, dc in records["released"])
    again = {(p, o) for p, o, _ in records["released"]}
    assert {(p, o) for p, o, dc in records["accepted"] if dc == 2} == again
    assert len(records["rejected"]) == 5 and len(records["accepted"]) == 95
    assert "5 record(s) released" in d["predicted"]["note"] and "5 record(s) rejected" in d["predicted"]["note"]


def _java_members(out) -> None:
    """Every crash record and event of the run is a Java member's (its JVMs, not Python workers)."""
    crashes = crashlog.read(out / "crash-log.jsonl")
    assert crashes and all(c["client"] == "java" for c in crashes)


def test_java_share_consumers_duplicate_each_crash_between_effect_and_accept(stack, tmp_path):
    """--client java: the same loop on Kafka's KafkaShareConsumer, judged by the same predictors (about 25 s
    with its jar built; the first build of the session adds its mvn time)."""
    d = run_exp(stack, tmp_path, "share-ack-after", "--client", "java", "--messages", "30", "--partitions", "2",
                "--workers", "2")
    out = tmp_path / "report"
    _java_members(out)
    crashes = crashlog.read(out / "crash-log.jsonl")
    assert len(crashes) == 3 and all(x["point"] == "after-effect-before-accept" for x in crashes)
    assert all(x["held"][x["message_id"]][:2] == [x["partition"], x["offset"]] for x in crashes)
    again = [x for x in crashes if x["message_id"] not in _archived_ids(out)]
    assert d["counts"]["duplicates"] == d["predicted"]["duplicates"] == len(again) > 0 and d["counts"]["lost"] == 0
    events = [json.loads(line) for line in (out / "events.jsonl").read_text().splitlines()]
    accepted = [r for e in events if e["event"] == "accepted" for r in e["records"]]
    assert len({(p, o) for p, o, _ in accepted}) == 30
    assert {(x["partition"], x["offset"]) for x in again} <= {(p, o) for p, o, dc in accepted if dc > 1}
    assert d["share_consumer"]["client"] == "java" and d["share_consumer"]["status"].startswith("GA")


@pytest.mark.slow
def test_java_share_consumers_lose_before_accept_dedupe_exactly_and_archive_poison(stack, tmp_path):
    """The other three on the Java client (about 2 minutes): ACCEPT before the effect loses each crashed
    payment, the dedupe table makes the same crashes harmless, a poison payment is archived at the limit."""
    d = run_exp(stack, tmp_path, "share-ack-before", "--client", "java", "--messages", "60", "--partitions", "2",
                "--workers", "2")
    _java_members(tmp_path / "report")
    lost = {x["message_id"] for x in crashlog.read(tmp_path / "report" / "crash-log.jsonl")}
    assert d["counts"]["lost"] == d["predicted"]["lost"] >= len(lost) == 6 and d["counts"]["duplicates"] == 0
    (tmp_path / "report").rename(tmp_path / "before")
    d = run_exp(stack, tmp_path, "share-dedupe", "--client", "java", "--messages", "60", "--partitions", "2",
                "--workers", "2", "--kill-point", "any")
    _java_members(tmp_path / "report")
    assert (d["counts"]["lost"], d["counts"]["duplicates"]) == (0, 0)
    assert d["counts"]["dedupe_hits"] == d["predicted"]["dedupe_hits"]
    (tmp_path / "report").rename(tmp_path / "dedupe")
    d = run_exp(stack, tmp_path, "share-poison", "--client", "java", "--messages", "50", "--partitions", "2",
                "--workers", "2", "--crash-rate", "0.02")
    out = tmp_path / "report"
    _java_members(out)
    poison = {x["message_id"] for x in crashlog.read(out / "crash-log.jsonl")}
    assert len(poison) == 1 and poison <= _archived_ids(out)
    assert d["counts"]["lost"] == d["predicted"]["lost"] >= 1
    assert len(crashlog.read(out / "crash-log.jsonl")) <= DELIVERY_LIMIT       # at most one death per delivery


def test_share_poison_with_a_dead_letter_topic_is_dead_lettered_there_not_lost(stack, tmp_path):
    """--dead-letter on (Kafka 4.4, KIP-1191): the broker writes each record a death left at the delivery-count limit
    to the run's own dead-letter topic; the audit counts those payments dead-lettered, none lost, and `harness audit`
    recounts them from the topic (14 s at a load average of 18; 33 s at 37)."""
    from confluent_kafka import Consumer, TopicPartition
    from tests import kafka_login
    from tests.conftest import harness
    d = run_exp(stack, tmp_path, "share-poison", "--dead-letter", "on", "--delivery-limit", "2", "--messages", "20",
                "--partitions", "2", "--workers", "2")
    out = tmp_path / "report"
    crashes = crashlog.read(out / "crash-log.jsonl")
    archived_ids = {i for x in crashes for i in archived(x, 2)}
    poison = CrashPlan.load(out / "crash-plan.json").crash_ids
    c = d["counts"]
    assert c["dead_lettered"] == d["predicted"]["dead_lettered"] >= len(poison) == 2
    assert c["lost"] == d["predicted"]["lost"] == 0 and d["ledger"]["actual_total"] < d["ledger"]["expected_total"]
    section = d["dead_letter"]
    assert section["topic"] == f"harness.{d['run_id']}.dlq" and section["error"] is None
    assert section["topic"] in d["stack"]["topics"] and section["awaited_missing"] == []
    # every poison payment among them (fewer than 20: all named), each archived by a death at the limit
    assert poison <= {x["message_id"] for x in section["dead_lettered"]} <= archived_ids
    assert len(section["dead_lettered"]) == min(c["dead_lettered"], 20)
    assert all(x["delivery_count"] == 2 and "delivery count exceeded" in x["reason"] for x in section["dead_lettered"])
    # read as an outsider would: the dead letters' headers name the input records, and the broker copied their keys
    r = Consumer(kafka_login.config(stack["bootstrap_servers"], {"group.id": f"t-{d['run_id']}", "log_level": 0}))
    r.assign([TopicPartition(section["topic"], 0, 0)])
    seen, keys, deadline = set(), {}, time.monotonic() + 30
    while len(seen) < section["records"] and time.monotonic() < deadline:
        for m in r.consume(100, timeout=0.5):
            if not m.error():
                h = dict(m.headers())
                place = (int(h["__dlq.errors.partition"]), int(h["__dlq.errors.offset"]))
                seen.add(place)
                if m.key() is not None:         # the broker's copy of the record (headers alone when it could not)
                    keys[place] = m.key().decode()
    r.close()
    named = {(x["partition"], x["offset"]): x["message_id"] for x in section["dead_lettered"]}
    assert set(named) <= seen and all(keys.get(p, i) == i for p, i in named.items())
    assert all(tuple(x["held"][i][:2]) == p for x in crashes for p, i in named.items() if i in x["held"])
    audit = harness("audit", str(out), env=stack["env"])
    assert audit.returncode == 0 and "dead-letter topic" in audit.stdout, audit.stdout + audit.stderr
