"""Jepsen's anomaly classes on hand-made histories and logs: each found where it is, and absent where it is not."""

import json

from harness.checker.anomalies import (ABORTED, COMMITTED, UNKNOWN, Logs, Process, check, sends_of)
from harness.checker.histories import parse, read, well_formed

IN, OUT = "in", "out"


def proc(*ops, worker="w0", attempt=1):
    return Process(worker, attempt, [[float(i), *op] for i, op in enumerate(ops)])


def txn(n, *sends, end="commit", p=0):
    """A transaction n with sends (offset, key), ending with `end` (None: the process died in it)."""
    ops = [("txn", "begin", n)] + [("send", OUT, p, o, k, n) for o, k in sends]
    if end == "commit":
        ops += [("txn", "committing", n), ("txn", "commit", n)]
    elif end == "abort":
        ops += [("txn", "abort", n)]
    elif end == "committing":
        ops += [("txn", "committing", n)]
    return ops


def logs(committed, uncommitted=None, concurrent=None, reached=None, open_at=None):
    c = {(p, o): k for p, o, k in committed}
    u = {(p, o): k for p, o, k in (uncommitted if uncommitted is not None else committed)}
    return Logs(c, u, {(p, o): k for p, o, k in concurrent} if concurrent is not None else None,
                reached if reached is not None else {0: max((o for _p, o in c), default=-1) + 1},
                open_at if open_at is not None else {})


def counts(found):
    return {name: f.count for name, f in found.items()}


# -- transactions' outcomes -------------------------------------------------------------------

def test_each_send_takes_its_transactions_outcome_even_when_its_report_comes_late():
    p = proc(*txn(1, (0, "a")), *txn(2, (1, "b"), end="abort"), ("send", OUT, 0, 2, "c", 2),   # late report of 2
             *txn(3, (3, "d"), end="committing"), ("txn", "begin", 4), ("send", OUT, 0, 4, "e", 4),
             ("send", OUT, 0, 5, "f", None))
    assert [(s.key, s.outcome) for s in sends_of(p)] == [
        ("a", COMMITTED), ("b", ABORTED), ("c", ABORTED), ("d", UNKNOWN), ("e", ABORTED), ("f", COMMITTED)]


# -- a clean run finds nothing ----------------------------------------------------------------

def test_a_clean_transactional_run_has_every_class_at_zero():
    p = proc(("assign", IN, {"0": 0}), ("poll", IN, {"0": [[0, 1]]}), *txn(1, (0, "a"), (1, "b")),
             ("poll", IN, {"0": [[2, 2]]}), *txn(2, (3, "c")))      # offset 2: the first transaction's marker
    found = check([p], IN, {0: [0, 1, 2]}, logs([(0, 0, "a"), (0, 1, "b"), (0, 3, "c")]))
    assert counts(found) == {c: 0 for c in ("lost-write", "duplicate", "inconsistent-offsets", "aborted-read",
                                            "poll-skip", "nonmonotonic-poll", "nonmonotonic-send", "unseen",
                                            "hanging-transaction")}


# -- each class, found with its witnesses -----------------------------------------------------

def test_lost_write_is_a_committed_write_below_what_a_reader_reached_and_never_read():
    p = proc(*txn(1, (0, "a"), (1, "b")), *txn(2, (3, "c")))
    f = check([p], IN, None, logs([(0, 0, "a"), (0, 3, "c")]))
    assert f["lost-write"].count == 1 and f["unseen"].count == 0
    w = f["lost-write"].witnesses[0]
    assert (w["id"], w["partition"], w["offset"], w["writer"]) == ("b", 0, 1, "w0/1")


def test_an_acknowledged_write_whose_offset_holds_another_record_is_lost_and_inconsistent():
    """acks=1: a leader acknowledged "b" at offset 1 and died before its followers fetched it; the new leader
    wrote "x" there. The ack names the offset, the log holds another record: the write is lost."""
    p = proc(*txn(1, (0, "a"), (1, "b")))
    f = check([p], IN, None, logs([(0, 0, "a"), (0, 1, "x")]))
    assert f["lost-write"].count == 1 and f["lost-write"].witnesses[0]["id"] == "b"
    assert f["inconsistent-offsets"].count == 1


def test_sends_acknowledged_without_offsets_leave_the_send_classes_unchecked_not_zero():
    p = proc(*txn(1, (-1, "a"), (-1, "b")))          # acks=0: every report without a place in the log
    f = check([p], IN, None, logs([(0, 0, "a")]))
    assert all(f[n].count is None and "acks=0" in f[n].unchecked for n in ("lost-write", "unseen", "nonmonotonic-send"))


def test_unseen_is_a_committed_write_beyond_where_the_final_reader_got():
    p = proc(*txn(1, (0, "a")), *txn(2, (2, "b")))
    f = check([p], IN, None, logs([(0, 0, "a")], reached={0: 2}))     # stuck at 2: an open transaction
    assert (f["unseen"].count, f["lost-write"].count) == (1, 0)
    assert f["unseen"].witnesses[0]["reached"] == 2


def test_hanging_transaction_is_a_partition_whose_last_stable_offset_stays_below_its_end():
    f = check([], IN, None, logs([(0, 0, "a")], reached={0: 1, 1: 4}, open_at={1: (4, 9)}))
    assert f["hanging-transaction"].count == 1
    assert f["hanging-transaction"].witnesses == [{"partition": 1, "offset": 4, "last_stable_offset": 4,
                                                   "high_watermark": 9, "producers": None,
                                                   "producers_unknown": "not asked"}]
    # with the brokers' answer (DescribeProducers), the witness names who holds it open
    lg = logs([(0, 0, "a")], reached={0: 1, 1: 4}, open_at={1: (4, 9)})
    lg.producers = {1: [{"producer_id": 7, "producer_epoch": 0, "transaction_start_offset": 4, "last_timestamp": 5,
                         "last_sequence": 0}]}
    (w,) = check([], IN, None, lg)["hanging-transaction"].witnesses
    assert w["producers"] == [{"producer_id": 7, "producer_epoch": 0, "transaction_start_offset": 4,
                               "last_timestamp": 5, "transactional_id": None, "first_record_writer": None}] \
        and "producers_unknown" not in w
    unknown = check([], IN, None, Logs({}, {}, None, {}, None))["hanging-transaction"]
    assert unknown.count is None and unknown.unchecked


def test_duplicate_is_one_value_at_two_offsets_under_read_committed():
    f = check([], IN, None, logs([(0, 0, "a"), (0, 1, "b"), (1, 7, "a")]))
    assert f["duplicate"].count == 1 and f["duplicate"].witnesses == [{"id": "a", "at": [[0, 0], [1, 7]]}]
    clean = check([], IN, None, logs([(0, 0, "a")], uncommitted=[(0, 0, "a"), (0, 2, "a")]))
    assert clean["duplicate"].count == 0          # an aborted copy read_uncommitted sees is not a duplicate


def test_inconsistent_offsets_is_one_offset_with_two_values_between_any_two_sources():
    p = proc(*txn(1, (0, "a")))
    f = check([p], IN, None, logs([(0, 0, "a")], uncommitted=[(0, 0, "z")]))
    assert f["inconsistent-offsets"].count == 1
    assert f["inconsistent-offsets"].witnesses[0]["values"] == {
        "final read_committed reader": "a", "final read_uncommitted reader": "z", "writers' acknowledgements": "a"}


def test_aborted_read_is_a_committed_reader_seeing_an_aborted_transactions_record():
    p = proc(*txn(1, (0, "a"), end="abort"), *txn(2, (2, "a")))
    f = check([p], IN, None, logs([(0, 0, "a"), (0, 2, "a")], concurrent=[(0, 0, "a")]))
    assert f["aborted-read"].count == 2
    assert {w["reader"] for w in f["aborted-read"].witnesses} == {"final read_committed reader",
                                                                  "read_committed reader during the run"}
    dead = proc(*txn(1, (0, "a"), end=None), worker="w1")     # died before it asked to commit: aborted
    assert check([dead], IN, None, logs([(0, 0, "a")]))["aborted-read"].count == 1
    maybe = proc(*txn(1, (0, "a"), end="committing"))        # died asking to commit: may have committed
    assert check([maybe], IN, None, logs([(0, 0, "a")]))["aborted-read"].count == 0


def test_poll_skip_is_input_records_a_consumer_was_never_given_between_two_polls():
    p = proc(("assign", IN, {"0": 0}), ("poll", IN, {"0": [[0, 1]]}), ("poll", IN, {"0": [[4, 5]]}))
    f = check([p], IN, {0: [0, 1, 2, 3, 4, 5]}, None)
    assert f["poll-skip"].count == 1 and f["poll-skip"].witnesses[0]["skipped_offsets"] == [2, 3]
    assert "duplicate" not in f                    # no output topic: its classes do not apply
    gap = check([p], IN, {0: [0, 1, 4, 5]}, None)  # nothing at 2 and 3 in the log: not a skip
    assert gap["poll-skip"].count == 0
    unknown = check([p], IN, None, None)["poll-skip"]
    assert unknown.count is None and unknown.unchecked


def test_nonmonotonic_poll_is_going_back_without_a_seek_and_a_seek_or_assignment_allows_it():
    back = proc(("assign", IN, {"0": 0}), ("poll", IN, {"0": [[0, 3]]}), ("poll", IN, {"0": [[2, 4]]}))
    f = check([back], IN, {0: list(range(5))}, None)
    assert f["nonmonotonic-poll"].count == 1
    assert f["nonmonotonic-poll"].witnesses[0] | {"t": 0} == {"consumer": "w0/1", "partition": 0, "expected": 4,
                                                              "got": 2, "t": 0}
    rewound = proc(("assign", IN, {"0": 0}), ("poll", IN, {"0": [[0, 3]]}), ("seek", IN, {"0": 2}),
                   ("poll", IN, {"0": [[2, 4]]}))
    revoked = proc(("assign", IN, {"0": 0}), ("poll", IN, {"0": [[0, 3]]}), ("revoke", IN, [0]),
                   ("poll", IN, {"0": [[2, 4]]}))
    for p in (rewound, revoked):
        assert check([p], IN, {0: list(range(5))}, None)["nonmonotonic-poll"].count == 0
    # a new process starts where its assignment says: another process's polls are not its own
    again = proc(("assign", IN, {"0": 2}), ("poll", IN, {"0": [[2, 4]]}), attempt=2)
    assert check([rewound, again], IN, {0: list(range(5))}, None)["nonmonotonic-poll"].count == 0


def test_nonmonotonic_send_is_one_producers_acknowledged_offsets_going_back():
    p = proc(("send", OUT, 0, 5, "a", None), ("send", OUT, 0, 3, "b", None), ("send", OUT, 1, 0, "c", None))
    f = check([p], IN, None, logs([(0, 5, "a"), (0, 3, "b"), (1, 0, "c")], reached={0: 6, 1: 1}))
    assert f["nonmonotonic-send"].count == 1 and f["nonmonotonic-send"].witnesses[0]["previous_offset"] == 5
    two = [proc(("send", OUT, 0, 5, "a", None)), proc(("send", OUT, 0, 3, "b", None), attempt=2)]
    assert check(two, IN, None, logs([(0, 5, "a"), (0, 3, "b")], reached={0: 6}))["nonmonotonic-send"].count == 0


# -- what cannot be checked is said, never 0 ---------------------------------------------------

def test_a_failed_reader_leaves_its_classes_unknown_and_says_why():
    p = proc(*txn(1, (0, "a")))
    f = check([p], IN, None, Logs(None, None, None, None))
    for name in ("lost-write", "unseen", "duplicate", "aborted-read", "hanging-transaction"):
        assert f[name].count is None and f[name].unchecked, name
    assert f["nonmonotonic-send"].count == 0


def test_without_recorded_sends_only_the_log_classes_apply():
    f = check([], IN, None, logs([(0, 0, "a")]))
    assert set(f) == {"duplicate", "inconsistent-offsets", "hanging-transaction"}


def test_allowed_classes_are_marked():
    f = check([], IN, None, logs([(0, 0, "a"), (0, 1, "a")]), allowed=frozenset({"duplicate"}))
    assert f["duplicate"].allowed and f["duplicate"].count == 1 and not f["inconsistent-offsets"].allowed


# -- the files, read as untrusted input ---------------------------------------------------------

def test_history_files_are_parsed_and_malformed_lines_counted_not_believed(tmp_path):
    lines = [[1.0, "open", {"worker": "w0", "attempt": 1}], [1.1, "assign", IN, {"0": 0}],
             [1.2, "poll", IN, {"0": [[0, 2]]}], [1.3, "poll", IN, {"0": [[5, 2]]}],        # a range backwards
             [1.4, "send", OUT, 0, "x", "a", 1], "not json", [1.5, "txn", "rm -rf", 1], [1.6, "poll", IN, {"x": 1}]]
    (tmp_path / "w0-1.jsonl").write_text("\n".join(l if isinstance(l, str) else json.dumps(l) for l in lines))
    (tmp_path / "w0-2.jsonl").symlink_to(tmp_path / "w0-1.jsonl")
    (tmp_path / "notes.txt").write_text("")
    h = read(tmp_path)
    assert [p.name for p in h.processes] == ["w0/1"] and h.bad_lines == 5
    assert [op[1] for op in h.processes[0].ops] == ["assign", "poll"]
    assert any("w0-2.jsonl" in x for x in h.problems) and any("notes.txt" in x for x in h.problems)
    assert read(tmp_path / "missing") is None


def test_well_formed_knows_every_kind_the_writer_writes():
    good = [[0, "assign", IN, {"0": 1}], [0, "seek", IN, {}], [0, "commit", IN, {"3": 4}],
            [0, "poll", IN, {"0": [[1, 1], [3, 4]]}], [0, "revoke", IN, [0, 1]], [0, "txn", "begin", 1],
            [0, "send", OUT, 0, 1, "k", None], [0, "send", OUT, 0, 1, None, 2], [0, "send-error", OUT, "k", "e", 1]]
    assert all(well_formed(op) for op in good)
    bad = [[0, "send", OUT, 0, True, "k", 1], [0, "txn", "begin"], [0, "poll", IN, []], [0], {"t": 0}, [0, "exec", "x"]]
    assert not any(well_formed(op) for op in bad)


# -- the verdict and the report ----------------------------------------------------------------

def _decide(found: dict, metrics: dict | None = None):
    from types import SimpleNamespace
    from harness.checker.run_outcome import decide
    from harness.checker.verdict import Evidence
    from harness.experiments import get
    from harness.run.params import RunParams
    p = RunParams("eos", messages=3)
    result = SimpleNamespace(status="complete", events=[], unplanned_deaths=[], killed_at_end=0)
    audit = SimpleNamespace(metrics={"kafka.read_committed.duplicates": 0, "kafka.read_committed.lost": 0,
                                     "kafka.read_uncommitted.duplicates": 0, "kafka.read_uncommitted.lost": 0,
                                     **(metrics or {})}, evidence=Evidence(), anomalies=found)
    return decide(get("eos").resolve(p), p, [], result, [], audit, amounts={}, positions={}, accounts={},
                  run_dir=None)


def test_a_forbidden_class_that_occurs_makes_the_run_unexpected_and_names_its_witnesses():
    p = proc(*txn(1, (0, "pay-000002"), end="abort"))
    found = check([p], IN, None, logs([(0, 0, "pay-000002")]))
    o = _decide(found)
    assert o.verdict == "unexpected"
    assert "anomaly.aborted-read: predicted == 0, observed 1" in o.judgement.failed
    assert o.judgement.differing_ids["anomaly.aborted-read"] == ["pay-000002"]


def test_a_clean_history_keeps_the_run_as_predicted_and_duplicate_follows_the_prediction():
    found = check([proc(*txn(1, (0, "a")))], IN, None, logs([(0, 0, "a")]))
    o = _decide(found)
    assert o.verdict == "as-predicted" and not found["duplicate"].allowed     # eos: read_committed must have none
    assert "anomaly.lost-write == 0" in [e.text() for e in o.prediction.expectations]


def test_a_forbidden_class_that_could_not_be_checked_is_not_measured_never_zero():
    found = check([proc(*txn(1, (0, "a")))], IN, None, Logs(None, None, None, None))
    o = _decide(found)
    assert o.verdict == "audit-failed" and "anomaly.lost-write: not measured" in o.judgement.failed


def test_the_report_shows_each_class_with_its_witnesses_escaped(tmp_path):
    from harness.reporting.run_report import RunReport
    from harness.reporting import html, markdown
    from tests.unit.sample_report import sample, validate
    d = sample()
    evil = "<script>alert(1)</script>|x"
    found = check([proc(*txn(1, (0, evil), end="abort"))], IN, None, logs([(0, 0, evil)]))
    d["anomaly_classes"] = {"history": {"processes": 1, "operations": 4, "bad_lines": 2, "problems": []},
                            "classes": {n: f.as_dict() for n, f in found.items()}}
    validate(d)
    r = RunReport(d)
    rows = {row[0]: row for row in r.anomaly_class_rows()}
    assert rows["aborted-read"][1:3] == ("forbidden", "1") and "(w0/1)" in rows["aborted-read"][4]
    assert r.history_line().endswith(": 4 operations of 1 worker processes; 2 malformed lines set aside")
    assert r.history_line().startswith("counted in the Kafka topics")
    d["kafka_output"] = {"read_committed": {"records": 1, "duplicates": 0, "lost": 0, "unprocessed": 0},
                         "read_uncommitted": {"records": 1, "duplicates": 0, "lost": 0, "unprocessed": 0},
                         "aborted_records": 0,
                         "reader_during_run": {"0": {"records": 1200, "first_offset": 0, "last_offset": 1300},
                                               "1": {"records": 3, "first_offset": 0, "last_offset": 2}}}
    validate(d)
    assert RunReport(d).history_line().endswith("; the read_committed reader during the run saw 1,203 records of "
                                                "2 partitions")
    text, page = markdown.render(r), html.render(r)
    assert "## Anomaly classes" in text and "\\<script>" in text and "\\|x" in text and "<script>" not in page
    assert "Anomaly classes (Jepsen" in page


def test_an_acknowledgement_without_an_offset_names_no_place_and_flags_nothing():
    p = proc(*txn(1, (0, "a"), (-1, "b"), (1, "c")))       # a duplicate sequence number: success, offset -1
    f = check([p], IN, None, logs([(0, 0, "a"), (0, 1, "c")]))
    assert (f["lost-write"].count, f["nonmonotonic-send"].count) == (0, 0)


def test_a_groups_join_is_where_polls_may_start_not_where_they_must():
    joined = proc(("join", IN, {"0": 2}), ("poll", IN, {"0": [[5, 6]]}), ("poll", IN, {"0": [[9, 9]]}))
    f = check([joined], IN, {0: list(range(10))}, None)
    assert f["poll-skip"].count == 1 and f["poll-skip"].witnesses[0]["skipped_offsets"] == [7, 8]   # not 2..4
    assert check([proc(("join", IN, {"0": 4}), ("poll", IN, {"0": [[2, 3]]}))], IN, {0: list(range(5))},
                 None)["nonmonotonic-poll"].count == 1


def test_a_file_that_lost_lines_leaves_an_unfinished_transaction_unknown(tmp_path):
    ops = [[1.0, "txn", "begin", 1], [1.1, "send", OUT, 0, 0, "a", 1], "garbage"]
    (tmp_path / "w0-1.jsonl").write_text("\n".join(json.dumps(o) if isinstance(o, list) else o for o in ops))
    procs = read(tmp_path).processes
    assert procs[0].lines_lost == 1 and [s.outcome for s in sends_of(procs[0])] == [UNKNOWN]


def test_hostile_lines_are_set_aside_not_believed_and_never_crash_the_checker(tmp_path):
    lines = ['[1.0, "poll", "in", {"\\u00b2": [[0, 1]]}]', "[" * 200_000, '[NaN, "seek", "in", {}]',
             '[1.0, "seek", "in", {"0": 1e400}]', '[1.0, "send", "out", 0, 99999999999999999999999, "a", 1]',
             '[1.0, "assign", "in", {"0": 0}]']
    (tmp_path / "w0-1.jsonl").write_text("\n".join(lines))
    h = read(tmp_path)
    assert h.bad_lines == 5 and [op[1] for op in h.processes[0].ops] == ["assign"]
    assert check(h.processes, IN, {0: [0]}, None) == {}          # no poll was believed: no poll class applies


def test_a_big_partition_with_thousands_of_gaps_is_checked_whole():
    """5,000 gaps over 250,000 offsets (each gap looked up by bisection: scanning the partition per gap
    took half a minute here)."""
    n = 250_000
    p = proc(("assign", IN, {"0": 0}), *[("poll", IN, {"0": [[i, i]]}) for i in range(0, n, 50)])
    f = check([p], IN, {0: list(range(n))}, None)
    assert f["poll-skip"].count == n // 50 - 1 and f["poll-skip"].witnesses[0]["skipped"] == 49


def test_the_run_s_own_count_checks_the_histories_with_its_names(tmp_path):
    """observe's path into the checker, with a run's names, readers' results and histories from files."""
    from harness.checker.histories import read as read_histories
    from harness.checker.observe import Observation, _check_histories
    from harness.experiments import get
    from harness.workload.naming import RunNames
    names = RunNames("20261202T000000.000-eos-abcdef")
    ops = [[1.0, "assign", names.input_topic, {"0": 0}], [1.1, "poll", names.input_topic, {"0": [[0, 1]]}],
           [1.2, "txn", "begin", 1], [1.3, "send", names.output_topic, 0, 0, "pay-000001", 1],
           [1.3, "send", "elsewhere", 0, 7, "pay-000001", 1],          # another topic: not this output's
           [1.4, "send", names.output_topic, 0, 1, "pay-000002", 1], [1.5, "txn", "committing", 1],
           [1.6, "txn", "commit", 1]]
    (tmp_path / "w0-1.jsonl").write_text("\n".join(json.dumps(o) for o in ops))
    at = {(0, 0): "pay-000001", (0, 1): "pay-000002"}
    tags = {(0, 0): ("w0/1", 1), (0, 1): ("w0/1", 1)}
    kout = {"read_committed": {"at": at, "reached": {0: 3}},
            "read_uncommitted": {"at": at, "reached": {0: 3}, "tags": tags}, "open_transactions": {}}
    a = Observation()
    _check_histories(a, get("eos"), names, read_histories(tmp_path),
                     {"pay-000001": (0, 0), "pay-000002": (0, 1)}, kout, None)
    assert {n: f.count for n, f in a.anomalies.items()} == {n: 0 for n in a.anomalies} and len(a.anomalies) == 11
    # eos tags its output: without tags to read, torn-transaction is unknown, never absent or 0
    del kout["read_uncommitted"]["tags"]
    b = Observation()
    _check_histories(b, get("eos"), names, read_histories(tmp_path), {"pay-000001": (0, 0), "pay-000002": (0, 1)},
                     kout, None)
    assert b.anomalies["torn-transaction"].count is None and b.anomalies["torn-transaction"].unchecked
    outcomes = a.history.pop("outcomes")
    assert a.history == {"processes": 1, "operations": 8, "bad_lines": 0, "problems": []}
    assert outcomes["transactions"]["unknown"] == 0 and outcomes["sends"]["unknown"] == 0


# -- the records' own tags: aborted reads without a delivery report, torn transactions ---------

def tags(*entries):
    """(partition, offset, writer, txn) -> Logs.tags."""
    return {(p, o): (w, n) for p, o, w, n in entries}


def test_aborted_read_is_found_from_a_records_tag_when_its_writer_died_before_the_delivery_report():
    # w0/1's transaction 1 was aborted; its record at offset 0 has no delivery report, but its tag names it
    p = proc(("txn", "begin", 1), ("txn", "abort", 1), *txn(2, (2, "b")))
    lg = logs([(0, 0, "a"), (0, 2, "b")], reached={0: 3})
    lg.tags = tags((0, 0, "w0/1", 1), (0, 2, "w0/1", 2))
    found = check([p], IN, None, lg)
    assert found["aborted-read"].count == 1
    w = found["aborted-read"].witnesses[0]
    assert (w["id"], w["offset"], w["writer"], w["txn"]) == ("a", 0, "w0/1", 1)
    assert "tag" in w["known_from"]


def test_without_any_writer_history_a_tagged_output_s_aborted_reads_are_unknown_never_0():
    # --no-history: the records' tags name their transactions, and nothing says which of them aborted
    lg = logs([(0, 0, "a"), (0, 1, "b")], reached={0: 2})
    lg.tags = tags((0, 0, "w0/1", 1), (0, 1, "w0/1", 2))
    found = check([], IN, None, lg, tagged=True)
    assert found["aborted-read"].count is None and "history" in found["aborted-read"].unchecked


def test_a_tagged_record_of_a_committed_or_unknown_transaction_is_no_aborted_read():
    p = proc(*txn(1, end="commit"), *txn(2, end="committing"))
    lg = logs([(0, 0, "a"), (0, 1, "b")], reached={0: 2})
    lg.tags = tags((0, 0, "w0/1", 1), (0, 1, "w0/1", 2), (0, 5, "w9/9", 1))   # a writer with no history: not judged
    found = check([p], IN, None, lg)
    assert found["aborted-read"].count == 0


def test_an_aborted_read_witnessed_by_a_send_is_counted_once():
    p = proc(*txn(1, (0, "a"), end="abort"))
    lg = logs([(0, 0, "a")], reached={0: 1})
    lg.tags = tags((0, 0, "w0/1", 1))
    assert check([p], IN, None, lg)["aborted-read"].count == 1


def test_torn_transaction_is_one_seen_in_part_below_where_the_reader_got():
    p = proc(*txn(1, (0, "a"), (1, "b")))
    lg = logs([(0, 0, "a"), (0, 2, "c")], uncommitted=[(0, 0, "a"), (0, 1, "b"), (0, 2, "c")], reached={0: 3})
    lg.tags = tags((0, 0, "w0/1", 1), (0, 1, "w0/1", 1), (0, 2, "w1/1", 4))
    found = check([p], IN, None, lg)
    torn = found["torn-transaction"]
    assert torn.count == 1
    assert (torn.witnesses[0]["writer"], torn.witnesses[0]["txn"]) == ("w0/1", 1)
    assert torn.witnesses[0]["visible"] == [[0, 0]] and torn.witnesses[0]["invisible"] == [[0, 1]]
    assert torn.named() == ["w0/1 transaction 1"]


def test_whole_transactions_seen_or_unseen_and_those_beyond_the_reader_are_not_torn():
    p = proc(*txn(1, (0, "a")))
    # txn 1 all seen, txn 2 all aborted (unseen), txn 3 has a record beyond where the reader got: not judged
    lg = logs([(0, 0, "a"), (0, 1, "b"), (0, 4, "e")],
              uncommitted=[(0, 0, "a"), (0, 1, "b"), (0, 2, "c"), (0, 3, "d"), (0, 4, "e"), (0, 9, "f")],
              reached={0: 5})
    lg.tags = tags((0, 0, "w0/1", 1), (0, 1, "w0/1", 1), (0, 2, "w0/1", 2), (0, 3, "w0/1", 2),
                   (0, 4, "w0/1", 3), (0, 9, "w0/1", 3))
    assert check([p], IN, None, lg)["torn-transaction"].count == 0


def test_without_tagged_records_torn_transaction_does_not_apply_and_a_failed_reader_leaves_it_unknown():
    p = proc(*txn(1, (0, "a")))
    assert "torn-transaction" not in check([p], IN, None, logs([(0, 0, "a")]))
    lg = Logs(None, {(0, 0): "a"}, None, None, {}, tags((0, 0, "w0/1", 1)))
    f = check([p], IN, None, lg)["torn-transaction"]
    assert f.count is None and "failed" in f.unchecked


def test_tags_are_read_from_values_that_name_worker_attempt_and_transaction_and_hostile_ones_are_ignored():
    from harness.checker.kafka_output import tagged
    good = json.dumps({"id": "a", "worker": "w0", "attempt": 2, "txn": 7}).encode()
    bad = [json.dumps({"worker": "w0", "attempt": 1, "txn": 1.5}).encode(),
           json.dumps({"worker": "w0", "attempt": True, "txn": 1}).encode(),
           json.dumps({"worker": ["w0"], "attempt": 1, "txn": 1}).encode(),
           json.dumps({"worker": "w0", "attempt": 1, "txn": 10 ** 30}).encode(),
           json.dumps({"worker": "w" * 100, "attempt": 1, "txn": 1}).encode(),
           b'[' * 100000 + b'"txn"', b'\xff\xfe"txn"', b"not json txn", None, b'"txn"']
    recs = [("a", good, 0, 0)] + [(f"b{i}", v, 0, i + 1) for i, v in enumerate(bad)]
    assert tagged(recs) == {(0, 0): ("w0/2", 7)}
    assert tagged([("a", good)]) is None


# -- who holds a transaction open: Kafka's TransactionsCommand describe-producers ---------------

DESCRIBED = """\
[2026-12-02 12:00:00,000] WARN some log line (org.apache.kafka.clients)
ProducerId\tProducerEpoch\tLatestCoordinatorEpoch\tLastSequence\tLastTimestamp\tCurrentTransactionStartOffset
0\t3\t0\t41\t1796214280443\t-1
1001\t0\t0\t0\t1796214290000\t57
garbage line that is not a row
"""


def test_the_tools_table_is_parsed_to_the_producers_holding_a_transaction_open():
    from harness.checker.open_transactions import parse
    assert parse(DESCRIBED) == [{"producer_id": 1001, "producer_epoch": 0, "coordinator_epoch": 0, "last_sequence": 0,
                                 "last_timestamp": 1796214290000, "transaction_start_offset": 57}]
    assert parse("") == [] and parse("ProducerId ProducerEpoch\n1 2\n") == []
    hostile = DESCRIBED.replace("1001", "9" * 40)
    assert parse(hostile) == []          # a number too long to be an id is not one


def test_producers_are_unknown_with_the_reason_when_they_cannot_be_asked(tmp_path, monkeypatch):
    from harness.clients import kafka_client
    from harness.checker import open_transactions
    monkeypatch.setattr(kafka_client, "settings_for", lambda b: {"enable.ssl.certificate.verification": "false"})
    got = open_transactions.describe("127.0.0.1:1", "t", {0: (1, 2), 1: (1, 2)}, lib=tmp_path)
    assert set(got) == {0, 1} and all("client setting" in why for why in got.values())
    monkeypatch.setattr(kafka_client, "settings_for", lambda b: {})
    many = open_transactions.describe("127.0.0.1:1", "t", range(6), lib=tmp_path)   # no jars: the tool fails
    assert all(isinstance(v, str) for v in many.values()) and "only the first 4" in many[5]


def test_the_tool_logs_in_through_a_private_command_config_never_its_command_line(tmp_path, monkeypatch):
    """On the default local stack (SCRAM) the tool's producers were always unknown ("the cluster needs client
    settings"): it now gets the login in Java's names in a 0600 file, deleted after."""
    import os
    import stat
    import subprocess
    from harness.clients import kafka_client
    from harness.checker import open_transactions
    login = {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "SCRAM-SHA-512", "sasl.username": "harness",
             "sasl.password": "s3cret-pw-0123456789"}
    monkeypatch.setattr(kafka_client, "settings_for", lambda b: login)
    seen = []

    def run(cmd, **kw):
        f = cmd[cmd.index("--command-config") + 1]
        seen.append((cmd, stat.S_IMODE(os.stat(f).st_mode), open(f).read(), f))
        out = ("TransactionalId Coordinator ProducerId TransactionState\nrun-x-w0 1 7 Ongoing\n" if cmd[-1] == "list"
               else "ProducerId ProducerEpoch CurrentTransactionStartOffset\n7 0 5\n")
        return subprocess.CompletedProcess(cmd, 0, out, "")
    monkeypatch.setattr(open_transactions.subprocess, "run", run)
    got = open_transactions.describe("127.0.0.1:1", "t", [0], lib=tmp_path)
    # ListTransactions (the tool's `list`) names the transactional.id the producer serves
    assert got == {0: [{"producer_id": 7, "producer_epoch": 0, "transaction_start_offset": 5,
                        "transactional_id": "run-x-w0"}]}
    assert [c[-1] for c, *_ in seen] == ["0", "list"]
    for cmd, mode, text, path in seen:
        assert mode == 0o600 and "ScramLoginModule" in text and "s3cret-pw-0123456789" in text
        assert "s3cret-pw-0123456789" not in " ".join(cmd) and not os.path.exists(path)


def test_torn_transaction_is_unknown_when_the_writers_tag_and_no_tag_can_be_read():
    p = proc(*txn(1, (0, "a")))
    lg = logs([(0, 0, "a")])
    lg.tags = {}                                   # records read, none tagged, though the writers tag theirs
    f = check([p], IN, None, lg, tagged=True)["torn-transaction"]
    assert f.count is None and "names its transaction" in f.unchecked
    lg.tags = None                                 # the read_uncommitted drain failed
    assert check([p], IN, None, lg, tagged=True)["torn-transaction"].count is None
    empty = Logs({}, {}, None, {}, {}, {})         # nothing written at all: nothing torn
    assert check([p], IN, None, empty, tagged=True)["torn-transaction"].count == 0


# -- out-of-order: an output partition against its input partition ---------------------------

POS = {"a": (0, 0), "b": (0, 1), "c": (0, 2), "d": (1, 0)}


def test_out_of_order_is_an_output_record_before_one_that_preceded_it_in_the_input_or_in_another_partition():
    from harness.checker.anomalies import out_of_order
    clean = {(0, 0): "a", (0, 2): "b", (0, 3): "c", (1, 0): "d"}         # offset 1: a transaction marker
    assert out_of_order(clean, POS).count == 0
    swapped = {(0, 0): "b", (0, 1): "a", (0, 2): "c"}
    f = out_of_order(swapped, POS)
    assert f.count == 1 and f.witnesses[0] == {"id": "a", "partition": 0, "offset": 1, "input_offset": 0,
                                                "after_input_offset": 1}
    moved = out_of_order({(0, 0): "a", (1, 0): "b"}, POS)
    assert moved.count == 1 and moved.witnesses[0]["input_partition"] == 0 and moved.witnesses[0]["partition"] == 1


def test_out_of_order_leaves_duplicates_and_foreign_ids_to_their_own_classes_and_says_when_it_cannot_judge():
    from harness.checker.anomalies import out_of_order
    # a later copy of "a" (the duplicate class) and an id the input never held are not reorders
    assert out_of_order({(0, 0): "a", (0, 1): "b", (0, 2): "a", (0, 3): "zzz", (0, 4): "c"}, POS).count == 0
    assert out_of_order(None, POS).count is None and out_of_order({}, None).count is None
    p = proc(*txn(1, (0, "b"), (1, "a")))
    lg = logs([(0, 0, "b"), (0, 1, "a")])
    assert "out-of-order" not in check([p], IN, None, lg)                  # not promised: not judged
    assert check([p], IN, None, lg, ordered=True, positions=POS)["out-of-order"].count == 1


def test_the_producer_under_test_allows_what_its_settings_give_up_and_nothing_else():
    from harness.experiments import get
    from harness.run.params import RunParams
    exp = get("producer")
    assert exp.resolve(RunParams("producer", messages=3)).allows == frozenset()
    assert exp.resolve(RunParams("producer", messages=3, idempotence="on")).allows == frozenset()
    assert exp.resolve(RunParams("producer", messages=3, idempotence="off")).allows == {"nonmonotonic-send"}
    lossy = {"nonmonotonic-send", "lost-write", "unseen", "inconsistent-offsets"}
    assert exp.resolve(RunParams("producer", messages=3, idempotence="off", acks="1")).allows == lossy
    assert exp.resolve(RunParams("producer", messages=3, acks="1")).allows == lossy
    assert exp.resolve(RunParams("producer", messages=3, acks="0")).allows == lossy
    # matching variants' allowances add up, whatever each one lists
    from dataclasses import replace
    two = replace(exp, variants={"idempotence=off": {"allows": frozenset({"nonmonotonic-send"})},
                                 "acks=1": {"allows": frozenset({"lost-write"})}})
    assert two.resolve(RunParams("producer", messages=3, idempotence="off", acks="1")).allows == \
        {"nonmonotonic-send", "lost-write"}
