"""The stop's fence (harness/run/stop_fence.py) on hand-made runs, with a fake producer: which
transactional.ids it fences, what each entry then says, and that its producer logs through the harness's
logger (a raw librdkafka line printed over the scoreboard after a Ctrl-C was the symptom)."""

import logging
import types

import confluent_kafka
import pytest

from harness.clients import kafka_logging
from harness.run.stop_fence import fence_stopped


class FakeProducer:
    made: list[dict] = []

    def __init__(self, conf):
        FakeProducer.made.append(conf)

    def init_transactions(self, timeout):
        assert timeout > 0


@pytest.fixture
def fake(monkeypatch):
    FakeProducer.made = []
    monkeypatch.setattr(confluent_kafka, "Producer", FakeProducer)
    return FakeProducer


def a_run(output=True):
    return types.SimpleNamespace(exp=types.SimpleNamespace(stores=types.SimpleNamespace(output=output)),
                                 stack=types.SimpleNamespace(bootstrap_servers="127.0.0.1:1"),
                                 names=types.SimpleNamespace(run_id="r1"))


def test_each_stopped_worker_is_fenced_by_its_ids_with_the_harness_logger(fake):
    launcher = types.SimpleNamespace(open_transactional_ids=lambda r, slot, attempt: [f"tx-{slot}-{attempt}"])
    result = types.SimpleNamespace(killed_at_stop=[{"worker": "w0", "attempt": 17}],
                                   unrestarted_at_stop=[{"worker": "w1", "attempt": 3}])
    said = []
    fence_stopped(a_run(), launcher, result, said.append)
    assert [c["transactional.id"] for c in fake.made] == ["tx-0-17", "tx-1-3"]
    assert all(isinstance(c.get("logger"), logging.Logger) and c["logger"].name == kafka_logging.LOGGER_NAME
               for c in fake.made), fake.made
    assert [e["transaction"] for e in result.killed_at_stop + result.unrestarted_at_stop] == ["fenced", "fenced"]
    assert said == ["[r1] fenced the transactional.id of 2 worker(s) the stop SIGKILLed or left without a successor, "
                    "aborting what they had left open"]


def test_nothing_is_fenced_without_an_output_topic_or_a_stopped_worker(fake):
    launcher = types.SimpleNamespace(open_transactional_ids=lambda r, slot, attempt: ["tx"])
    fence_stopped(a_run(output=False), launcher, types.SimpleNamespace(killed_at_stop=[{"worker": "w0"}]), print)
    fence_stopped(a_run(), launcher, types.SimpleNamespace(killed_at_stop=[], unrestarted_at_stop=[]), print)
    assert fake.made == []


def test_the_fences_retry_while_the_broker_aborts_stays_off_the_terminal():
    """librdkafka's CONCURRENT_TRANSACTIONS retry of init_transactions: routine, the file keeps it."""
    import io
    out = io.StringIO()
    handler = kafka_logging.RateLimitedHandler(out)
    text = ("Failed to acquire transactional PID from broker TxnCoordinator/1: Broker: Producer attempted to update "
            "a transaction while another concurrent operation on the same transaction was ongoing: retrying")
    handler.emit(logging.LogRecord("harness.kafka", logging.WARNING, "", 0, text, None, None))
    assert out.getvalue() == ""
    handler.emit(logging.LogRecord("harness.kafka", logging.WARNING, "", 0, "Broker: something else", None, None))
    assert "something else" in out.getvalue()
