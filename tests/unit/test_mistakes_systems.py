"""auto-commit, dual-write and outbox on hand-made evidence: predictors, the service audit, the declarations."""

import json

import pytest

from harness.checker.predict import predict
from harness.checker.systems import compare
from harness.checker.verdict import Evidence, judge
from harness.core.errors import HarnessError
from harness.experiments import get
from harness.experiments.auto_commit.auto_commit_loops import APPLIED_LOG
from harness.experiments.auto_commit.auto_commit_predictors import Attempt, bounds, coverage, per_kill, read_attempts
from harness.run.params import RunParams


def expectations(p):
    out = {}
    for e in p.expectations:
        out.setdefault(e.metric, set()).add((e.op, e.value))
    return out


# -- auto-commit ---------------------------------------------------------------------------------------

def test_coverage_counts_each_offset_once_per_attempt_that_applied_it():
    # attempt 1 applied 0..5 and died; the broker had committed 3: attempt 2 re-applies 3..5 and goes on to 9.
    a = [Attempt("w0", 1, {0: 0}, {0: 5}), Attempt("w0", 2, {0: 3}, {0: 9}, clean=True)]
    cover = coverage(a, {0: 10})
    assert [cover[(0, o)] for o in range(10)] == [1, 1, 1, 2, 2, 2, 1, 1, 1, 1]
    assert bounds(a, {0: 10}) == {"duplicates": [3, 4], "lost": [0, 0], "unlogged": 1}


def test_a_commit_ahead_of_the_effects_loses_what_lies_between():
    # attempt 1 applied 0..4, but poll had handed out up to 9 and the timer committed 10: 5..9 are never applied.
    a = [Attempt("w0", 1, {0: 0}, {0: 4}), Attempt("w0", 2, {0: 10}, {0: 19}, clean=True)]
    assert bounds(a, {0: 20}) == {"duplicates": [0, 1], "lost": [4, 5], "unlogged": 1}
    assert per_kill(a) == [{"worker": "w0", "attempt": 1, "resumed_from": {"0": 10}, "last_applied": {"0": 4},
                            "redelivered": 0, "skipped": 5}]


def test_an_attempt_that_applied_nothing_in_a_partition_skips_from_its_start():
    a = [Attempt("w0", 1, {0: 0, 1: 0}, {0: 2}), Attempt("w0", 2, {0: 0, 1: 4}, {0: 3, 1: 5}, clean=True)]
    k = per_kill(a)[0]
    assert (k["redelivered"], k["skipped"]) == (3, 4)
    assert bounds(a, {0: 4, 1: 6}) == {"duplicates": [3, 4], "lost": [3, 4], "unlogged": 1}


def test_per_kill_figures_are_what_successors_read_not_the_net_damage():
    # 1 applied 0..9, commit stayed at 3; 2 re-read from 3, applied only 3..4, its commit jumped to 20;
    # 3 resumed at 20. Net: 3..4 applied twice, 5..9 once, 10..19 never.
    a = [Attempt("w0", 1, {0: 0}, {0: 9}), Attempt("w0", 2, {0: 3}, {0: 4}),
         Attempt("w0", 3, {0: 20}, {0: 29}, clean=True)]
    k = per_kill(a)
    assert [(x["redelivered"], x["skipped"]) for x in k] == [(7, 0), (0, 15)]
    b = bounds(a, {0: 30})
    assert b["duplicates"][0] == 2 and b["lost"][1] == 10
    assert sum(x["redelivered"] for x in k) >= b["duplicates"][0] and sum(x["skipped"] for x in k) >= b["lost"][1]


def test_a_clean_run_is_exact():
    assert bounds([Attempt("w0", 1, {0: 0}, {0: 9}, clean=True)], {0: 10}) == \
        {"duplicates": [0, 0], "lost": [0, 0], "unlogged": 0}


def test_attempts_are_read_from_started_events_and_the_applied_log():
    events = [{"event": "started", "worker": "w0", "attempt": 1, "offsets": {"0": 0}},
              {"event": "first_message", "worker": "w0", "attempt": 1},
              {"event": "started", "worker": "w0", "attempt": 2, "offsets": {"0": 2}},
              {"event": "started", "worker": "w1", "attempt": 1}]          # no offsets: an older worker, ignored
    lines = [{"w": "w0", "a": 1, "p": 0, "o": o} for o in range(4)] + [{"w": "w0", "a": 2, "p": 0, "o": 2},
                                                                      {"w": "w9", "a": 1, "p": 0, "o": 7}]
    got = read_attempts(events, lines, clean={("w0", 2)})
    assert [(a.worker, a.attempt, a.start, a.last, a.clean) for a in got] == \
        [("w0", 1, {0: 0}, {0: 3}, False), ("w0", 2, {0: 2}, {0: 2}, True)]


def test_auto_commit_predictor_reads_the_run_folder(tmp_path):
    (tmp_path / APPLIED_LOG).write_text("".join(json.dumps({"w": "w0", "a": a, "p": 0, "o": o}) + "\n"
                                                for a, rng in ((1, range(0, 6)), (2, range(3, 10))) for o in rng)
                                        + '{"w": "w0", "a"')               # a line cut by the kill
    events = [{"event": "started", "worker": "w0", "attempt": 1, "offsets": {"0": 0}},
              {"event": "started", "worker": "w0", "attempt": 2, "offsets": {"0": 3}},
              {"event": "done", "worker": "w0", "attempt": 2}]
    kill = {"point": "random", "message_id": None, "time": 1.0, "worker": "w0", "attempt": 1, "by": "supervisor"}
    positions = {f"pay-{i:06d}": (0, i - 1) for i in range(1, 11)}
    p = predict(get("auto-commit"), [kill], events=events, run_dir=tmp_path, positions=positions)
    assert expectations(p) == {"ledger.duplicates": {("<=", 4), (">=", 3)}, "ledger.lost": {("<=", 0), (">=", 0)}}
    assert p.range("ledger.duplicates") == [3, 4] and not p.exact
    assert p.evidence[0]["redelivered"] == 3
    assert judge(p, {"ledger.duplicates": 4, "ledger.lost": 0}).verdict == "as-predicted"
    assert judge(p, {"ledger.duplicates": 2, "ledger.lost": 0}).verdict == "unexpected"
    assert judge(p, {"ledger.duplicates": 5, "ledger.lost": 0}).verdict == "unexpected"


def test_auto_commit_interval_is_its_own_option():
    RunParams("auto-commit", auto_commit_interval_ms=100).validate()
    with pytest.raises(HarnessError, match="applies to auto-commit only"):
        RunParams("offset-after", auto_commit_interval_ms=100).validate()
    with pytest.raises(HarnessError, match="between 1 and"):
        RunParams("auto-commit", auto_commit_interval_ms=0).validate()
    with pytest.raises(HarnessError, match="--kill-point applies to planned crashes"):
        RunParams("auto-commit", kill_point="after-poll").validate()
    with pytest.raises(HarnessError, match="--commit-every does not apply to auto-commit"):
        RunParams("auto-commit", commit_every=5).validate()
    assert get("auto-commit").default_faults == ("random-kill",)


# -- dual-write and outbox --------------------------------------------------------------------------------

def crash(msg, point, worker="service-0", **lists):
    return {"point": point, "message_id": msg, "time": 1.0, "worker": worker, "attempt": 1,
            **{k: list(v) for k, v in lists.items()}}


def test_dual_write_row_first_loses_the_event_of_each_crash():
    p = predict(get("dual-write"), [crash("b", "after-row-before-produce", acked_unapplied=["b"], row_only=["b"]),
                                    crash("d", "after-accept-before-row", acked_unapplied=["d"]),
                                    crash("f", "after-produce")])
    e = expectations(p)
    assert e["events.unpublished"] == {("==", 1)} and e["events.orphaned"] == {("==", 0)}
    assert e["ledger.lost"] == {("==", 2)} and e["events.duplicates"] == {("==", 0)}
    assert p.lost_ids == {"b", "d"} and p.id_sets["events.unpublished"] == {"b"} and not p.inconsistent


def test_dual_write_event_first_is_a_variant_chosen_by_its_kill_points():
    params = RunParams("dual-write", kill_point="after-produce-before-row")
    exp = get("dual-write").resolve(params)
    assert exp.variant == "kill_point=after-produce-before-row" and exp.steps[1] == "produce the event"
    assert get("dual-write").with_variant(exp.variant).point_names() == exp.point_names()
    p = predict(exp, [crash("b", "after-produce-before-row", event_only=["b"])])
    assert expectations(p)["events.orphaned"] == {("==", 1)} and expectations(p)["ledger.lost"] == {("==", 0)}
    assert get("dual-write").resolve(RunParams("dual-write")).variant == ""


def test_outbox_relay_crash_is_a_topic_duplicate_and_a_downstream_dedupe_hit():
    p = predict(get("outbox"), [crash("b", "relay-after-publish-before-mark", worker="relay-0", republished=["b"]),
                                crash("c", "after-txn-before-commit")])
    e = expectations(p)
    assert e["events.duplicates"] == {("==", 1)} and e["ledger.dedupe_hits"] == {("==", 1)}
    assert e["ledger.duplicates"] == {("==", 0)} and e["outbox.unsent"] == {("==", 0)}
    assert p.hit_counts == {"b": 1}


def test_a_crash_record_listing_a_damage_its_point_does_not_declare_is_inconsistent():
    p = predict(get("outbox"), [crash("b", "after-commit", row_only=["b"])])
    assert p.inconsistent and "row_only" in p.inconsistent[0]


def test_random_kills_bound_only_what_the_experiment_can_do():
    kill = {"point": "random", "message_id": None, "time": 1.0, "worker": "service-0", "by": "supervisor"}
    e = expectations(predict(get("dual-write"), [kill, kill]))
    assert e["events.unpublished"] == {("<=", 2)} and e["events.orphaned"] == {("==", 0)}


def test_service_audit_compares_rows_events_and_outbox_by_id():
    amounts = {"a": 100, "b": 100, "c": 100, "d": 100}
    ev = lambda k, amount=100: (k, json.dumps({"id": k, "amount": amount}).encode())   # noqa: E731
    a = compare(amounts, ["a", "b", "c"], [ev("a"), ev("a"), ev("c"), ev("d"), ev("b", 7)],
                [("a", True), ("b", True), ("c", False)])
    assert (a.rows, a.events, a.unpublished, a.orphaned, a.event_duplicates, a.outbox_rows, a.outbox_unsent) == \
        (3, 5, 0, 1, 1, 3, 1)
    assert a.ids["events.orphaned"] == ["d"] and a.ids["events.duplicates"] == ["a"]
    assert a.ids["outbox.unsent"] == ["c"]
    assert any("does not match" in t and ids == ["b"] for t, ids in a.integrity)


def test_service_audit_leaves_unreadable_stores_unknown():
    a = compare({"a": 1}, None, [("a", b'{"id": "a", "amount": 1}')])
    assert (a.rows, a.unpublished, a.orphaned, a.events, a.event_duplicates) == (None, None, None, 1, 0)
    assert a.metrics()["events.unpublished"] is None


def test_exact_id_sets_are_judged_id_by_id():
    p = predict(get("dual-write"), [crash("b", "after-row-before-produce", acked_unapplied=["b"], row_only=["b"])])
    observed = {"ledger.duplicates": 0, "ledger.lost": 1, "ledger.dedupe_hits": 0, "events.unpublished": 1,
                "events.orphaned": 0, "events.duplicates": 0}
    ok = judge(p, observed, Evidence(ids={"events.unpublished": ["b"]}))
    bad = judge(p, observed, Evidence(ids={"events.unpublished": ["c"]}))
    assert ok.verdict == "as-predicted"
    assert bad.verdict == "unexpected" and bad.differing_ids["events.unpublished"] == ["b", "c"]


def test_every_new_experiment_is_in_the_mistakes_group_with_a_lesson():
    for name in ("auto-commit", "dual-write", "outbox"):
        exp = get(name)
        assert exp.suite["group"] == "mistakes" and exp.lesson.startswith("Mistake")


def test_a_report_with_a_service_and_evidence_follows_the_schema_and_renders():
    from harness.reporting import html, markdown
    from harness.reporting.run_report import RunReport
    from tests.unit.sample_report import sample, validate
    d = sample("outbox", lost=0, dups=0)
    d["lesson"] = "Mistake: the dual write. Fix: the outbox."
    d["stack"].update(tables=["harness.ledger_x", "harness.rows_x"], topics=["harness.x.input", "harness.x.events"],
                      consumer_groups=["harness-x", "harness-x-downstream"])
    d["service"] = {"rows": 10, "events": 12, "unpublished": 0, "orphaned": 0, "event_duplicates": 2,
                    "outbox_rows": 10, "outbox_unsent": 0, "unpublished_ids": [], "orphaned_ids": [],
                    "duplicate_event_ids": ["pay-000003", "pay-000007"]}
    d["predicted"].update(ranges={"duplicates": [1, 3]}, service={"unpublished": 0, "orphaned": 0,
                                                                  "event_duplicates": 2, "outbox_unsent": 0},
                          evidence=[{"worker": "w0", "attempt": 1, "resumed_from": {"0": 4},
                                     "last_applied": {"0": 6}, "redelivered": 3, "skipped": 0}])
    validate(d)
    r = RunReport(d)
    rows = {m: (o, p) for m, _store, o, p in r.scoreboard()}
    assert rows["duplicate events in the topic"] == ("2", "2") and rows["duplicates"][1] == "1 to 3"
    md = markdown.render(r)
    assert "**Lesson:** Mistake: the dual write" in md and "`harness.x.events`" in md
    assert "| w0 | 1 | 0: 6 | 0: 4 | 3 | 0 |" in md and "extra copies of events in the topic (2)" in md
    assert "What each kill cost" in html.render(r) and "Lesson:" in html.render(r)


def test_a_worker_whose_parent_died_while_it_started_dies_at_once():
    """PR_SET_PDEATHSIG covers only a parent that dies after the request: a worker whose supervisor was
    killed while the worker was starting must notice it has another parent now, and die."""
    import os
    import signal
    import subprocess
    import sys
    code = "from harness.core.procs import die_with_parent; die_with_parent(); print('alive')"
    from tests.conftest import ROOT
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    orphan = subprocess.run([sys.executable, "-c", code], env={**env, "HARNESS_PARENT_PID": "1"},
                            capture_output=True, text=True, timeout=60)
    assert orphan.returncode == -signal.SIGKILL and "alive" not in orphan.stdout
    child = subprocess.run([sys.executable, "-c", code], env={**env, "HARNESS_PARENT_PID": str(os.getpid())},
                           capture_output=True, text=True, timeout=60)
    assert child.returncode == 0 and "alive" in child.stdout
