"""Balances: the seeded accounts of the workload, the balance predictor on hand-made crash records, and the
accounts audit on hand-made table rows (unknown, never 0, when the table cannot be read)."""

import json
from types import SimpleNamespace

from harness.checker.accounts import AccountRows
from harness.checker.observe import observe_run
from harness.checker.ledger import LedgerRows
from harness.checker.predict import predict
from harness.experiments import get
from harness.workload.payments import account_partition, make_payments

AMOUNTS = {"a": 100, "b": 100, "c": 50, "d": 100}
ACCOUNTS = {"a": "acct-1", "b": "acct-2", "c": "acct-1", "d": "acct-2"}
STACK = SimpleNamespace(postgres_dsn="postgresql://x", bootstrap_servers="127.0.0.1:1")
NAMES = SimpleNamespace(ledger_table="harness.ledger_x", dedupe_table="harness.dedupe_x",
                        accounts_table="harness.acct_x", output_topic="t")


def crash(msg, point, unacked=()):
    return {"point": point, "message_id": msg, "unacked": list(unacked), "acked_unapplied": [], "produced": [],
            "time": 1.0, "worker": "w0", "attempt": 1}


def expectations(p):
    return {e.metric: (e.op, e.value) for e in p.expectations}


def test_accounts_are_a_seeded_draw_with_versions_and_balances_per_account():
    pays = make_payments(200, 100, accounts=5, seed=41)
    assert pays == make_payments(200, 100, accounts=5, seed=41)
    assert [p.account for p in pays] != [p.account for p in make_payments(200, 100, accounts=5, seed=42)]
    assert {p.account for p in pays} == {f"acct-{i}" for i in range(1, 6)}
    for acct in {p.account for p in pays}:
        mine = [p for p in pays if p.account == acct]
        assert [p.version for p in mine] == list(range(1, len(mine) + 1))
        assert [p.balance for p in mine] == [100 * n for n in range(1, len(mine) + 1)]
    v = json.loads(pays[0].value())
    assert set(v) == {"id", "amount", "seq", "account", "version", "balance"}
    assert make_payments(3, 100)[0].account is None and "account" not in json.loads(make_payments(1, 1)[0].value())


def test_each_account_has_one_partition():
    assert {account_partition("acct-3", 4) for _ in range(3)} == {account_partition("acct-3", 4)}
    assert all(0 <= account_partition(f"acct-{i}", 3) < 3 for i in range(1, 6))


def test_a_blind_increment_puts_each_account_over_by_its_redelivered_amounts():
    c = [crash("c", "after-update-before-commit", unacked=["a", "c"]),
         crash("d", "after-poll-before-update", unacked=["d"])]
    e = expectations(predict(get("increment"), c, amounts=AMOUNTS, accounts=ACCOUNTS))
    assert e["accounts.acct-1.balance"] == ("==", 150 + 150) and e["accounts.acct-2.balance"] == ("==", 200 + 100)
    assert e["ledger.duplicates"] == ("==", 3) and e["ledger.dedupe_hits"] == ("==", 0)


def test_a_blind_increment_with_a_random_kill_is_bounded_by_the_largest_payment():
    c = [crash("c", "after-update-before-commit", unacked=["c"]),
         {"point": "random", "message_id": None, "time": 2.0, "worker": "w0", "by": "supervisor"}]
    p = predict(get("increment"), c, inflight_max=2, amounts=AMOUNTS, accounts=ACCOUNTS)
    assert expectations(p)["accounts.acct-1.balance"] == ("<=", 150 + 50 + 2 * 100) and not p.exact


def test_a_versioned_write_keeps_every_balance_exact_and_counts_redeliveries_as_hits():
    c = [crash("c", "after-update-before-commit", unacked=["a", "c"]),
         {"point": "random", "message_id": None, "time": 2.0, "worker": "w0", "by": "supervisor"}]
    e = expectations(predict(get("versioned"), c[:1], amounts=AMOUNTS, accounts=ACCOUNTS))
    assert e["accounts.acct-1.balance"] == ("==", 150) and e["accounts.acct-2.balance"] == ("==", 200)
    assert e["ledger.dedupe_hits"] == ("==", 2) and e["ledger.duplicates"] == ("==", 0)
    e = expectations(predict(get("versioned"), c, amounts=AMOUNTS, accounts=ACCOUNTS))
    assert e["accounts.acct-1.balance"] == ("==", 150)          # whatever the instant: still exact


def ledger(rows):
    return lambda dsn, table, dedupe: LedgerRows(rows, None)


def test_the_audit_reads_each_balance_and_the_stale_updates():
    rows = [("a", 100), ("b", 100), ("c", 50), ("d", 100)]
    a = observe_run(get("versioned"), STACK, NAMES, AMOUNTS, None, None, True, ledger_reader=ledger(rows),
                  accounts=ACCOUNTS, accounts_reader=lambda dsn, t: AccountRows([("acct-1", 150, 2, 1),
                                                                                  ("acct-2", 200, 2, 3)]))
    assert a.metrics["accounts.acct-1.balance"] == 150 and a.metrics["ledger.dedupe_hits"] == 4
    assert a.accounts[1] == {"account": "acct-2", "expected": 200, "actual": 200, "version": 2, "stale_updates": 3}
    assert not a.evidence.errors


def test_an_unreadable_accounts_table_is_unknown_and_an_audit_error():
    a = observe_run(get("increment"), STACK, NAMES, AMOUNTS, None, None, True, ledger_reader=ledger([]),
                  accounts=ACCOUNTS, accounts_reader=lambda dsn, t: AccountRows(None, "relation does not exist"))
    assert a.metrics["accounts.acct-1.balance"] is None and a.metrics["ledger.dedupe_hits"] is None
    assert [r["actual"] for r in a.accounts] == [None, None]
    assert any("accounts table" in e for e in a.evidence.errors)


def test_a_missing_account_row_is_unknown_not_zero():
    a = observe_run(get("increment"), STACK, NAMES, AMOUNTS, None, None, True, ledger_reader=ledger([]),
                  accounts=ACCOUNTS, accounts_reader=lambda dsn, t: AccountRows([("acct-1", 150, 0, 0)]))
    assert a.metrics["accounts.acct-2.balance"] is None and any("acct-2" in e for e in a.evidence.errors)


def test_the_balances_section_follows_the_schema_and_shows_in_markdown_and_html():
    import copy

    import jsonschema
    import pytest

    from harness.reporting import html, markdown
    from harness.reporting.run_report import RunReport
    from tests.unit.sample_report import sample, validate
    d = sample("increment")
    d["stack"]["accounts_table"] = "harness.acct_x"
    d["accounts"] = {"expected_total": 300, "actual_total": 400, "accounts": [
        {"account": "acct-1", "expected": 100, "predicted": 200, "predicted_op": "==", "actual": 200, "version": 0,
         "stale_updates": 0},
        {"account": "acct-2", "expected": 200, "predicted": 200, "predicted_op": "==", "actual": None,
         "version": None, "stale_updates": None}]}
    validate(d)
    r = RunReport(d)
    md, page = markdown.render(r), html.render(r)
    assert "## Balances" in md and "| acct-1 | 100 | 200 | 200 | +100 | 0 | 0 |" in md
    assert "| acct-2 | 200 | 200 | unknown | unknown |" in md
    assert "<h2>Balances</h2>" in page and "acct-2" in page
    bad = copy.deepcopy(d)
    bad["accounts"]["accounts"][0]["actual"] = "lots"
    with pytest.raises(jsonschema.ValidationError):
        validate(bad)
    validate({**sample("offset-after"), "accounts": None})
