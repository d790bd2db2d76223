"""A consumer that applies each payment once: its idempotency key lives in the effect's transaction.

Run it under the harness (from this folder):

    harness run custom --worker-cmd "python consumer.py" --kills 12 --partitions 2 --workers 2

Each payment is applied in one Postgres transaction that first takes a lock on
the payment id in this run's ledger (two keys: the ledger table's name and the
id, so runs sharing a database never wait for each other's locks) and inserts
the ledger row only if the id has none yet: the
ledger row is its own idempotency key. The Kafka offset is committed after
that transaction. A SIGKILL between the two redelivers the payment, and the
key absorbs it. It reads everything it needs from the HARNESS_* environment.
"""

import json
import os
import signal

import psycopg
from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

env = os.environ
stopping = False
# One advisory lock per (ledger, payment id): another run's ledger is another lock, even for the same id.
LOCK = "select pg_advisory_xact_lock(hashtext(%s), hashtext(%s))"


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
    ledger = env["HARNESS_LEDGER_TABLE"]             # schema.table, a plain SQL name
    consumer = Consumer({**json.loads(env.get("HARNESS_KAFKA_CONFIG") or "{}"),  # the run's Kafka login, if any
                         "bootstrap.servers": env["HARNESS_BOOTSTRAP_SERVERS"], "group.id": env["HARNESS_GROUP_ID"],
                         "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    consumer.assign(start_positions(consumer))
    with psycopg.connect(env["HARNESS_POSTGRES_DSN"]) as db:
        while not stopping:
            msg = consumer.poll(0.5)
            if msg is None or msg.error():
                continue
            payment = json.loads(msg.value())
            with db.transaction():
                db.execute(LOCK, (ledger, payment["id"]))
                db.execute(f"insert into {ledger} (message_id, amount) select %s, %s "
                           f"where not exists (select 1 from {ledger} where message_id = %s)",
                           (payment["id"], payment["amount"], payment["id"]))
            consumer.commit(message=msg, asynchronous=False)
    consumer.close()


if __name__ == "__main__":
    main()
