"""confluent-kafka (librdkafka) with its defaults: a group member, auto-commit every 5 s, one insert per payment.

Build (pinned: requirements.txt), from the repository root:

    python -m venv /tmp/ck && /tmp/ck/bin/pip install -r examples/consumers/confluent-kafka/requirements.txt

Run it under the harness:

    harness run custom --worker-cmd "/tmp/ck/bin/python examples/consumers/confluent-kafka/consumer.py" \\
        --expect at-least-once --kill-mode random --kills 10 --workers 2 --partitions 2 --messages 3000 --seed 1

It subscribes to HARNESS_INPUT_TOPIC in HARNESS_GROUP_ID with client.id =
HARNESS_CLIENT_ID and librdkafka's defaults: enable.auto.commit (every 5 s, in a
background thread) of the offsets enable.auto.offset.store stored, and the
store happens when poll() hands a message to the application, before its work.
Each payment is one autocommit insert into the ledger, with the worker and
attempt that applied it. What a kill costs: the payments since the last
auto-commit, applied again by the partition's next owner (at-least-once); and
a payment whose offset was stored and committed in the moment between poll()
and its insert is never applied (the small at-most-once window of the defaults).
"""

import json
import os
import signal

import psycopg
from confluent_kafka import Consumer

env = os.environ
stopping = False


def stop(signum, frame):
    global stopping
    stopping = True


def main() -> None:
    signal.signal(signal.SIGTERM, stop)
    ledger = env["HARNESS_LEDGER_TABLE"]             # schema.table, a plain SQL name
    login = json.loads(env.get("HARNESS_KAFKA_CONFIG") or "{}")   # librdkafka's own names already
    consumer = Consumer({**login, "bootstrap.servers": env["HARNESS_BOOTSTRAP_SERVERS"],
                         "group.id": env["HARNESS_GROUP_ID"], "client.id": env["HARNESS_CLIENT_ID"],
                         "auto.offset.reset": "earliest"})
    consumer.subscribe([env["HARNESS_INPUT_TOPIC"]])
    worker, attempt = env["HARNESS_WORKER"], int(env["HARNESS_ATTEMPT"])
    with psycopg.connect(env["HARNESS_POSTGRES_DSN"], autocommit=True) as db:
        while not stopping:
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            if msg.error():
                print(f"consumer error: {msg.error()}", flush=True)
                continue
            payment = json.loads(msg.value())
            db.execute(f"insert into {ledger} (message_id, amount, worker, attempt) values (%s, %s, %s, %s)",
                       (payment["id"], payment["amount"], worker, attempt))
    consumer.close()                                   # commits the stored offsets (auto-commit on close)


if __name__ == "__main__":
    main()
