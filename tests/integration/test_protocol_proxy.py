"""The protocol proxy (faults/protocol_proxy.py) in front of the session's real broker: a Produce it sends twice
lands twice in the topic (a client without idempotence, so the broker cannot tell the copy), a Produce it holds
reaches the broker late, and its log names exactly the requests it touched. The raw producer speaks no SASL, so
these run on the session's plaintext stack. The protocol faults on the 3-node
cluster, in a run, are in test_latency.py (which has the cluster behind its proxies)."""

import json
import time
import uuid

import pytest

from harness.faults.protocol_proxy import ProtocolProxy, Rule
from tests import kafka_login
from tests.integration.test_cluster import read_keys
from tests.raw_kafka_produce import produce

pytestmark = pytest.mark.integration


@pytest.fixture
def topic(plaintext_stack):
    stack = plaintext_stack
    from confluent_kafka.admin import AdminClient, NewTopic
    admin = AdminClient(kafka_login.config(stack["bootstrap_servers"]))
    name = f"harness-protocol-proxy-{uuid.uuid4().hex[:8]}"
    admin.create_topics([NewTopic(name, 1, 1)])[name].result(30)
    yield name
    admin.delete_topics([name])[name].result(30)


def through_proxy(stack, rule, log):
    host, _, port = stack["bootstrap_servers"].split(",")[0].rpartition(":")
    proxy = ProtocolProxy({1: (host, int(port))}, rule, log)
    return proxy, f"127.0.0.1:{proxy.start()[1]}"


def touched(log) -> list[dict]:
    return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


def test_a_duplicated_produce_lands_twice_and_a_delayed_one_late(plaintext_stack, topic, tmp_path):
    stack = plaintext_stack
    log = tmp_path / "touched.jsonl"
    proxy, address = through_proxy(stack, Rule("duplicate", "Produce"), log)
    try:
        got = produce(address, topic, b"twice", b"v")
    finally:
        proxy.stop()
    assert got["error"] == 0
    (row,) = touched(log)
    assert (row["api"], row["correlation_id"], row["client_id"], row["action"]) == \
        ("Produce", 1, "stranger", "duplicate")

    log2 = tmp_path / "held.jsonl"
    proxy, address = through_proxy(stack, Rule("delay", "Produce", ms=1500), log2)
    try:
        t = time.monotonic()
        assert produce(address, topic, b"late", b"v")["error"] == 0
        took = time.monotonic() - t
    finally:
        proxy.stop()
    (row,) = touched(log2)
    assert (row["api"], row["action"], row["ms"]) == ("Produce", "delay", 1500) and row["held_ms"] >= 1500
    assert took >= 1.5
    # an independent reader of the broker itself: the copy is a second record, the held one is there once
    assert read_keys(stack["bootstrap_servers"], topic, "read_uncommitted") == {"twice": 2, "late": 1}
