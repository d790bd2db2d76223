"""The workload is produced lazily: payments are made while they are sent, never all at once first."""

import types

import pytest

from harness.core.errors import HarnessError
from harness.workload import payments
from harness.workload.payments import iter_payments, make_payments


def test_iter_payments_yields_what_make_payments_lists():
    it = iter_payments(5, 100, payload_bytes=200)
    assert isinstance(it, types.GeneratorType)
    assert list(it) == make_payments(5, 100, payload_bytes=200)
    assert [p.id for p in make_payments(3, 1)] == ["pay-000001", "pay-000002", "pay-000003"]


class FakeProducer:
    """Stands in for confluent_kafka.Producer: acks (or fails) each record on the next poll."""

    log: list = []
    fail = False

    def __init__(self, config):
        assert "logger" in config, "the payments producer logs through harness.clients.kafka_logging"
        self.pending = []

    def list_topics(self, topic=None, timeout=None):
        self.log.append(("connect", topic))

    def produce(self, topic, key, value, on_delivery):
        self.log.append(("produce", key.decode()))
        self.pending.append(on_delivery)

    def poll(self, _timeout=0):
        for cb in self.pending:
            cb("broker down" if self.fail else None, None)
        self.pending = []

    def flush(self, _timeout=0):
        self.poll()
        return 0


@pytest.fixture
def fake_producer(monkeypatch):
    import confluent_kafka
    FakeProducer.log, FakeProducer.fail = [], False
    monkeypatch.setattr(confluent_kafka, "Producer", FakeProducer)
    return FakeProducer


def test_produce_reads_the_payments_one_at_a_time(fake_producer):
    def source():
        for p in iter_payments(3, 100):
            fake_producer.log.append(("made", p.id))
            yield p
    assert payments.produce("127.0.0.1:1", "t", source()) == 3
    # connected first (two metadata answers): an idempotent producer without a connection asks for its producer
    # id 500 ms later
    assert fake_producer.log == [("connect", "t"), ("connect", "t"), ("made", "pay-000001"), ("produce", "pay-000001"),
                                 ("made", "pay-000002"), ("produce", "pay-000002"),
                                 ("made", "pay-000003"), ("produce", "pay-000003")]


def test_a_failed_produce_from_a_generator_is_one_clear_line(fake_producer):
    fake_producer.fail = True
    with pytest.raises(HarnessError) as e:
        payments.produce("127.0.0.1:1", "t", iter_payments(4, 100))
    assert str(e.value) == "producing the workload failed: 0 of 4 acked; first error: broker down"
