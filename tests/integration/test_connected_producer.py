"""`kafka_client.connected_producer` on a real broker: an idempotent producer is handed out with its producer
id asked for (or already given), never still waiting out librdkafka's 500 ms producer-id timer.

Before: one metadata answer was awaited. It could come through the bootstrap connection, which librdkafka
drops once the answer names the brokers, so the producer asked for its id while no connection was up
(`RequestPID -> WaitTransport`) and asked again only 500 ms later: 2 of 12 such producers on a quiet machine,
6 of 12 on a loaded one, and 36 of 100 restarts of the outbox relay waited so. The producer's own eos trace
(librdkafka's `debug=eos`, written to stderr by the thread that logs, as it happens) says which state it was in
when handed out: librdkafka's metadata handler runs the producer-id state machine before it sends the reply
that ends `list_topics` (rdkafka_metadata.c), so a state change that answer caused is written before the
marker."""

import re
import subprocess
import sys
import uuid

import pytest

from harness.workload.payments import create_topic
from tests import kafka_login
from tests.conftest import ROOT

pytestmark = pytest.mark.integration
PRODUCERS = 40
CHILD = """
import os, sys
from harness.clients import kafka_client
bootstrap, topic, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
for i in range(n):
    p = kafka_client.connected_producer(bootstrap, {"enable.idempotence": True, "debug": "eos"}, topic)
    os.write(2, b"HANDED-OUT\\n")
    p.produce(topic, b"x")
    assert p.flush(30) == 0
    del p       # destroyed before the next one starts: its last trace lines come before the next one's
"""
STATE = re.compile(r"Idempotent producer state change (\S+) -> (\S+)")


def test_an_idempotent_producer_is_handed_out_with_its_producer_id_asked_for(stack):
    from confluent_kafka.admin import AdminClient
    boot = stack["bootstrap_servers"]
    topic = f"harness.test-connected-{uuid.uuid4().hex[:8]}"
    create_topic(boot, topic, 1)
    try:
        proc = subprocess.run([sys.executable, "-c", CHILD, boot, topic, str(PRODUCERS)], cwd=ROOT,
                              capture_output=True, text=True, timeout=120)
        assert proc.returncode == 0, proc.stderr[-3000:]
        handed, state = [], None
        for line in proc.stderr.splitlines():
            m = STATE.search(line)
            if m:
                state = m.group(2)
            elif line == "HANDED-OUT":
                handed.append(state)
                state = None
        assert len(handed) == PRODUCERS
        # WaitPID: its InitProducerId is on its way; Assigned: answered. Never RequestPID or WaitTransport.
        assert [s for s in handed if s not in ("WaitPID", "Assigned")] == [], handed
    finally:
        admin = AdminClient(kafka_login.config(boot))
        for fut in admin.delete_topics([topic], operation_timeout=30).values():
            fut.result(45)
