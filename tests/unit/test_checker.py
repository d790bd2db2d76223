"""Checker and predictions on hand-made ledgers and crash logs."""

from harness.checker.effects import count_effects
from harness.checker.predict import predict, judge
from harness.faults import crashlog

SENT = ["a", "b", "c", "d", "e"]


def crash(msg, unacked, point="p"):
    return {"point": point, "message_id": msg, "unacked": unacked, "time": 1.0, "worker": "w0"}


def test_counts_on_a_hand_made_ledger():
    c = count_effects(SENT, ["a", "b", "b", "b", "d", "e", "zz"])
    assert (c.effects, c.duplicates, c.lost, c.unexpected) == (7, 2, 1, 1)
    assert c.duplicate_ids == ["b"] and c.lost_ids == ["c"] and c.unexpected_ids == ["zz"]
    assert c.per_id == {"b": 3}


def test_counts_never_raise_on_odd_data():
    assert count_effects([], []).effects == 0
    assert count_effects(SENT, [None, None]).lost == 5
    assert count_effects(SENT, []).lost_ids == SENT


def test_offset_before_predicts_loss_of_unacked():
    p = predict("offset-before", [crash("b", ["b", "c"])])
    v = judge(p, {"ledger.lost": 2, "ledger.duplicates": 0}, {}, ["b", "c"])
    assert v.verdict == "as-predicted"
    v = judge(p, {"ledger.lost": 2, "ledger.duplicates": 0}, {}, ["b", "d"])
    assert v.verdict == "unexpected" and v.differing_ids["lost"] == ["c", "d"]


def test_offset_after_predicts_duplicates_per_id():
    p = predict("offset-after", [crash("b", ["a", "b"]), crash("d", ["a", "d"])])
    assert p.get("ledger.duplicates").value == 4
    ok = judge(p, {"ledger.duplicates": 4, "ledger.lost": 0}, {"a": 3, "b": 2, "d": 2}, [])
    assert ok.verdict == "as-predicted"
    wrong = judge(p, {"ledger.duplicates": 4, "ledger.lost": 0}, {"a": 2, "b": 2, "d": 2, "e": 2}, [])
    assert wrong.verdict == "unexpected" and wrong.differing_ids["duplicates"] == ["a", "e"]


def test_dedupe_predicts_hits_not_duplicates():
    p = predict("dedupe", [crash("b", ["a", "b"])])
    assert judge(p, {"ledger.duplicates": 0, "ledger.lost": 0, "ledger.dedupe_hits": 2}).verdict == "as-predicted"
    v = judge(p, {"ledger.duplicates": 1, "ledger.lost": 0, "ledger.dedupe_hits": 2})
    assert v.verdict == "unexpected" and "ledger.duplicates: predicted == 0, observed 1" in v.failed


def test_eos_boundary_predicts_both_sides():
    p = predict("eos-boundary", [crash("b", ["a", "b"])])
    obs = {"ledger.duplicates": 2, "ledger.lost": 0, "kafka.read_committed.duplicates": 0,
           "kafka.read_committed.lost": 0, "kafka.read_uncommitted.duplicates": 2, "kafka.read_uncommitted.lost": 0}
    assert judge(p, obs, {"a": 2, "b": 2}, []).verdict == "as-predicted"
    assert judge(p, {**obs, "kafka.read_committed.duplicates": 1}, {"a": 2, "b": 2}, []).verdict == "unexpected"


def test_random_kills_give_bounds():
    kills = [{"point": "random", "message_id": None, "unacked": [], "time": 1.0}] * 3
    p = predict("offset-after", kills, kill_mode="random", commit_every=10)
    assert not p.exact and p.get("ledger.duplicates").op == "<=" and p.get("ledger.duplicates").value == 30
    assert judge(p, {"ledger.duplicates": 7, "ledger.lost": 0}).verdict == "as-predicted"
    assert judge(p, {"ledger.duplicates": 31, "ledger.lost": 0}).verdict == "unexpected"


def test_missing_observation_is_unexpected_not_an_exception():
    p = predict("dedupe", [])
    assert judge(p, {}).verdict == "unexpected"


def test_crash_log_skips_torn_lines(tmp_path):
    log = tmp_path / "crash-log.jsonl"
    crashlog.append(log, crash("a", ["a"]))
    with open(log, "a") as f:
        f.write('{"point": "torn')
    crashlog.append(log, crash("b", ["b"]))
    assert crashlog.crashed_ids(log) == {"a"}   # the torn line swallowed b's line start: skipped, never raised
    assert crashlog.read(tmp_path / "missing.jsonl") == []
