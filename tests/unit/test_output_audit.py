"""The Kafka output auditor on hand-made records: committed, aborted, missing."""

from harness.checker.kafka_output import audit_records
from harness.checker.output_watcher import stalls_after

SENT = ["p1", "p2", "p3", "p4"]


def test_aborted_copies_show_only_to_read_uncommitted():
    # p2 and p3 were written in a transaction that was aborted, then written again and committed.
    log = ["p1", "p2", "p3", "p2", "p3", "p4"]
    committed = ["p1", "p2", "p3", "p4"]
    a = audit_records(SENT, {"read_committed": committed, "read_uncommitted": log})
    rc = a["read_committed"]
    assert (rc["records"], rc["duplicates"], rc["lost"], rc["duplicate_ids"], rc["lost_ids"], rc["error"]) == \
        (4, 0, 0, [], [], None)
    assert (a["read_uncommitted"]["records"], a["read_uncommitted"]["duplicates"]) == (6, 2)
    assert a["read_uncommitted"]["duplicate_ids"] == ["p2", "p3"]
    assert a["aborted_records"] == 2


def test_missing_records_are_lost_for_both_readers():
    a = audit_records(SENT, {"read_committed": ["p1", "p4"], "read_uncommitted": ["p1", "p4"]})
    assert a["read_committed"]["lost"] == 2 and a["read_committed"]["lost_ids"] == ["p2", "p3"]
    assert a["aborted_records"] == 0


def test_committed_duplicates_are_reported():
    a = audit_records(SENT, {"read_committed": SENT + ["p1"], "read_uncommitted": SENT + ["p1"]})
    assert a["read_committed"]["duplicates"] == 1 and a["read_committed"]["duplicate_ids"] == ["p1"]


def test_empty_or_unreadable_topic_never_raises_and_unreadable_is_unknown():
    a = audit_records(SENT, {}, {"read_committed": "topic not found"})
    assert a["read_committed"]["lost"] is None and a["read_committed"]["records"] is None
    assert a["read_committed"]["error"] == "topic not found"
    assert a["read_uncommitted"]["lost"] == 4          # read fine, and empty: all 4 missing
    assert a["aborted_records"] is None


def test_stall_counts_only_records_created_after_the_crash():
    # (visible_at, created_at): a reader catching up on old records at t=10.1 says nothing about the crash at 10.
    seen = [(10.1, 9.0), (10.2, 9.5), (21.0, 10.5), (21.0, 11.0)]
    assert stalls_after(seen, [10.0]) == [11.0]
    assert stalls_after(seen, [30.0]) == [None]        # nothing seen after it: unknown, not 0


def test_stall_joins_on_the_crashed_workers_own_records():
    # w1 keeps writing while w0's partitions are blocked by its dead transaction: w1's records say nothing.
    seen = [(10.05, 10.01, "w1"), (10.2, 10.1, "w1"), (10.8, 10.2, "w0")]
    assert stalls_after(seen, [{"time": 10.0, "worker": "w0"}]) == [0.8]
    assert stalls_after(seen, [{"time": 10.0, "worker": "w1"}]) == [0.05]
    assert stalls_after(seen, [{"time": 10.0, "worker": "w2"}]) == [None]


def test_stall_is_measured_on_the_crashed_records_partition():
    # The dead transaction blocks partition 1; the same worker's records on partition 0 flow at once.
    seen = [(10.1, 10.05, "w0", 0), (16.5, 10.3, "w0", 1), (16.5, 16.4, "w0", 1)]
    assert stalls_after(seen, [{"time": 10.0, "worker": "w0", "partition": 1}]) == [6.5]
    assert stalls_after(seen, [{"time": 10.0, "worker": "w0", "partition": None}]) == [0.1]


def test_a_crash_before_the_reader_was_ready_has_no_stall():
    # The reader first read every partition to its end at 10.5: a record it saw at 11.0 may have waited for it.
    seen = [(11.0, 10.2, "w0", 0), (13.0, 12.4, "w0", 0)]
    crashes = [{"time": 10.0, "worker": "w0", "partition": 0}, {"time": 12.0, "worker": "w0", "partition": 0}]
    assert stalls_after(seen, crashes, ready_at=10.5) == [None, 1.0]
    assert stalls_after(seen, crashes, ready_at=None) == [None, None]     # never ready: every stall unknown
    assert stalls_after(seen, crashes) == [1.0, 1.0]


def _audit_with_output(tmp_path, monkeypatch, experiment: str, kafka_output, output_keys=()):
    """`harness audit` of a hand-made report of `experiment` whose run sent p0..p2, its output topic holding
    a record per key of `output_keys`: (rows, why, notes). Only Kafka and Postgres are faked."""
    import json
    from collections import Counter
    from types import SimpleNamespace
    from harness.checker import recount
    from harness.cli.commands import audit
    from harness.workload.naming import RunNames
    from tests.unit.sample_report import sample
    d = sample(experiment)
    names = RunNames(d["run_id"])
    d["kafka_output"] = kafka_output
    d["stack"].update(input_topic=names.input_topic, output_topic=names.output_topic, ledger_table=names.ledger_table,
                      dedupe_table=None, consumer_group=names.group)
    (tmp_path / "report.json").write_text(json.dumps(d))
    sent = {f"p{i}": 100 for i in range(3)}

    def read_topic(bootstrap, topic, isolation):
        if topic == names.input_topic:
            return recount.TopicRead(len(sent), Counter(sent), dict(sent))
        assert topic == names.output_topic
        return recount.TopicRead(len(output_keys), Counter(output_keys), {k: 100 for k in output_keys})
    monkeypatch.setattr(recount, "read_topic", read_topic)
    monkeypatch.setattr(recount, "recount_ledger", lambda *a, **k: None)
    stack = SimpleNamespace(bootstrap_servers="127.0.0.1:1", postgres_dsn="postgresql://u@127.0.0.1:2/d")
    notes = []
    rows, why = audit.audit_folder(tmp_path, stack, notes=notes)
    return rows, why, notes


def _output_rows(rows) -> list:
    return [r for r in rows if r.store.startswith("output")]


UNREAD = {iso: {"records": None, "duplicates": None, "lost": None, "unprocessed": None}
          for iso in ("read_committed", "read_uncommitted")}


def test_an_output_topic_the_consumer_never_wrote_is_not_recounted_as_all_missing(tmp_path, monkeypatch):
    """custom creates an output topic its consumer may leave unused: `harness audit` said "ids missing 3,000"
    for one the consumer never wrote. The run's own audit leaves it out; so does the recount, in one line."""
    rows, why, notes = _audit_with_output(tmp_path, monkeypatch, "custom", None)
    assert why is None, why
    assert rows and not _output_rows(rows)
    said = [text for _, text in notes if "output topic" in text]
    assert len(said) == 1 and "holds no record" in said[0] and "not audited" in said[0]


def test_an_unused_optional_output_topic_is_not_recounted_when_the_run_could_not_read_it(tmp_path, monkeypatch):
    """The run's readers failed (its report states unknown counts): the topic, empty, is still one the
    consumer never wrote, and no "ids missing" row is shown for it."""
    rows, why, notes = _audit_with_output(tmp_path, monkeypatch, "custom", {**UNREAD, "aborted_records": None})
    assert why is None, why
    assert not _output_rows(rows)
    assert any("not audited" in text for _, text in notes)


def test_an_output_topic_the_experiment_requires_is_recounted_even_empty(tmp_path, monkeypatch):
    """eos requires its output topic: empty, every id is missing there, whatever the report states."""
    rows, why, notes = _audit_with_output(tmp_path, monkeypatch, "eos", None)
    assert why is None, why
    missing = [r for r in _output_rows(rows) if r.metric.startswith("ids missing")]
    assert [r.recounted for r in missing] == [3, 3]
    assert not any("output topic" in text for _, text in notes)


def test_an_optional_output_topic_is_recounted_when_written_or_when_the_report_says_it_was(tmp_path, monkeypatch):
    written = _audit_with_output(tmp_path, monkeypatch, "custom", None, output_keys=("p0", "p1"))[0]
    assert [r.recounted for r in _output_rows(written) if r.metric == "records"] == [2, 2]
    stated = {iso: {"records": 3, "duplicates": 0, "lost": 0, "unprocessed": 0}
              for iso in ("read_committed", "read_uncommitted")}
    rows, why, _notes = _audit_with_output(tmp_path, monkeypatch, "custom", {**stated, "aborted_records": 0})
    records = [r for r in _output_rows(rows) if r.metric == "records"]
    assert why is None and records and all(r.agrees is False for r in records)     # 3 read by the run, 0 now


def test_the_run_and_the_audit_leave_out_an_unused_output_topic_by_one_rule():
    from harness.checker.kafka_output import audited
    assert not audited(False, [0, 0])
    assert audited(False, [0, None])            # a reader that failed: unknown, so audited (as unknown)
    assert audited(False, [0, 2])
    assert audited(True, [0, 0])
