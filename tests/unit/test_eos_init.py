"""eos.init_transactions: re-called while the coordinator refuses it, never past a fatal error."""

import pytest
from confluent_kafka import KafkaError, KafkaException

from harness.experiments.eos import eos_loops as eos


class FakeProducer:
    def __init__(self, errors):
        self.errors, self.calls = list(errors), []

    def init_transactions(self, timeout):
        self.calls.append(timeout)
        if self.errors:
            raise KafkaException(self.errors.pop(0))


def refused():
    return KafkaError(KafkaError.CONCURRENT_TRANSACTIONS, "concurrent", retriable=True)


def test_refusals_are_followed_by_immediate_new_calls_until_it_succeeds():
    p = FakeProducer([refused(), refused()])
    assert eos.init_transactions(p) == 3
    assert p.calls == [eos.INIT_STEP_S] * 3            # short calls: never librdkafka's 500 ms timer


def test_a_fatal_error_is_raised_at_once():
    p = FakeProducer([KafkaError(KafkaError._FENCED, "fenced", fatal=True)])
    with pytest.raises(KafkaException):
        eos.init_transactions(p)
    assert len(p.calls) == 1


def test_refusals_past_the_deadline_are_raised():
    p = FakeProducer([refused()] * 1000)
    with pytest.raises(KafkaException):
        eos.init_transactions(p, within_s=0.0)
    assert len(p.calls) == 1
