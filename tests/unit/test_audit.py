"""observe_run with hand-made store contents: counts, unprocessed, and unknown (never 0) on failure."""

from types import SimpleNamespace

from harness.checker.observe import observe_run
from harness.checker.kafka_output import audit_records
from harness.checker.ledger import LedgerRows
from harness.experiments import get

AMOUNTS = {"a": 100, "b": 100, "c": 100, "d": 100}
POSITIONS = {"a": (0, 0), "b": (0, 1), "c": (0, 2), "d": (0, 3)}
STACK = SimpleNamespace(postgres_dsn="postgresql://x", bootstrap_servers="127.0.0.1:1")
NAMES = SimpleNamespace(ledger_table="harness.ledger_x", dedupe_table="harness.dedupe_x", output_topic="t")


def ledger(rows, hits=None, error=None):
    return lambda dsn, table, dedupe: LedgerRows(
        rows, hits, error, dedupe_rows=[("a", hits)] if hits is not None and dedupe else None,
        dedupe_error=error or ("no dedupe rows given" if dedupe else None))


def output(committed, uncommitted=None, errors=None):
    return lambda bootstrap, topic, sent, amounts: audit_records(
        sent, {"read_committed": committed, "read_uncommitted": uncommitted or committed}, errors, amounts)


def test_a_finished_run_counts_every_missing_id_as_lost():
    a = observe_run(get("offset-before"), STACK, NAMES, AMOUNTS, POSITIONS, {0: 4}, True,
                  ledger_reader=ledger([("a", 100), ("b", 100)]))
    assert (a.ledger.lost, a.ledger.unprocessed, a.ledger.lost_ids) == (2, 0, ["c", "d"])
    assert a.metrics == {"ledger.duplicates": 0, "ledger.lost": 2, "ledger.dedupe_hits": None}


def test_an_interrupted_run_reports_what_it_never_reached_as_unprocessed():
    # committed up to offset 2: c was acknowledged and never applied (lost); d was never reached.
    a = observe_run(get("offset-before"), STACK, NAMES, AMOUNTS, POSITIONS, {0: 3}, False,
                  ledger_reader=ledger([("a", 100), ("b", 100)]))
    assert (a.ledger.lost, a.ledger.unprocessed) == (1, 1)
    assert a.ledger.lost_ids == ["c"] and a.ledger.unprocessed_ids == ["d"]


def test_without_committed_offsets_an_unfinished_run_leaves_lost_unknown():
    a = observe_run(get("offset-after"), STACK, NAMES, AMOUNTS, POSITIONS, None, False,
                  ledger_reader=ledger([("a", 100)]))
    assert a.ledger.lost is None and a.ledger.effects == 1


def test_a_ledger_that_cannot_be_read_is_unknown_not_zero():
    a = observe_run(get("dedupe"), STACK, NAMES, AMOUNTS, POSITIONS, {0: 4}, True,
                  ledger_reader=ledger(None, error="connection refused"))
    assert a.ledger.effects is None and a.ledger.lost is None and a.ledger_total is None
    assert a.metrics["ledger.duplicates"] is None
    assert a.evidence.errors == ["ledger: connection refused", "dedupe table: connection refused"]
    assert a.metrics["ledger.dedupe_hits"] is None


def test_an_unreadable_output_is_unknown_and_a_readable_one_is_checked():
    a = observe_run(get("eos"), STACK, NAMES, AMOUNTS, POSITIONS, {0: 4}, True,
                  output_reader=output([], errors={"read_committed": "topic not found"}))
    assert a.output["read_committed"].lost is None and a.metrics["kafka.read_committed.lost"] is None
    assert a.output["read_uncommitted"].lost == 4
    good = [(i, f'{{"id": "{i}", "amount": 100}}'.encode()) for i in AMOUNTS]
    a = observe_run(get("eos"), STACK, NAMES, AMOUNTS, POSITIONS, {0: 4}, True,
                  output_reader=output(good, good + good[:1]))
    assert a.metrics["kafka.read_uncommitted.duplicates"] == 1 and a.output["aborted_records"] == 1
    assert not a.evidence.integrity


def test_a_changed_amount_and_a_stray_row_reach_the_evidence():
    rows = [("a", 100), ("b", 100), ("c", 5), ("d", 100), ("pay-999999", 100)]
    a = observe_run(get("dedupe"), STACK, NAMES, AMOUNTS, POSITIONS, {0: 4}, True, ledger_reader=ledger(rows, 0))
    named = {i for _, ids in a.evidence.integrity for i in ids}
    assert {"c", "pay-999999"} <= named


def test_an_unreadable_dedupe_table_leaves_the_ledger_known():
    rows = [(i, 100) for i in AMOUNTS]
    reader = lambda dsn, table, dedupe: LedgerRows(rows, None, None, None, 'relation "x" does not exist')  # noqa: E731
    a = observe_run(get("dedupe"), STACK, NAMES, AMOUNTS, POSITIONS, {0: 4}, True, ledger_reader=reader)
    assert (a.ledger.effects, a.ledger.lost, a.ledger_total) == (4, 0, 400)
    assert a.dedupe_hits is None and a.evidence.errors == ['dedupe table: relation "x" does not exist']
