"""Each write's outcome as its writer knew it (checker/write_outcomes.py), counted from hand-made histories."""

from harness.checker.write_outcomes import count, send_failed_for_good
from tests.unit.test_anomalies import IN, OUT, proc, txn


def test_sends_are_ok_failed_for_good_or_unknown():
    p = proc(("send", OUT, 0, 4, "a", None),
             ("send-error", OUT, "b", "KafkaError{code=_MSG_TIMED_OUT,val=-192,str=\"Local: Message timed out\"}", None),
             ("send-error", OUT, "c", "KafkaError{code=NOT_LEADER_OR_FOLLOWER,val=6}", None),
             ("send-error", OUT, "d", "KafkaError{code=MSG_SIZE_TOO_LARGE,val=10}", None),
             ("send-error", "elsewhere", "e", "_MSG_TIMED_OUT", None))
    got = count([p], OUT)
    assert got["sends"] == {"ok": 1, "failed": 1, "unknown": 2} and got["unknown_sends"] == ["b", "c"]
    assert count([p])["sends"]["unknown"] == 3                     # every topic without one named
    assert send_failed_for_good("Local: Purged in queue (_PURGE_QUEUE)") and not send_failed_for_good("_TRANSPORT")


def test_a_transaction_is_unknown_only_between_asking_to_commit_and_the_answer():
    p = proc(*txn(1, (0, "a")), *txn(2, (1, "b"), end="abort"), *txn(3, (2, "c"), end=None),
             *txn(4, (3, "d"), end="committing"))
    got = count([p], OUT)
    # 3 died before asking: aborted (no EndTxn was sent); 4 died after asking: unknown
    assert got["transactions"] == {"committed": 1, "aborted": 2, "unknown": 1}
    assert got["unknown_transactions"] == ["w0/1 transaction 4"]
    assert count([], OUT) == {"sends": {"ok": 0, "failed": 0, "unknown": 0},
                              "transactions": {"committed": 0, "aborted": 0, "unknown": 0},
                              "commits": {"ok": 0, "failed": 0, "unknown": 0},
                              "unknown_sends": [], "unknown_transactions": [], "unknown_commits": []}


def test_an_offset_commit_is_ok_refused_or_unknown_and_unknown_when_its_process_died_asking():
    from harness.checker.anomalies import Process
    from harness.checker.write_outcomes import commit_refused
    a = Process("w0", 1)
    a.ops = [[1.0, "commit-begin", IN, {"0": 5}], [1.1, "commit", IN, {"0": 5}],
             [2.0, "commit-begin", IN, {"0": 9}],
             [2.5, "commit-error", IN, {"0": 9}, "KafkaError{code=REQUEST_TIMED_OUT,val=7}"],
             [3.0, "commit-begin", IN, {"1": 4}],
             [3.2, "commit-error", IN, {"1": 4}, 'KafkaError{code=_NO_OFFSET,val=-168,str="no offset"}'],
             # a broker's refusal may end a chain of retries whose first try was stored: unknown
             [3.5, "commit-begin", IN, {"1": 5}],
             [3.6, "commit-error", IN, {"1": 5}, "KafkaError{code=ILLEGAL_GENERATION,val=22}"],
             [4.0, "commit", IN, {"0": 12}],                       # an older harness: no commit-begin
             [5.0, "commit-begin", IN, {"0": 15, "1": 6}]]          # then the process was killed
    b = Process("w0", 2)
    b.ops = [[6.0, "commit-begin", IN, {"0": 15}], [6.1, "commit-begin", IN, {"0": 16}],
             [6.2, "commit", IN, {"0": 16}],
             [7.0, "commit-begin", IN, {"0": 20}], [7.1, "commit", IN, {"0": 99}]]    # an answer to another question
    got = count([a, b], OUT)
    assert got["commits"] == {"ok": 4, "failed": 1, "unknown": 5}
    assert got["unknown_commits"] == ["w0/1 0:9", "w0/1 1:5", "w0/1 0:15,1:6", "w0/2 0:15", "w0/2 0:20"]
    # the code, exactly: a message that merely mentions a local error's name is not one
    assert not commit_refused('KafkaError{code=NOT_COORDINATOR,val=16,str="not _NO_OFFSET"}')
    assert commit_refused("KafkaError{code=_STATE,val=-172}") and not commit_refused("")


def test_the_report_says_how_much_was_unknown_to_the_writers():
    from harness.reporting.run_report import RunReport
    from tests.unit.sample_report import sample, validate
    d = sample()
    d["anomaly_classes"] = {"history": {"processes": 1, "operations": 9, "bad_lines": 0, "problems": [],
                                        "outcomes": count([proc(*txn(1, (0, "a"), end="committing"))], OUT)},
                            "classes": {}}
    validate(d)
    assert RunReport(d).history_line().endswith("; unknown to their writers (may or may not have happened): "
                                                "1 transactions")
    d["anomaly_classes"]["history"]["outcomes"]["commits"]["unknown"] = 2
    assert RunReport(d).history_line().endswith("1 transactions and 2 offset commits")
    del d["anomaly_classes"]["history"]["outcomes"]["commits"]      # a report of an older harness
    validate(d)
    d["anomaly_classes"]["history"]["outcomes"] = count([], OUT)
    assert "unknown" not in RunReport(d).history_line()
    assert IN != OUT
