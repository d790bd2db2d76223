"""A record someone else writes into a running run's input topic is named as foreign, with its place.

A real custom run on the session's plaintext stack (`plaintext_stack`, started with `--auth none`: no
Kafka authentication, any local client may produce; on the default SCRAM stack the write is refused,
tests/integration/test_kafka_users.py). Its
consumer, before it starts, says which input topic it reads and waits; then one record is written into
that topic by someone who is not the run's producer (a plain Kafka client of this test, or another local
user the test makes, with nothing but the system's python3), and the consumer goes on: the correct
example consumer, which applies the intruder's payment like any other. The report names that record by
its partition and offset, says who wrote it is unknown to the run, and counts none of the run's own.
A replay (one of the run's own marked records written again, header and all, by a plain client) is
named the same way, with the place of the run's own record it copies.
"""

import json
import subprocess
import sys
import time
import uuid

import pytest

from harness.core.procs import die_with_parent
from tests.conftest import ROOT, as_user, pids_where
from tests.unit.sample_report import validate

pytestmark = pytest.mark.integration

CORRECT = ROOT / "examples" / "consumers" / "python" / "correct.py"


def _wait_for(path, seconds: float) -> str:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if path.exists() and path.read_text().strip():
            return path.read_text().strip()
        time.sleep(0.1)
    raise AssertionError(f"{path} never written")


def _intruder() -> tuple[str, bytes]:
    key = f"intruder-{uuid.uuid4().hex[:6]}\x1b[31m"           # with an escape, shown escaped
    return key, json.dumps({"id": key, "amount": 5}).encode()


def _produce(stack, topic: str, key: bytes, value: bytes, headers=None) -> tuple[int, int]:
    from confluent_kafka import Producer
    placed = []
    p = Producer({"bootstrap.servers": stack["bootstrap_servers"], "log_level": 0})   # not the run's producer
    p.produce(topic, key=key, value=value, headers=headers,
              on_delivery=lambda err, m: placed.append((err, m.partition(), m.offset())))
    assert p.flush(30) == 0
    (err, partition, offset), = placed
    assert err is None
    return partition, offset


def _plain_client(stack, topic: str, request) -> dict:
    key, value = _intruder()
    partition, offset = _produce(stack, topic, key.encode(), value)
    return {"partition": partition, "offset": offset, "key": key, "id": key, "copy_of": None}


def _another_local_user(stack, topic: str, request) -> dict:
    user = request.getfixturevalue("local_user")
    key, value = _intruder()
    got = as_user(user, "/usr/bin/python3", str(ROOT / "tests" / "raw_kafka_produce.py"), stack["bootstrap_servers"],
                  topic, key, value.decode())
    assert got.returncode == 0, got.stderr
    answer = json.loads(got.stdout)
    assert answer["error"] == 0, answer
    return {"partition": answer["partition"], "offset": answer["offset"], "key": key, "id": key, "copy_of": None}


def _replayed_copy(stack, topic: str, request) -> dict:
    """One of the run's own records read back and written again as it is: key, value and its valid mark."""
    from confluent_kafka import Consumer
    c = Consumer({"bootstrap.servers": stack["bootstrap_servers"], "group.id": f"replay-{uuid.uuid4().hex[:8]}",
                  "auto.offset.reset": "earliest", "enable.auto.commit": False, "log_level": 0})
    c.subscribe([topic])
    try:
        deadline = time.monotonic() + 60
        while (m := c.poll(1.0)) is None or m.error():
            assert time.monotonic() < deadline, "none of the run's records could be read"
    finally:
        c.close()
    partition, offset = _produce(stack, topic, m.key(), m.value(), m.headers())
    key = m.key().decode()
    return {"partition": partition, "offset": offset, "key": key, "id": key,
            "copy_of": [m.partition(), m.offset()]}


@pytest.mark.parametrize("write", [_plain_client, _another_local_user, _replayed_copy],
                         ids=["plain-client", "another-local-user", "replayed-copy"])
def test_a_record_written_by_another_client_is_named_with_its_offset(plaintext_stack, tmp_path, write, request):
    stack = plaintext_stack
    topic_file, go = tmp_path / "topic", tmp_path / "go"
    wrapper = tmp_path / "consumer.sh"
    wrapper.write_text(f'#!/bin/sh\necho "$HARNESS_INPUT_TOPIC" > {topic_file}\n'
                       f'i=0; while [ ! -e {go} ] && [ $i -lt 1200 ]; do sleep 0.1; i=$((i+1)); done\n'
                       f'exec {sys.executable} {CORRECT}\n')
    wrapper.chmod(0o755)
    out = tmp_path / "report"
    run = subprocess.Popen([sys.executable, "-m", "harness.cli", "run", "custom", "--worker-cmd", str(wrapper),
                            "--kills", "0", "--messages", "200", "--quiet", "--out", str(out)],
                           env={**__import__("os").environ, **stack["env"]}, cwd=ROOT, text=True,
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, preexec_fn=die_with_parent)
    try:
        topic = _wait_for(topic_file, 300)
        written = write(stack, topic, request)
        partition, offset, key = written["partition"], written["offset"], written["key"]
        go.write_text("go")
        stdout, stderr = run.communicate(timeout=600)
        assert run.returncode == 1, stderr[-3000:]                   # unexpected
        d = json.loads((out / "report.json").read_text())
        validate(d)
        assert d["verdict"] == "unexpected"
        found = d["input_foreign_records"]
        assert found["count"] == 1, found                            # none of the run's own 200 payments
        assert found["records"] == [written]
        failed = [f for f in d["verdict_detail"]["failed"] if f.startswith("input topic foreign records")]
        assert len(failed) == 1, d["verdict_detail"]["failed"]
        assert f"partition {partition} offset {offset} key {key[:9]}" in failed[0]
        if written["copy_of"]:
            assert "(1 of them copies of the run's own records)" in failed[0] and \
                f"(a copy of the run's record at partition {written['copy_of'][0]} offset " \
                f"{written['copy_of'][1]})" in failed[0], failed[0]
        assert "who wrote them is unknown to the run" in failed[0] and "\x1b" not in failed[0]
        md = (out / "report.md").read_text()
        assert f"partition {partition} offset {offset}" in md and "unknown to the run" in md
        assert "\x1b" not in md
    finally:
        go.write_text("go")
        if run.poll() is None:
            run.kill()
            run.wait()
        assert not pids_where(lambda c: str(wrapper) in c)
