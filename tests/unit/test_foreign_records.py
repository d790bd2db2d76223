"""The run's mark on its payments (workload/signature.py) and the foreign records it tells apart
(checker/foreign.py), on hand-made records: no Kafka."""

from types import SimpleNamespace

from harness.checker import foreign
from harness.checker.observe import observe_run
from harness.checker.verdict import judge
from harness.checker.predict import Prediction
from harness.workload import signature

SECRET = b"k" * 32


def _mark(key, value, secret=SECRET):
    return signature.headers(secret, key, value)


def test_a_record_the_run_marked_is_its_own_and_any_change_breaks_the_mark():
    key, value = b"pay-000001", b'{"id": "pay-000001", "amount": 100, "seq": 1}'
    assert signature.signed(SECRET, key, value, _mark(key, value))
    assert not signature.signed(SECRET, key, value, None), "no header"
    assert not signature.signed(SECRET, key, value.replace(b"100", b"900"), _mark(key, value)), "value changed"
    assert not signature.signed(SECRET, b"pay-000002", value, _mark(key, value)), "key changed"
    assert not signature.signed(b"x" * 32, key, value, _mark(key, value)), "another run's secret"
    assert not signature.signed(SECRET, key, value, [(signature.HEADER, b"\0" * 32)]), "a forged header"
    assert not signature.signed(SECRET, None, b"a", _mark(b"", b"a")), "a missing key is not an empty one"
    assert not signature.signed(SECRET, b"ab", b"c", _mark(b"a", b"bc")), "where the key ends counts"
    assert signature.signed(SECRET, key, value, [("other", b"x"), *_mark(key, value)])


def test_unmarked_records_are_foreign_with_their_place_key_and_id():
    mine = foreign.unsigned(SECRET, 0, 7, b"pay-000007", b"{}", _mark(b"pay-000007", b"{}"))
    assert mine is None
    r = foreign.unsigned(SECRET, 2, 41, b"forged\x1b[31m\nkey", b'{"id": "pay-000003", "amount": 1}', None)
    assert (r.partition, r.offset, r.key, r.id) == (2, 41, "forged\x1b[31m\nkey", "pay-000003")
    text, places = foreign.tally([r]).failure()
    assert "partition 2 offset 41" in text and "who wrote them is unknown to the run" in text
    assert "\x1b" not in text and "\n" not in text, "the key is escaped where it is shown"
    assert places == ["partition 2 offset 41 key forged\\x1b[31m\\nkey id pay-000003"]
    garbage = foreign.unsigned(SECRET, 0, 1, None, b"\xff not json", None)
    assert (garbage.key, garbage.id) == (None, None)
    assert foreign.place(garbage) == "partition 0 offset 1 key (none)"


def test_many_foreign_records_are_counted_in_full_and_named_up_to_a_bound():
    recs = [foreign.Record(p, o, f"k{o}", None) for o in range(30) for p in (1, 0)]
    f = foreign.tally(recs)
    assert f.count == 60 and len(f.records) == foreign.MAX_NAMED
    assert [(r.partition, r.offset) for r in f.records[:3]] == [(0, 0), (0, 1), (0, 2)]
    assert "the first 20 named" in f.failure()[0]
    assert foreign.tally([]).failure() is None


def _observe(found: foreign.Foreign):
    exp = SimpleNamespace(stores=SimpleNamespace(ledger=False, accounts=False, output_topic=False, output=False,
                                                 deliveries=False, events=False))
    stack = SimpleNamespace(bootstrap_servers="127.0.0.1:1", postgres_dsn="")
    names = SimpleNamespace(input_topic="harness.r.input")
    return observe_run(exp, stack, names, {}, {}, {}, True, secret=SECRET,
                       foreign_reader=lambda b, t, s, placed: found)


def test_a_foreign_record_makes_the_verdict_unexpected_and_says_who_wrote_it_is_unknown():
    a = _observe(foreign.tally([foreign.Record(0, 1000, "intruder", "pay-000001")]))
    v = judge(Prediction(exact=False), a.metrics, a.evidence)
    assert v.verdict == "unexpected"
    assert any("partition 0 offset 1000 key intruder id pay-000001" in f and "unknown to the run" in f
               for f in v.failed), v.failed
    assert a.foreign.as_dict()["records"] == [{"partition": 0, "offset": 1000, "key": "intruder", "id": "pay-000001",
                                               "copy_of": None}]


def test_an_unreadable_input_topic_is_an_audit_error_never_no_foreign_record():
    a = _observe(foreign.Foreign(None, [], "input topic harness.r.input: timed out"))
    v = judge(Prediction(exact=False), a.metrics, a.evidence)
    assert v.verdict == "audit-failed" and a.foreign.as_dict()["count"] is None
    assert _observe(foreign.Foreign(0)).evidence.integrity == []


VALUE = b'{"id": "pay-000007", "amount": 100}'


def test_a_copy_of_the_runs_own_record_elsewhere_is_foreign_and_named_with_the_original():
    """A replay: someone wrote one of the run's marked records again (same key, value and header). Its mark is
    valid, but the run's producer was acknowledged for that key at partition 1 offset 7 only."""
    placed = foreign.placements({"pay-000007": (1, 7)}, None)
    headers = _mark(b"pay-000007", VALUE)
    assert foreign.unsigned(SECRET, 1, 7, b"pay-000007", VALUE, headers, placed) is None, "the run's own"
    copy = foreign.unsigned(SECRET, 1, 212, b"pay-000007", VALUE, headers, placed)
    assert copy is not None and (copy.partition, copy.offset, copy.copy_of) == (1, 212, [1, 7])
    f = foreign.tally([copy, foreign.Record(0, 3, "forged", None)])
    assert (f.count, f.copies) == (2, 1)
    text, places = f.failure()
    assert "2 record(s) in the input topic were not written by this run's producer (1 of them copies of the " \
        "run's own records)" in text
    assert places[1] == "partition 1 offset 212 key pay-000007 (a copy of the run's record at " \
        "partition 1 offset 7)"
    assert f.as_dict()["records"][1]["copy_of"] == [1, 7]


def test_a_marked_record_the_run_was_never_acknowledged_for_is_not_called_a_copy():
    """A send a time limit cut short may still be in the log: its key has no acknowledged place, so it is the
    run's (not foreign); and without the positions nothing is called a copy."""
    headers = _mark(b"pay-000007", VALUE)
    assert foreign.unsigned(SECRET, 0, 9, b"pay-000007", VALUE, headers, foreign.placements({"pay-1": (0, 1)}, None)) \
        is None
    assert foreign.unsigned(SECRET, 0, 9, b"pay-000007", VALUE, headers, None) is None
    assert foreign.placements(None, None) is None


def test_a_request_the_run_produced_again_with_a_reused_id_is_its_own():
    """key-reuse: the run itself writes an id twice (another amount), each acknowledged at its own place."""
    from harness.workload.reused_payments import Reused
    placed = foreign.placements({"pay-000007": (0, 7)}, {"pay-000007": Reused("pay-000007", 5, 0, 300)})
    again = b'{"id": "pay-000007", "amount": 5}'
    assert foreign.unsigned(SECRET, 0, 300, b"pay-000007", again, _mark(b"pay-000007", again), placed) is None
    assert foreign.unsigned(SECRET, 0, 301, b"pay-000007", again, _mark(b"pay-000007", again), placed).copy_of \
        == [0, 7]


def test_the_audit_hands_the_reader_every_place_the_run_was_acknowledged_for():
    from harness.workload.reused_payments import Reused
    seen = {}
    exp = SimpleNamespace(stores=SimpleNamespace(ledger=False, accounts=False, output_topic=False, output=False,
                                                 deliveries=False, events=False))
    observe_run(exp, SimpleNamespace(bootstrap_servers="127.0.0.1:1", postgres_dsn=""),
                SimpleNamespace(input_topic="harness.r.input"), {}, {"a": (0, 1), "b": (1, 4)}, {}, True,
                reused={"a": Reused("a", 3, 0, 9)}, secret=SECRET,
                foreign_reader=lambda b, t, s, placed: seen.update(placed=placed) or foreign.Foreign(0))
    assert seen["placed"] == {"a": {(0, 1), (0, 9)}, "b": {(1, 4)}}
