"""A consumer in a real group: it subscribes, applies each payment in a transaction, then commits its offset.

Run it under the harness (from the repository root):

    harness run custom --worker-cmd "python examples/consumers/python/group.py" --expect at-least-once \\
        --kills 12 --partitions 2 --workers 2 --messages 3000

It ignores HARNESS_PARTITIONS: it subscribes to the input topic as a member of
HARNESS_GROUP_ID (the classic protocol, auto-commit off), so the group decides
who reads what, and partitions move when a member dies. Its client.id is
HARNESS_CLIENT_ID, so the harness can tell which member is which process. Each
payment is one Postgres transaction (a ledger row, with the worker and attempt
that applied it), and the offset is committed after it: nothing is lost, but a
kill between the two applies the payment again when its partition's next owner
reads it (with `--commit-every N`, up to N payments: it commits after every N). That is at-least-once, and the harness shows it: the claim
`at-least-once` holds, `exactly-once` is broken with the kill behind each
duplicate. `--session-timeout-ms` sets how long the group waits for a dead
member before its partitions move (default 6000, the broker's smallest by
default). `--work-ms` gives each payment that many milliseconds of work before
its insert, as a consumer that calls a service would: the pace then no longer
depends on how fast the machine is, so a given number of payments keeps the
group busy long enough for the kills to land.
"""

import argparse
import json
import os
import signal
import time

import psycopg
from confluent_kafka import Consumer, KafkaError, KafkaException

env = os.environ
stopping = False


def stop(signum, frame):
    global stopping
    stopping = True


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--session-timeout-ms", type=int, default=6000)
    ap.add_argument("--commit-every", type=int, default=1, choices=range(1, 100_001), metavar="N",
                    help="commit the offsets after every N payments (1 to 100000)")
    ap.add_argument("--work-ms", type=float, default=0.0, metavar="MS",
                    help="milliseconds of work per payment before its insert (0 to 1000, default 0)")
    args = ap.parse_args()
    if not 0 <= args.work_ms <= 1000:
        ap.error("--work-ms must be between 0 and 1000")
    signal.signal(signal.SIGTERM, stop)
    ledger = env["HARNESS_LEDGER_TABLE"]             # schema.table, a plain SQL name
    consumer = Consumer({**json.loads(env.get("HARNESS_KAFKA_CONFIG") or "{}"),  # the cluster's login, if any
                         "bootstrap.servers": env["HARNESS_BOOTSTRAP_SERVERS"], "group.id": env["HARNESS_GROUP_ID"],
                         "client.id": env.get("HARNESS_CLIENT_ID", "group-example"),
                         "group.protocol": "classic", "session.timeout.ms": args.session_timeout_ms,
                         "heartbeat.interval.ms": max(100, args.session_timeout_ms // 3),
                         "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    consumer.subscribe([env["HARNESS_INPUT_TOPIC"]])
    uncommitted = 0                                    # payments applied since the last commit that succeeded
    with psycopg.connect(env["HARNESS_POSTGRES_DSN"]) as db:
        while not stopping:
            msg = consumer.poll(0.5)
            if msg is not None and not msg.error():
                payment = json.loads(msg.value())
                time.sleep(args.work_ms / 1000)            # the payment's work, before its effect
                with db.transaction():
                    db.execute(f"insert into {ledger} (message_id, amount, worker, attempt) values (%s, %s, %s, %s)",
                               (payment["id"], payment["amount"], env["HARNESS_WORKER"], int(env["HARNESS_ATTEMPT"])))
                uncommitted += 1
            # every N payments, and whenever nothing more comes while some are uncommitted (the last ones)
            if uncommitted >= args.commit_every or (msg is None and uncommitted):
                try:
                    consumer.commit(asynchronous=False)    # the positions of everything applied so far
                    uncommitted = 0
                except KafkaException as e:
                    if e.args[0].code() == KafkaError._NO_OFFSET:
                        uncommitted = 0                    # nothing left to commit here (partitions moved away)
                    # else refused mid-rebalance: tried again at the next turn
    consumer.close()


if __name__ == "__main__":
    main()
