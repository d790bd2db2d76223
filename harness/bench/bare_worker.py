"""Bare baselines for the throughput benchmark: no harness code, one process.

Run as a script (`python .../harness/bench/bare_worker.py MODE ...`) so that not
even the harness package is imported; only confluent-kafka and psycopg. The
benchmark sets up the topic, the table and the records beforehand; this loop
is what is timed, from its first record to its last commit.

  insert   per record: poll, INSERT one ledger row (autocommit), commit the offset synchronously
           (the same work as the harness's offset-after with --commit-every 1)
  produce  per record: poll, produce a transformed record to the output topic (idempotent
           producer, acks=all, linger.ms=5); every --commit-interval-ms: flush, commit offsets
           synchronously (a non-transactional consume-transform-produce loop: what `eos` is
           without the transaction)

The DSN comes from HARNESS_WORKER_DSN (never argv), the Kafka client settings
(credentials) from HARNESS_KAFKA_CLIENT_SETTINGS, as harness.clients.kafka_client passes them. Writes one JSON object to --result:
{"messages", "first", "done"} (epoch seconds).
"""

import argparse
import ctypes
import json
import os
import signal
import sys
import time


def die_with_parent() -> None:
    try:
        ctypes.CDLL("libc.so.6").prctl(1, signal.SIGKILL, 0, 0, 0)    # PR_SET_PDEATHSIG
    except OSError:
        pass


def commit(consumer, offsets, seconds: float = 30.0) -> None:
    """Synchronous offset commit, retried while the group coordinator is loading (a fresh broker)."""
    from confluent_kafka import KafkaException
    deadline = time.monotonic() + seconds
    while True:
        try:
            consumer.commit(offsets=offsets, asynchronous=False)
            return
        except KafkaException as e:
            if time.monotonic() > deadline or not (e.args[0].retriable() or "coordinator" in str(e).lower()):
                raise
            time.sleep(0.1)


def client_settings(bootstrap: str) -> dict:
    """The user's Kafka client settings for `bootstrap`, read as harness.clients.kafka_client.settings_for does
    (that module is not imported here: see the docstring)."""
    try:
        return dict(json.loads(os.environ.get("HARNESS_KAFKA_CLIENT_SETTINGS") or "{}").get(bootstrap) or {})
    except (ValueError, AttributeError, TypeError):
        return {}


def main(argv=None) -> int:
    die_with_parent()
    ap = argparse.ArgumentParser(prog="harness-bench-bare-worker")
    ap.add_argument("mode", choices=("insert", "produce"))
    ap.add_argument("--bootstrap", required=True)
    ap.add_argument("--topic", required=True)
    ap.add_argument("--group", required=True)
    ap.add_argument("--messages", type=int, required=True)
    ap.add_argument("--result", required=True)
    ap.add_argument("--table")
    ap.add_argument("--output-topic")
    ap.add_argument("--commit-interval-ms", type=int, default=100)
    args = ap.parse_args(argv)

    from confluent_kafka import Consumer, Producer, KafkaException, TopicPartition, OFFSET_BEGINNING

    cluster = {**client_settings(args.bootstrap), "bootstrap.servers": args.bootstrap}
    c = Consumer({**cluster, "group.id": args.group, "enable.auto.commit": False,
                  "auto.offset.reset": "earliest", "fetch.wait.max.ms": 20, "log_level": 3})
    c.assign([TopicPartition(args.topic, 0, OFFSET_BEGINNING)])
    pg = producer = None
    if args.mode == "insert":
        import psycopg
        pg = psycopg.connect(os.environ["HARNESS_WORKER_DSN"], autocommit=True, connect_timeout=10)
        sql = f"insert into {args.table} (message_id, amount, worker, attempt) values (%s, %s, %s, %s)"
    else:
        producer = Producer({**cluster, "enable.idempotence": True, "acks": "all", "linger.ms": 5, "log_level": 3})
    interval = args.commit_interval_ms / 1000.0

    n, first, last_commit, pending = 0, None, time.monotonic(), None
    while n < args.messages:
        for m in c.consume(num_messages=500, timeout=0.1):
            if m.error():
                raise KafkaException(m.error())
            if first is None:
                first = time.time()
            value = json.loads(m.value())
            n += 1
            if pg is not None:
                pg.execute(sql, (m.key().decode(), int(value["amount"]), "bare", 1))
                commit(c, [TopicPartition(args.topic, m.partition(), m.offset() + 1)])
                continue
            value.update(worker="bare", attempt=1)
            while True:
                try:
                    producer.produce(args.output_topic, key=m.key(), value=json.dumps(value).encode())
                    break
                except BufferError:
                    producer.poll(0.05)
            producer.poll(0)
            pending = TopicPartition(args.topic, m.partition(), m.offset() + 1)
            if time.monotonic() - last_commit >= interval:
                producer.flush(30)
                commit(c, [pending])
                pending, last_commit = None, time.monotonic()
    if producer is not None:
        if producer.flush(30):
            raise SystemExit("bare produce: records not delivered within 30 s")
        if pending is not None:
            commit(c, [pending])
    done = time.time()
    with open(args.result, "w") as f:
        json.dump({"messages": n, "first": first, "done": done}, f)
    c.close()
    if pg is not None:
        pg.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
