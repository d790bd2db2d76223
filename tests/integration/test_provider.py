"""The payment provider on the real stack: its Stripe semantics against a real PostgreSQL, and the provider
experiment's runs with real SIGKILLs of the consumers and of the provider itself, counted with plain SQL."""

import json
from types import SimpleNamespace

import psycopg
import pytest
from psycopg import sql

from harness.experiments.provider.provider_app import KEY_HEADER, REPLAYED_HEADER, make_app
from harness.runtime.evidence import Events, KillSwitch
from harness.workload import tables
from harness.workload.naming import RunNames, new_run_id
from harness.workload.sqlnames import table_identifier
from tests.integration.test_experiments import run_exp
from harness.reporting.summary import whole

pytestmark = pytest.mark.integration


def rows(stack, query: str, table: str) -> list:
    with psycopg.connect(stack["dsn"]) as conn:
        return conn.execute(sql.SQL(query).format(table_identifier(table))).fetchall()


def test_the_provider_keeps_stripes_idempotency_semantics(stack, tmp_path):
    names = RunNames(new_run_id("provider-http"))
    tables.create(stack["dsn"], names.ledger_table, names.dedupe_table)
    pg = psycopg.connect(stack["dsn"], autocommit=True)
    try:
        ctx = SimpleNamespace(args=SimpleNamespace(ledger=names.ledger_table, dedupe=names.dedupe_table), pg=pg,
                              events=Events(tmp_path / "events.jsonl", "provider-0", 1), worker="provider-0",
                              attempt=1, kill=KillSwitch(None, tmp_path / "crash-log.jsonl", "provider-0", 1, "provider"),
                              deliver=lambda r: r)
        client = make_app(ctx, "before", "after", prefix="/run-1").test_client()

        def post(amount, key=None, pid="pay-000001"):
            return client.post("/run-1/v1/charges", json={"payment_id": pid, "amount": amount},
                               headers={KEY_HEADER: key} if key else {})
        # Without a key, every call charges.
        assert post(100).status_code == post(100).status_code == 200
        # With one: the first charges, the same again replays its answer, other parameters are refused.
        first = post(100, key="k-1", pid="pay-000002")
        again = post(100, key="k-1", pid="pay-000002")
        other = post(250, key="k-1", pid="pay-000002")
        assert first.status_code == again.status_code == 200 and again.get_json() == first.get_json()
        assert REPLAYED_HEADER not in first.headers and again.headers[REPLAYED_HEADER] == "true"
        assert other.status_code == 422 and "same parameters" in other.get_json()["error"]
        assert pg.info.transaction_status == psycopg.pq.TransactionStatus.IDLE     # nothing left open
        assert post(-5).status_code == post("x").status_code == 400
        assert client.post("/run-1/v1/charges", data=b"not json", content_type="application/json").status_code == 400
        assert client.post("/elsewhere/v1/charges", json={"payment_id": "p", "amount": 1}).status_code == 404
        assert rows(stack, "select message_id, amount from {} order by id", names.ledger_table) == [
            ("pay-000001", 100), ("pay-000001", 100), ("pay-000002", 100)]
        assert rows(stack, "select message_id, hits, response is not null from {}", names.dedupe_table) == [
            ("k-1", 1, True)]
        assert json.loads((tmp_path / "events.jsonl").read_text().splitlines()[0])["event"] == "first_message"
    finally:
        pg.close()
        tables.drop(stack["dsn"], [names.ledger_table, names.dedupe_table])


def test_without_a_key_each_redelivered_call_charges_again_and_with_one_the_ledger_is_exact(stack, tmp_path):
    off = run_exp(stack, tmp_path / "off", "provider", "--messages", "200")
    on = run_exp(stack, tmp_path / "on", "provider", "--messages", "200", "--idempotency-key", "on")
    assert off["counts"]["duplicates"] == off["predicted"]["duplicates"] == len(off["crashes"]) == 20
    assert {c["message_id"] for c in off["crashes"]} == set(off["anomalies"]["duplicate_ids"])
    assert rows(stack, "select count(*), count(distinct message_id) from {}", off["stack"]["ledger_table"]) == [(220, 200)]
    assert on["counts"]["duplicates"] == 0 and on["counts"]["dedupe_hits"] == on["predicted"]["dedupe_hits"] == 20
    assert rows(stack, "select count(*), sum(amount) from {}", on["stack"]["ledger_table"]) == [(200, 20_000)]
    assert rows(stack, "select count(*), sum(hits) from {}", on["stack"]["dedupe_table"]) == [(200, 20)]


def test_a_provider_killed_between_charge_and_answer_charges_again_unless_the_retry_has_its_key(stack, tmp_path):
    point = "provider-after-charge-before-response"
    off = run_exp(stack, tmp_path / "off", "provider", "--messages", "100", "--kill-point", point)
    on = run_exp(stack, tmp_path / "on", "provider", "--messages", "100", "--kill-point", point,
                 "--idempotency-key", "on")
    for d in (off, on):
        assert len(d["crashes"]) == 10 and {c["worker"] for c in d["crashes"]} == {"provider-0"}
        assert "10 call(s) to the provider got no answer once sent" in whole(d)
        assert d["outside_calls"]["calls_with_unknown_outcome"] == d["outside_calls"]["attempts_unknown"] == 10
    assert off["counts"]["duplicates"] == 10 and on["counts"]["duplicates"] == 0
    assert on["counts"]["dedupe_hits"] == 10
    assert rows(stack, "select count(distinct attempt) from {}", off["stack"]["ledger_table"]) == [(11,)]
