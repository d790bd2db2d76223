"""The transactions still open at the end that the harness's stop left are excused by identity, not count.

Hand-made report data: a hanging partition's witness (who holds it open) against the stop's entries for
the workers it SIGKILLed (their transactional.ids, worker and attempt).
"""

from harness.checker.hanging_witness import holders
from harness.checker.open_transactions import parse_list
from harness.reporting.run_report import RunReport
from harness.reporting.stop_excuse import left_open_by_stop, stop_excuses, unexcused
from harness.reporting.summary import compose
from tests.unit.sample_report import sample, validate


def stopped(*witnesses, count=None, experiment="eos", killed=None):
    d = sample(experiment, verdict="interrupted")
    d["verdict_detail"]["killed_at_stop"] = killed if killed is not None else [
        {"worker": "w0", "attempt": 3, "pid": 11, "time": 1.0, "transactional_ids": ["run-x-w0"]}]
    d["anomaly_classes"] = {"history": {"operations": 4, "processes": 1, "bad_lines": 0, "problems": []}, "classes": {
        "hanging-transaction": {"count": len(witnesses) if count is None else count, "allowed": False,
                                "meaning": "a transaction still open at the end", "witnesses": list(witnesses),
                                "unchecked": None}}}
    validate(d)
    return d


def told(d) -> str:
    sentence, detail = compose(d)
    return " ".join([sentence, *detail])


def row(d) -> tuple:
    return next(r for r in RunReport(d).anomaly_class_rows() if r[0] == "hanging-transaction")


def open_by(partition, offset, **producer):
    return {"partition": partition, "offset": offset, "last_stable_offset": offset, "high_watermark": offset + 3,
            "producers": [{"producer_id": 4000 + partition, "producer_epoch": 0, "transaction_start_offset": offset,
                           "last_timestamp": 1, "transactional_id": None, "first_record_writer": None, **producer}]}


def test_a_transaction_held_by_the_transactional_id_of_a_worker_the_stop_killed_is_the_stops():
    d = stopped(open_by(1, 40, transactional_id="run-x-w0"))
    (e,) = stop_excuses(d)
    assert e["excused"] and e["partition"] == 1 and e["offset"] == 40
    assert e["why"] == ("from offset 40 (producer id 4001, transactional.id run-x-w0): the transactional.id of w0 "
                        "attempt 3, killed by the stop")
    assert (left_open_by_stop(d), unexcused(d)) == (1, 0) and not e["unrestarted"]
    assert "Forbidden anomalies" not in told(d) and "partition 1 offset 40" in told(d)
    assert "tied to workers it SIGKILLed (partition" in told(d)     # no worker whose crash it left
    assert row(d)[1] == "the harness's stop (not an anomaly)" and "the stop's" in row(d)[4]


def test_one_the_stop_killed_a_worker_beside_but_nothing_ties_is_the_systems_with_its_owner_unknown():
    """The count alone excused this: 1 hanging, 1 worker killed. A custom consumer's own transaction, with no
    transactional.id listed and no writer named, is the system's."""
    d = stopped(open_by(0, 12), experiment="custom",
                killed=[{"worker": "w0", "attempt": 2, "pid": 9, "time": 1.0}])
    (e,) = stop_excuses(d)
    assert not e["excused"] and "owner unknown" in e["why"] and "from offset 12 (producer id 4000)" in e["why"]
    assert (left_open_by_stop(d), unexcused(d)) == (0, 1)
    assert "Forbidden anomalies: hanging-transaction (1)" in told(d)
    assert "tied to no worker the stop killed" in told(d)
    assert row(d)[1] == "forbidden" and "not the stop's" in row(d)[4] and "owner unknown" in row(d)[4]


def test_a_transactional_id_or_writer_the_stop_did_not_kill_is_named_and_not_excused():
    d = stopped(open_by(0, 5, transactional_id="someone-else"), open_by(1, 6, first_record_writer="w0/2"))
    a, b = stop_excuses(d)
    assert not a["excused"] and "transactional.id someone-else): not a worker the stop killed" in a["why"]
    assert not b["excused"] and "first record by w0/2, not a worker the stop killed" in b["why"]   # attempt 3 was


def test_the_first_records_writer_ties_it_when_no_transactional_id_is_listed():
    d = stopped(open_by(0, 5, first_record_writer="w0/3"))
    (e,) = stop_excuses(d)
    assert e["excused"] and "its first record names w0/3" in e["why"]


def test_a_partition_is_the_stops_only_when_every_transaction_open_on_it_is():
    w = open_by(0, 5, transactional_id="run-x-w0")
    w["producers"].append({"producer_id": 77, "transaction_start_offset": 9, "transactional_id": None,
                           "first_record_writer": None})
    d = stopped(w, open_by(1, 8, transactional_id="run-x-w0"))
    a, b = stop_excuses(d)
    assert not a["excused"] and b["excused"]
    assert "Forbidden anomalies: hanging-transaction (1)" in told(d)
    assert row(d)[1] == "forbidden (1 of them the harness's stop)"


def test_with_its_producers_unknown_the_record_at_the_last_stable_offset_can_still_tie_it():
    w = {"partition": 2, "offset": 30, "writer": "w0/3", "producers": None, "producers_unknown": "no jars here"}
    (e,) = stop_excuses(stopped(w))
    assert e["excused"] and "no jars here" in e["why"]
    (e,) = stop_excuses(stopped({**w, "writer": None}))
    assert not e["excused"] and "owner unknown" in e["why"]


def test_partitions_the_witnesses_leave_out_are_not_excused_and_nothing_is_without_a_stop():
    d = stopped(open_by(0, 5, transactional_id="run-x-w0"), count=3)
    assert (left_open_by_stop(d), unexcused(d)) == (1, 2)
    none = stopped(open_by(0, 5, transactional_id="run-x-w0"), killed=[])
    assert stop_excuses(none) == [] and unexcused(none) == 1
    unknown = stopped(count=None)
    unknown["anomaly_classes"]["classes"]["hanging-transaction"]["count"] = None
    assert unexcused(unknown) is None and stop_excuses(unknown) == []


def test_the_witness_names_the_transactional_id_and_the_writer_of_each_first_record():
    tags = {(1, 40): ("w0/3", 9), (1, 44): ("w1/2", 4)}
    got = holders([{"producer_id": 5, "producer_epoch": 1, "transaction_start_offset": 40, "last_timestamp": 2,
                    "transactional_id": "run-x-w0"}, {"producer_id": 6, "transaction_start_offset": 44}], tags, 1, 40)
    assert got["writer"] == "w0/3"
    assert [(p["transactional_id"], p["first_record_writer"]) for p in got["producers"]] == [
        ("run-x-w0", "w0/3"), (None, "w1/2")]
    assert holders("no jars", None, 1, 40) == {"producers": None, "producers_unknown": "no jars"}


def test_list_names_the_transactional_id_of_each_producer_and_ignores_what_is_not_a_row():
    lines = ["log noise", "TransactionalId\tCoordinator\tProducerId\tTransactionState",
             "run-x-w0\t1\t4000\tOngoing", "bad\t1\tnot-a-number\tOngoing", "short 1", "x" * 300 + " 1 5 Ongoing",
             "other-app\t2\t4001\tCompleteCommit"]
    assert parse_list(lines) == {4000: "run-x-w0", 4001: "other-app"}
    assert parse_list([]) == {} and parse_list(["ProducerId only"]) == {}


def test_a_transaction_of_a_worker_whose_crash_the_stop_left_without_a_successor_is_the_stops():
    """Its planned crash came just before the interrupt and no successor started to fence it: the run fenced
    its transactional.id; if that failed, the transaction is still tied to it by identity."""
    d = stopped(open_by(0, 7, transactional_id="run-x-w1"), killed=[])
    d["verdict_detail"]["unrestarted_at_stop"] = [{"worker": "w1", "attempt": 2, "time": 1.0,
                                                   "transactional_ids": ["run-x-w1"], "transaction": "not fenced: x"}]
    validate(d)
    (e,) = stop_excuses(d)
    assert e["excused"] and e["why"].endswith("the transactional.id of w1 attempt 2, whose crash the stop left "
                                              "without a successor")
    assert (left_open_by_stop(d), unexcused(d)) == (1, 0)
    assert e["unrestarted"] and "tied to workers it SIGKILLed or whose crash it left without a successor" in told(d)
    # another worker's id is not excused by it
    d["verdict_detail"]["unrestarted_at_stop"][0]["transactional_ids"] = ["run-x-w0"]
    assert [x["excused"] for x in stop_excuses(d)] == [False] and unexcused(d) == 1
