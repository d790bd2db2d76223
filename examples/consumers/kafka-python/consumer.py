"""kafka-python with its defaults: a group member, auto-commit every 5 s, one Postgres insert per payment.

Build (pinned: requirements.txt), from the repository root:

    python -m venv /tmp/kp && /tmp/kp/bin/pip install -r examples/consumers/kafka-python/requirements.txt

Run it under the harness:

    harness run custom --worker-cmd "/tmp/kp/bin/python examples/consumers/kafka-python/consumer.py" \\
        --expect at-least-once --kills 10 --workers 2 --partitions 2 --messages 3000 --seed 1

It subscribes to HARNESS_INPUT_TOPIC in HARNESS_GROUP_ID with client_id =
HARNESS_CLIENT_ID and the client's defaults (enable_auto_commit, every 5 s, of
what poll returned); each payment is one autocommit insert into the ledger, with
the worker and attempt that applied it. What a kill between an insert and the
next auto-commit costs: the payments since that commit, applied again by the
partition's next owner (at-least-once).
"""

import json
import os
import signal

import psycopg
from kafka import KafkaConsumer

env = os.environ
stopping = False


def stop(signum, frame):
    global stopping
    stopping = True


def login() -> dict:
    """The cluster's login (HARNESS_KAFKA_CONFIG, librdkafka's names) in kafka-python's names."""
    conf = json.loads(env.get("HARNESS_KAFKA_CONFIG") or "{}")
    names = {"security.protocol": "security_protocol", "sasl.mechanism": "sasl_mechanism",
             "sasl.username": "sasl_plain_username", "sasl.password": "sasl_plain_password"}
    unknown = sorted(set(conf) - set(names))
    if unknown:
        raise SystemExit(f"kafka-python example: no mapping for Kafka settings {', '.join(unknown)}")
    return {names[k]: v for k, v in conf.items()}


def main() -> None:
    signal.signal(signal.SIGTERM, stop)
    ledger = env["HARNESS_LEDGER_TABLE"]             # schema.table, a plain SQL name
    consumer = KafkaConsumer(env["HARNESS_INPUT_TOPIC"], bootstrap_servers=env["HARNESS_BOOTSTRAP_SERVERS"].split(","),
                             group_id=env["HARNESS_GROUP_ID"], client_id=env["HARNESS_CLIENT_ID"],
                             auto_offset_reset="earliest", **login())
    worker, attempt = env["HARNESS_WORKER"], int(env["HARNESS_ATTEMPT"])
    with psycopg.connect(env["HARNESS_POSTGRES_DSN"], autocommit=True) as db:
        while not stopping:
            for records in consumer.poll(timeout_ms=500).values():
                for msg in records:
                    payment = json.loads(msg.value)
                    db.execute(f"insert into {ledger} (message_id, amount, worker, attempt) values (%s, %s, %s, %s)",
                               (payment["id"], payment["amount"], worker, attempt))
    consumer.close()                                   # commits what was polled (auto-commit on close)


if __name__ == "__main__":
    main()
