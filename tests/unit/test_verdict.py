"""The verdict on hand-made observations: each check, and a case where each one must fail."""

from harness.checker.effects import count_effects, integrity, split_missing
from harness.checker.kafka_output import audit_records
from harness.checker.predict import predict
from harness.checker.verdict import Evidence, judge
from harness.experiments import get

AMOUNTS = {"a": 100, "b": 100, "c": 100, "d": 100, "e": 100}


def crash(msg, point, **lists):
    return {"point": point, "message_id": msg, "time": 1.0, "worker": "w0", "attempt": 1, **lists}


def offset_after(unacked=("b",)):
    return predict(get("offset-after"), [crash("b", "after-effect-before-commit", unacked=list(unacked))])


def test_counts_on_a_hand_made_ledger():
    c = count_effects(list(AMOUNTS), ["a", "b", "b", "b", "d", "e", "zz"])
    assert (c.effects, c.duplicates, c.lost, c.unexpected) == (7, 2, 1, 1)
    assert c.duplicate_ids == ["b"] and c.lost_ids == ["c"] and c.unexpected_ids == ["zz"]


def test_as_predicted_when_every_number_and_id_agrees():
    v = judge(offset_after(), {"ledger.duplicates": 1, "ledger.lost": 0},
              Evidence(ledger_per_id={"b": 2}, ledger_lost_ids=[]))
    assert v.verdict == "as-predicted" and not v.failed


def test_the_right_count_on_the_wrong_ids_is_unexpected():
    v = judge(offset_after(), {"ledger.duplicates": 1, "ledger.lost": 0},
              Evidence(ledger_per_id={"c": 2}, ledger_lost_ids=[]))
    assert v.verdict == "unexpected" and v.differing_ids["duplicates"] == ["b", "c"]


def test_offset_before_names_the_lost_ids_that_differ():
    p = predict(get("offset-before"), [crash("b", "after-commit-before-effect", acked_unapplied=["b", "c"])])
    v = judge(p, {"ledger.lost": 2, "ledger.duplicates": 0}, Evidence(ledger_per_id={}, ledger_lost_ids=["b", "d"]))
    assert v.verdict == "unexpected" and v.differing_ids["lost"] == ["c", "d"]


def test_a_wrong_amount_is_unexpected_and_named():
    rows = [("a", 100), ("b", 100), ("b", 100), ("c", 250), ("d", 100), ("e", 100)]
    integ = integrity(AMOUNTS, rows)
    assert integ.wrong_amount_ids == ["c"] and integ.actual_total == 750 and integ.total_from_counts == 600
    v = judge(offset_after(), {"ledger.duplicates": 1, "ledger.lost": 0},
              Evidence(ledger_per_id={"b": 2}, ledger_lost_ids=[], integrity=integ.failures("ledger")))
    assert v.verdict == "unexpected"
    assert any(f.startswith("ledger amounts: 1 id(s)") for f in v.failed)
    assert "ledger total: 750 is not expected + duplicated - lost amounts (600)" in v.failed
    assert v.differing_ids["ledger amounts"] == ["c"] and v.differing_totals["ledger amounts"] == 1


def test_an_effect_for_an_id_never_sent_is_unexpected_and_named():
    integ = integrity(AMOUNTS, [(i, 100) for i in AMOUNTS] + [("pay-999999", 100)])
    assert integ.unexpected_ids == ["pay-999999"]
    v = judge(predict(get("dedupe"), []), {"ledger.duplicates": 0, "ledger.lost": 0, "ledger.dedupe_hits": 0},
              Evidence(ledger_per_id={}, ledger_lost_ids=[], integrity=integ.failures("ledger")))
    assert v.verdict == "unexpected" and v.differing_ids["ledger ids never sent"] == ["pay-999999"]


def test_a_total_off_with_correct_rows_cannot_happen_but_would_be_caught():
    integ = integrity(AMOUNTS, [("a", 100)])
    assert integ.failures("ledger") == []
    integ.actual_total += 1
    assert "total" in integ.failures("ledger")[0][0]


def test_output_records_are_checked_against_their_input():
    good = [(i, f'{{"id": "{i}", "amount": 100, "worker": "w0"}}'.encode()) for i in AMOUNTS]
    bad = good[:3] + [("d", b'{"id": "d", "amount": 999}'), ("e", b'{"id": "x", "amount": 100}'), ("zz", b"{}")]
    a = audit_records(list(AMOUNTS), {"read_committed": bad, "read_uncommitted": bad}, amounts=AMOUNTS)
    assert a["read_committed"]["bad_value_ids"] == ["d", "e"]       # zz is counted apart: never sent
    assert a["read_committed"]["unexpected_ids"] == ["zz"]
    assert audit_records(list(AMOUNTS), {"read_committed": good, "read_uncommitted": good},
                         amounts=AMOUNTS)["read_committed"]["bad_value_ids"] == []


def test_a_metric_that_was_not_measured_fails_the_audit_not_the_prediction():
    v = judge(predict(get("dedupe"), []), {"ledger.duplicates": None, "ledger.lost": None},
              Evidence(errors=["ledger: connection refused"]))
    assert v.verdict == "audit-failed"
    assert "ledger.duplicates: not measured" in v.failed and "audit error: ledger: connection refused" in v.failed


def test_a_failed_expectation_names_its_ids():
    p = predict(get("eos"), [])
    v = judge(p, {"kafka.read_committed.duplicates": 0, "kafka.read_committed.lost": 2,
                  "kafka.read_uncommitted.duplicates": 0, "kafka.read_uncommitted.lost": 2},
              Evidence(ids={"kafka.read_committed.lost": ["c", "d"]}))
    assert v.verdict == "unexpected" and v.differing_ids["kafka.read_committed.lost"] == ["c", "d"]


def test_inconsistent_crash_records_make_the_verdict_unexpected():
    p = predict(get("offset-before"), [crash("b", "after-poll-before-commit", unacked=["a"])])
    v = judge(p, {"ledger.duplicates": 0, "ledger.lost": 0}, Evidence(ledger_per_id={}, ledger_lost_ids=[]))
    assert v.verdict == "unexpected"


def test_missing_ids_past_the_committed_offset_are_unprocessed_not_lost():
    positions = {"a": (0, 0), "b": (0, 1), "c": (1, 0), "d": (1, 1)}
    lost, unprocessed = split_missing(["b", "c", "d"], positions, {0: 2, 1: 1})
    assert lost == ["b", "c"] and unprocessed == ["d"]
    assert split_missing(["b"], positions, None) == (["b"], [])


def test_ids_are_counted_once_and_in_full_beyond_the_cap():
    ghosts = [(f"ghost-{i:02d}", 100) for i in range(30)]
    wrong = [(i, 0) for i in AMOUNTS]
    integ = integrity(AMOUNTS, wrong + ghosts + ghosts[:5])
    v = judge(predict(get("dedupe"), []), {"ledger.duplicates": 0, "ledger.lost": 0, "ledger.dedupe_hits": 0},
              Evidence(ledger_per_id={}, ledger_lost_ids=[], integrity=integ.failures("ledger")))
    assert v.differing_totals["ledger ids never sent"] == 30 and len(v.differing_ids["ledger ids never sent"]) == 20
    assert v.differing_totals["ledger amounts"] == 5
    assert len(set(v.differing_ids["ledger ids never sent"])) == 20


def test_aborted_copies_and_dedupe_hits_are_checked_per_id():
    p = predict(get("eos-dedupe"), [crash("b", "after-produce-before-txn-commit", unacked=["a", "b"], produced=["a", "b"])])
    obs = {"ledger.duplicates": 0, "ledger.lost": 0, "ledger.dedupe_hits": 2, "kafka.read_committed.duplicates": 0,
           "kafka.read_committed.lost": 0, "kafka.read_uncommitted.duplicates": 2, "kafka.read_uncommitted.lost": 0}
    right = Evidence(ledger_per_id={}, ledger_lost_ids=[], dedupe_hits_per_id={"a": 1, "b": 1, "c": 0},
                     uncommitted_per_id={"a": 2, "b": 2})
    assert judge(p, obs, right).verdict == "as-predicted"
    # The same counts on other ids: the aborted copy of a was removed and one of e added; c got b's hit.
    wrong = Evidence(ledger_per_id={}, ledger_lost_ids=[], dedupe_hits_per_id={"a": 1, "c": 1},
                     uncommitted_per_id={"b": 2, "e": 2})
    v = judge(p, obs, wrong)
    assert v.verdict == "unexpected"
    assert v.differing_ids["aborted copies"] == ["a", "e"] and v.differing_ids["dedupe hits"] == ["b", "c"]
