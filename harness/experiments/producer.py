"""producer: the harness's own producer under test, counted on the topic against what it was acknowledged.

Every other experiment trusts its producer (the workload's is idempotent with
acks=all) and breaks the consumer. This one breaks the brokers under a
producer configured by the run: `--idempotence on|off`, `--acks 1|all`,
`--max-in-flight N`. The worker reads the payments from the input topic and
produces each one, paced, to the output topic (same partition, same order),
with a delivery report callback that logs every report (checker/deliveries.py).
The audit then counts on the topic:

- duplicates: copies beyond the first. Without idempotence a request that
  timed out under a paused broker is retried, and the broker may have written
  the first try too: duplicates are possible (at most `RETRIES` per record,
  since each retry can write one more copy); with idempotence the broker drops
  retried batches by their sequence number: none.
- lost: acknowledged and missing. With acks=all and min.insync.replicas=2 an
  acknowledged record is on two replicas, and one node's death loses none;
  with acks=1 only the leader had it when it said yes, and a leader killed
  before its followers fetched takes the record with it: losses are possible,
  at most every acknowledged record. With acks=0 the producer asks for no
  acknowledgement at all (fire and forget, at-most-once): its delivery report
  only says the record left, so `lost` is sent and missing, and under broker
  faults possible, at most every record.
- reordered: records whose first copy comes after a later record's. Possible
  without idempotence when more than one request is in flight and one is retried.

What was never acknowledged (a delivery error) is not lost: the producer told
its caller. Each delivery report also goes into the worker's history, so the
anomaly classes check the acknowledged records against the log: `lost-write`,
`unseen` and `inconsistent-offsets` are forbidden unless acks is 0 or 1 (a
leader may forget what it acknowledged, and write another record at its
offset), `nonmonotonic-send` unless idempotence is off (retries may reorder). Records are paced (`RATE_PER_S`) so the broker faults strike while
the producer works.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass

from ..checker.predict import Expectation
from ..core.errors import HarnessError
from ..core.options import Option
from .launch import PythonWorkers
from .declaration import Experiment, Stores

RATE_PER_S = 50
POLL_BATCH = 100
# Finite, so the duplicates one record can gain are bounded (each retry may write one more copy).
RETRIES = 10
# Shorter than a broker-pause's freeze or a latency fault's delay, so a paused or slow leader's requests time
# out and are retried. librdkafka sends request.timeout.ms to the broker only (its ack timeout); its own
# timeout for a request in flight is socket.timeout.ms (60 s by default), so both are set: a response that
# is late by more than this (the scan runs once a second: 1-2 s) is a timeout, and the record is sent again.
REQUEST_TIMEOUT_MS = 1000
# Retries go on for this long before a record is reported failed (never acknowledged).
MESSAGE_TIMEOUT_MS = 120_000
DEFAULT_MAX_IN_FLIGHT = 5

IDEMPOTENCE = Option("idempotence", str, "producer only: enable.idempotence of the producer under test.",
                     shown="on; off with --acks 0 or 1", choices=("on", "off"))
ACKS = Option("acks", str, "producer only: acks of the producer under test (0: fire and forget, no acknowledgement).",
              shown="all", choices=("0", "1", "all"))
MAX_IN_FLIGHT = Option("max_in_flight", int, "producer only: max.in.flight.requests.per.connection of the producer "
                       "under test.", shown=str(DEFAULT_MAX_IN_FLIGHT), low=1, high=1_000_000,
                       must="between 1 and 1,000,000 (librdkafka's own limit)")


def producer_rule(params, exp) -> None:
    """The producer's settings that Kafka's client refuses together, refused here first in one line."""
    if params.idempotence == "on" and params.acks in ("0", "1"):
        raise HarnessError(f"--acks {params.acks} needs --idempotence off: an idempotent producer always waits for "
                           f"acks=all")
    if params.idempotence != "off" and params.acks not in ("0", "1") and (params.max_in_flight or 0) > 5:
        raise HarnessError("--max-in-flight above 5 needs --idempotence off: an idempotent producer keeps order "
                           "and drops retried duplicates with at most 5 requests in flight")


def settings(params) -> dict:
    """The producer under test's configuration, from the run's options."""
    acks = params.acks or "all"
    idempotence = params.idempotence or ("off" if acks in ("0", "1") else "on")
    return {"enable.idempotence": idempotence == "on", "acks": acks,
            "max.in.flight.requests.per.connection": params.max_in_flight or DEFAULT_MAX_IN_FLIGHT,
            "retries": RETRIES, "retry.backoff.ms": 100, "request.timeout.ms": REQUEST_TIMEOUT_MS,
            "socket.timeout.ms": REQUEST_TIMEOUT_MS,
            "message.timeout.ms": MESSAGE_TIMEOUT_MS, "linger.ms": 5}


def producer_loop(ctx) -> None:
    """Consume the payments, produce each (paced) with the producer under test, log every delivery report,
    then commit the input offsets once every report is in."""
    from ..clients import kafka_client
    from ..checker import deliveries

    conf = ctx.option("producer")
    fd = os.open(ctx.args.delivery_log, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW, 0o644)
    # The cluster's client settings (e.g. credentials) under the settings the run tests, which win.
    producer = kafka_client.connected_producer(ctx.args.bootstrap, {"log_level": 3, **conf}, ctx.args.output_topic)

    def report(err, msg):
        deliveries.append(fd, msg.key().decode(), err, msg.partition(), msg.offset())
        ctx.history.on_delivery()(err, msg)    # the send in the history too: the anomaly classes check it

    ctx.assign()
    done: list = []
    next_at = time.monotonic()
    try:
        while not ctx.at_end():
            for msg in ctx.poll(POLL_BATCH):
                ctx.deliver(msg)
                next_at += 1.0 / RATE_PER_S
                while time.monotonic() < next_at:
                    producer.poll(min(0.01, max(0.0, next_at - time.monotonic())))
                while True:
                    try:
                        producer.produce(ctx.args.output_topic, key=msg.key(), value=msg.value(),
                                         partition=msg.partition(), on_delivery=report)
                        break
                    except BufferError:
                        producer.poll(0.05)
                done.append(msg)
        while producer.flush(1.0) > 0:       # every record gets its report: ok, or failed after the message timeout
            pass
        deadline = time.monotonic() + 60
        while True:
            try:
                ctx.commit(done)
                break
            except Exception:  # noqa: BLE001 - a coordinator moving under a broker fault: try again
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.5)
    finally:
        os.close(fd)


@dataclass
class ProducerWorkers(PythonWorkers):
    """Python workers that also get the producer's settings and the delivery log's path."""

    def more(self, run) -> dict:
        from ..checker.deliveries import FILE_NAME
        return {"delivery_log": run.run_dir / FILE_NAME, "option": {"producer": settings(run.params)}}


@dataclass(frozen=True)
class ProducerPredictor:
    """What the producer's settings promise under the faults that struck (see the module's docstring)."""

    def add(self, p, facts, exp) -> None:
        params = facts.params
        conf = settings(params)
        most = params.messages
        restarted = facts.undescribed > 0      # a restarted worker produces again what it had not committed
        broker_faults = facts.loosened
        if conf["enable.idempotence"] and not restarted:
            p.expectations.append(Expectation("kafka.read_committed.duplicates", 0))
        else:
            p.expectations.append(Expectation("kafka.read_committed.duplicates", RETRIES * most, "<="))
        if conf["acks"] == "all" or not broker_faults:
            p.expectations.append(Expectation("kafka.read_committed.lost", 0))
        else:
            p.expectations.append(Expectation("kafka.read_committed.lost", most, "<="))
        ordered = conf["enable.idempotence"] or conf["max.in.flight.requests.per.connection"] == 1
        p.expectations.append(Expectation("producer.reordered", 0) if ordered and not restarted
                              else Expectation("producer.reordered", most, "<="))
        why = []
        if not conf["enable.idempotence"]:
            why.append(f"without idempotence each retry may write a record again (at most {RETRIES} retries)")
        if conf["acks"] == "1" and broker_faults:
            why.append("with acks=1 a leader killed before its followers fetched loses what it acknowledged")
        if conf["acks"] == "0" and broker_faults:
            why.append("with acks=0 nothing is acknowledged: a record sent to a broker that is down or paused is "
                       "lost without a word")
        if why:
            p.note = "; ".join(why) + ": these numbers are possible, bounded, not predicted" + \
                (f"; {p.note}" if p.note else "")


PRODUCER = Experiment(
    name="producer",
    steps=("poll the payments", "produce (the producer under test, paced)", "delivery report logged",
           "commit input offsets"),
    kill_points=(),
    default_point=None,
    stores=Stores(output=True, deliveries=True),
    proves="The producer's own promise under broker faults: idempotence stops retry duplicates, "
           "acks=all with min.insync.replicas=2 keeps every acknowledged record.",
    expected="idempotence on: 0 duplicates, 0 reordered; acks=all: 0 acknowledged records lost; "
             "idempotence off or acks=1 under broker faults: duplicates or losses possible",
    predictors=(ProducerPredictor(),),
    loop=producer_loop,
    launcher=ProducerWorkers(),
    default_faults=(),
    options=(IDEMPOTENCE, ACKS, MAX_IN_FLIGHT),
    rules=(producer_rule,),
    # What each setting gives up (the variants' allowances add up): without idempotence retries may reorder;
    # with acks 0 or 1 an acknowledged record may be lost, and its offset then hold another record.
    variants={"idempotence=off": {"allows": frozenset({"nonmonotonic-send"})},
              **{f"acks={a}": {"allows": frozenset({"nonmonotonic-send", "lost-write", "unseen", "inconsistent-offsets"})}
                 for a in ("0", "1")}},
    suite={"group": "cluster", "args": ["--fault", "broker-pause"], "weight": 3},
    leader="output",
)
