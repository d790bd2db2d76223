"""quixstreams with processing_guarantee="exactly-once" and a Postgres sink: the client's promise, tested where it ends.

Build (pinned: requirements.txt), from the repository root:

    python -m venv /tmp/qx && /tmp/qx/bin/pip install -r examples/consumers/quixstreams/requirements.txt

Run it under the harness:

    harness run custom --worker-cmd "/tmp/qx/bin/python examples/consumers/quixstreams/consumer.py" \\
        --expect at-least-once --kill-mode random --kills 10 --workers 2 --partitions 2 --messages 3000 --seed 1

A quixstreams Application on HARNESS_INPUT_TOPIC in HARNESS_GROUP_ID with the
client's defaults but for what a team must set: exactly-once, the earliest
offset for a group with no commit, the client.id (HARNESS_CLIENT_ID), the
cluster's login (HARNESS_KAFKA_CONFIG, librdkafka's names as quixstreams takes
them), a transactional.id per worker slot under HARNESS_RUN_PREFIX (stable
across restarts, so a restarted worker fences its killed predecessor) and no
topic creation (the run's topics exist). Its sink
is a quixstreams BatchingSink: at each checkpoint (every 5 s, the default) one
psycopg transaction inserts the batch's payments, one ledger row each with the
worker and attempt that applied it. quixstreams flushes its sinks before it
commits the checkpoint's Kafka transaction (the consumed offsets): a kill
between the two leaves the rows in Postgres and the offsets uncommitted, and the
next owner applies them again. Exactly-once covers Kafka's own topics, not the
sink: the claim this consumer can keep is at-least-once.

On the harness's SCRAM stacks (the default) it stops at start: quixstreams reads
its topics' configs (DescribeConfigs), which the run's own Kafka user is not
granted. Run it on a stack made with `harness up --auth none`.
"""

import json
import os
import shutil
import tempfile

import psycopg
from quixstreams import Application
from quixstreams.sinks import BatchingSink, SinkBatch

env = os.environ


class LedgerSink(BatchingSink):
    """One psycopg transaction per checkpoint's batch, one ledger row per payment."""

    def __init__(self):
        super().__init__()
        self.worker, self.attempt = env["HARNESS_WORKER"], int(env["HARNESS_ATTEMPT"])
        self.insert = (f"insert into {env['HARNESS_LEDGER_TABLE']} (message_id, amount, worker, attempt) "
                       f"values (%s, %s, %s, %s)")
        self.db = None

    def setup(self):
        self.db = psycopg.connect(env["HARNESS_POSTGRES_DSN"])

    def write(self, batch: SinkBatch):
        with self.db.transaction():
            for item in batch:
                self.db.execute(self.insert, (item.value["id"], item.value["amount"], self.worker, self.attempt))


def login() -> dict:
    conf = json.loads(env.get("HARNESS_KAFKA_CONFIG") or "{}")
    unknown = sorted(set(conf) - {"security.protocol", "sasl.mechanism", "sasl.username", "sasl.password"})
    if unknown:
        raise SystemExit(f"quixstreams example: no mapping for Kafka settings {', '.join(unknown)}")
    return conf


def main() -> None:
    # No state stores, but quixstreams makes its state folder at start: one per worker slot, shared by its
    # attempts (a killed one cannot remove it), removed by the attempt that stops cleanly.
    state = os.path.join(tempfile.gettempdir(), f"quix-state-{env['HARNESS_GROUP_ID']}-{env['HARNESS_WORKER']}")
    try:
        app = Application(broker_address=env["HARNESS_BOOTSTRAP_SERVERS"], consumer_group=env["HARNESS_GROUP_ID"],
                          processing_guarantee="exactly-once", auto_offset_reset="earliest", state_dir=state,
                          auto_create_topics=False,
                          consumer_extra_config={**login(), "client.id": env["HARNESS_CLIENT_ID"]},
                          producer_extra_config={**login(), "client.id": env["HARNESS_CLIENT_ID"],
                                                 "transactional.id": env["HARNESS_RUN_PREFIX"] + env["HARNESS_WORKER"]})
        payments = app.dataframe(app.topic(env["HARNESS_INPUT_TOPIC"], value_deserializer="json"))
        payments.sink(LedgerSink())
        app.run()                                      # SIGTERM: stops, commits the last checkpoint, leaves the group
    finally:
        shutil.rmtree(state, ignore_errors=True)

if __name__ == "__main__":
    main()
