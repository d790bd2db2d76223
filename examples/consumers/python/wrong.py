"""A consumer that looks fine and charges twice: it commits the effect long before the offset.

Run it under the harness (from the repository root); the run ends `unexpected`
(exit 1) and names the duplicated payment ids with the kills that caused them:

    harness run custom --worker-cmd "python examples/consumers/python/wrong.py" --kills 12 --partitions 2 --workers 2

Each ledger row is committed to Postgres at once, but the Kafka offset only
every COMMIT_EVERY payments ("for throughput"). A SIGKILL in between
redelivers every payment since the last offset commit, and each is charged
again: at-least-once, not the exactly-once its authors believed.
"""

import json
import os
import signal

import psycopg
from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

COMMIT_EVERY = 200
env = os.environ
stopping = False


def stop(signum, frame):
    global stopping
    stopping = True


def start_positions(consumer) -> list:
    """This slot's partitions at the group's committed offsets (the start, where nothing is committed yet)."""
    wanted = [TopicPartition(env["HARNESS_INPUT_TOPIC"], int(p)) for p in env["HARNESS_PARTITIONS"].split(",") if p]
    return [TopicPartition(tp.topic, tp.partition, tp.offset if tp.offset >= 0 else OFFSET_BEGINNING)
            for tp in consumer.committed(wanted, timeout=30)]


def main() -> None:
    signal.signal(signal.SIGTERM, stop)
    ledger = env["HARNESS_LEDGER_TABLE"]
    consumer = Consumer({**json.loads(env.get("HARNESS_KAFKA_CONFIG") or "{}"),  # the cluster's login, if any
                         "bootstrap.servers": env["HARNESS_BOOTSTRAP_SERVERS"], "group.id": env["HARNESS_GROUP_ID"],
                         "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    consumer.assign(start_positions(consumer))
    pending = 0
    with psycopg.connect(env["HARNESS_POSTGRES_DSN"], autocommit=True) as db:
        while not stopping:
            msg = consumer.poll(0.5)
            if msg is None or msg.error():
                if pending:                       # idle: nothing more to read, commit what was applied
                    consumer.commit(asynchronous=False)
                    pending = 0
                continue
            payment = json.loads(msg.value())
            db.execute(f"insert into {ledger} (message_id, amount) values (%s, %s)", (payment["id"], payment["amount"]))
            pending += 1
            if pending >= COMMIT_EVERY:
                consumer.commit(asynchronous=False)
                pending = 0
    consumer.close()


if __name__ == "__main__":
    main()
