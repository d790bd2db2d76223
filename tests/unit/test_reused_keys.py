"""Reused keys (key-reuse, key-fingerprint) on hand-made data: the buggy client's plan, the fingerprint,
what the audit makes of each reused request, the predictor, and the audit's rows."""

import json

import pytest

from harness.checker import crosscheck
from harness.checker.predict import predict
from harness.checker.recount import ReuseRecount
from harness.checker.reused_keys import compare
from harness.experiments import get
from harness.workload import reused_payments as reuse
from harness.workload.payments import Payment, make_payments


def reused(*triples):
    """id -> Reused from (id, amount, offset) triples, all on partition 0."""
    return {i: reuse.Reused(i, a, 0, o) for i, a, o in triples}


def expectations(p):
    return {e.metric: (e.op, e.value) for e in p.expectations}


def crash(msg, unacked=()):
    return {"point": "after-effect-before-commit", "message_id": msg, "unacked": list(unacked), "acked_unapplied": [],
            "produced": [], "time": 1.0, "worker": "w0", "attempt": 1}


# -- the buggy client's plan ------------------------------------------------------------------------------
def test_the_plan_reuses_a_seeded_share_of_ids_each_with_another_amount_after_every_payment():
    pays = make_payments(1000, 100)
    again = reuse.plan(pays, 0.05, 25)
    assert len(again) == 50 and len({p.id for p in again}) == 50
    assert all(p.amount != 100 and 1 <= p.amount <= 200 for p in again)
    assert [p.seq for p in again] == list(range(1001, 1051))            # their own seq, after every payment
    assert [p.id for p in again] == sorted(p.id for p in again)         # in the payments' order
    assert reuse.plan(pays, 0.05, 25) == again and reuse.plan(pays, 0.05, 26) != again
    assert reuse.plan(pays, 0.0, 25) == [] and reuse.plan([], 0.5, 25) == []
    assert len(reuse.plan(pays, 1.0, 25)) == 1000


def test_an_amount_of_one_is_reused_with_two():
    """A payment of 1: the only other amount the draw (1..2) can give is 2."""
    again = reuse.plan(make_payments(200, 1), 1.0, 7)
    assert {p.amount for p in again} == {2}


def test_a_tiny_run_still_reuses_one_key():
    assert len(reuse.plan(make_payments(5, 100), 0.05, 25)) == 1 and reuse.plan(make_payments(5, 100), 0.0, 25) == []


def test_the_fingerprint_is_the_requests_parameters_not_its_delivery():
    a = Payment("pay-000001", 100, 1).value()
    assert reuse.fingerprint(a) == reuse.fingerprint(Payment("pay-000001", 100, 7, pad=50).value())
    assert reuse.fingerprint(a) != reuse.fingerprint(Payment("pay-000001", 101, 1).value())
    assert reuse.fingerprint(a) != reuse.fingerprint(Payment("pay-000001", 100, 1, account="acct-1").value())
    assert reuse.fingerprint(b"not json") != reuse.fingerprint(b"[1, 2]") != reuse.fingerprint(a)
    assert len(reuse.fingerprint(a)) == 32


def test_the_log_names_each_reused_request_with_where_the_broker_put_it(tmp_path):
    reuse.save(tmp_path, [reuse.Reused("pay-000002", 37, 0, 1000)])
    assert json.loads((tmp_path / reuse.FILE_NAME).read_text()) == [
        {"id": "pay-000002", "amount": 37, "partition": 0, "offset": 1000}]


# -- what the audit makes of each reused request ------------------------------------------------------------
LEDGER = [("a", 100), ("b", 100), ("c", 100)]


def test_without_a_rejects_table_every_reused_request_not_applied_is_hidden():
    a = compare(reused(("a", 7, 10), ("b", 150, 11)), LEDGER, None, has_rejects=False)
    assert (a.hidden, a.applied, a.rejected) == (2, 0, None) and a.ids["reuse.hidden"] == ["a", "b"]
    assert "reuse.rejected" not in a.metrics() and a.metrics()["reuse.hidden"] == 2


def test_a_reused_request_applied_is_applied_not_hidden():
    a = compare(reused(("a", 7, 10), ("b", 150, 11)), LEDGER + [("b", 150)], None, has_rejects=False)
    assert (a.hidden, a.applied) == (1, 1) and a.ids["reuse.applied"] == ["b"]


def test_a_reject_counts_only_with_the_reused_id_and_amount():
    a = compare(reused(("a", 7, 10), ("b", 150, 11)), LEDGER, [("a", 7), ("b", 100), ("c", 5)], has_rejects=True)
    assert (a.rejected, a.hidden, a.applied) == (3, 1, 0) and a.ids["reuse.hidden"] == ["b"]
    assert a.integrity == [("rejects: 2 id(s) rejected that are no reused request (another id or amount)",
                            ["b", "c"])]


def test_one_request_rejected_twice_is_an_integrity_failure():
    a = compare(reused(("a", 7, 10)), LEDGER, [("a", 7), ("a", 7)], has_rejects=True)
    assert a.rejected == 2 and a.hidden == 0
    assert ("rejects: 1 id(s) rejected more than once", ["a"]) in a.integrity


def test_what_could_not_be_read_is_unknown_never_zero():
    for a in (compare(reused(("a", 7, 10)), None, [], has_rejects=True),
              compare(reused(("a", 7, 10)), LEDGER, None, has_rejects=True),
              compare(reused(("a", 7, 10)), LEDGER, [], has_rejects=True, finished=False, committed=None)):
        assert a.hidden is None and a.applied is None and a.unreached is None
        assert a.metrics()["reuse.hidden"] is None and a.metrics()["reuse.rejected"] is None


def test_a_stopped_run_decides_only_the_requests_below_its_committed_offsets():
    got = compare(reused(("a", 7, 10), ("b", 150, 11), ("c", 3, 12)), LEDGER, None, has_rejects=False,
                  finished=False, committed={0: 12})
    assert (got.hidden, got.unreached) == (2, 1) and got.ids["reuse.hidden"] == ["a", "b"]
    assert got.ids["reuse.unreached"] == ["c"] and got.section(reused(("c", 3, 12)))["unreached_ids"] == ["c"]


def test_a_request_rejected_past_the_last_commit_was_reached():
    got = compare(reused(("a", 7, 10), ("b", 150, 11)), LEDGER, [("b", 150)], has_rejects=True, finished=False,
                  committed={0: 5})
    assert (got.rejected, got.hidden, got.unreached) == (1, 0, 1) and got.ids["reuse.unreached"] == ["a"]


def test_a_stopped_run_predicts_at_most_every_reused_request():
    p = predict(get("key-reuse"), [crash("a", ["a"])], reused=reused(("a", 7, 10), ("b", 150, 11)), stopped=True)
    assert expectations(p)["reuse.hidden"] == ("<=", 2) and "reuse.hidden" not in p.id_sets
    p = predict(get("key-fingerprint"), [], reused=reused(("a", 7, 10)), stopped=True)
    assert expectations(p)["reuse.rejected"] == ("<=", 1) and expectations(p)["reuse.hidden"] == ("==", 0)


def test_the_audit_counts_a_stopped_runs_unreached_requests_with_the_hidden_ones():
    section = {"reused": 3, "hidden": 1, "applied": 0, "rejected": None, "unreached": 2, "hidden_ids": ["a"],
               "unreached_ids": ["b", "c"]}
    rows = crosscheck.reuse_rows(section, ReuseRecount(3, [], ["a", "b", "c"]))
    assert rows[1].metric == "hidden (neither applied nor rejected), or not reached by the stopped run"
    assert (rows[1].reported, rows[1].recounted, rows[1].agrees, rows[1].ids) == (3, 3, True, [])


# -- the predictor ------------------------------------------------------------------------------------------
def test_the_mistake_hides_every_reused_request_and_each_finds_its_key():
    p = predict(get("key-reuse"), [crash("a", ["a"]), crash("d", ["d"])], reused=reused(("a", 7, 10), ("b", 150, 11)))
    assert expectations(p) == {"ledger.duplicates": ("==", 0), "ledger.dedupe_hits": ("==", 4),
                               "ledger.lost": ("==", 0), "reuse.applied": ("==", 0), "reuse.hidden": ("==", 2)}
    assert p.hit_counts == {"a": 2, "b": 1, "d": 1} and p.id_sets == {"reuse.hidden": {"a", "b"}}


def test_the_fix_rejects_every_reused_request_and_hides_none():
    p = predict(get("key-fingerprint"), [crash("a", ["a"])], reused=reused(("a", 7, 10), ("b", 150, 11)))
    assert expectations(p) == {"ledger.duplicates": ("==", 0), "ledger.dedupe_hits": ("==", 3),
                               "ledger.lost": ("==", 0), "reuse.rejected": ("==", 2), "reuse.applied": ("==", 0),
                               "reuse.hidden": ("==", 0)}
    assert p.id_sets == {"reuse.rejected": {"a", "b"}}


def test_with_nothing_reused_the_fix_must_reject_nothing():
    p = predict(get("key-fingerprint"), [crash("a", ["a"])], reused={})
    assert expectations(p)["reuse.rejected"] == ("==", 0) and "reuse.hidden" not in expectations(p)
    assert "reuse.hidden" not in expectations(predict(get("key-reuse"), [], reused={}))


def test_a_kill_nobody_described_bounds_the_hits_and_leaves_the_reused_requests_exact():
    kill = {"point": "random", "message_id": None, "time": 1.0, "worker": "w0", "by": "supervisor"}
    p = predict(get("key-fingerprint"), [crash("a", ["a"]), kill], reused=reused(("b", 150, 11)))
    e = expectations(p)
    assert e["ledger.dedupe_hits"] == ("<=", 3) and e["reuse.rejected"] == ("==", 1) and not p.exact


# -- the audit's rows -------------------------------------------------------------------------------------
def test_the_audit_sets_the_reports_reuse_section_beside_the_recount():
    section = {"reused": 2, "hidden": 0, "applied": 0, "rejected": 2, "hidden_ids": [], "rejected_ids": ["a", "b"]}
    rc = ReuseRecount(2, [], [], rejects=2, rejected_reused=2)
    rows = crosscheck.reuse_rows(section, rc)
    assert [r.agrees for r in rows] == [True] * 5
    rows = crosscheck.reuse_rows({**section, "hidden": 0}, ReuseRecount(2, [], ["b"], rejects=1, rejected_reused=1))
    bad = [r for r in rows if r.agrees is False]
    assert [r.metric for r in bad] == ["hidden (neither applied nor rejected)", "rejects (rows of the rejects table)",
                                       "rejects that are a reused request (id and amount)"]
    assert bad[0].ids == ["b"]


def test_the_mistakes_audit_has_no_rejects_rows():
    rows = crosscheck.reuse_rows({"reused": 1, "hidden": 1, "applied": 0, "rejected": None}, ReuseRecount(1, [], ["a"]))
    assert [r.metric for r in rows] == ["requests under a used key, another amount (input topic)",
                                       "hidden (neither applied nor rejected)", "applied (a ledger row of the other amount)"]
    assert all(r.agrees for r in rows)


@pytest.mark.parametrize("name", ["key-reuse", "key-fingerprint"])
def test_both_are_in_the_mistakes_group_with_dedupes_kill_points(name):
    exp = get(name)
    assert exp.suite["group"] == "mistakes" and exp.point_names() == get("dedupe").point_names()
    assert exp.defaults == {"reuse_rate": 0.05} and exp.stores.rejects == (name == "key-fingerprint")
