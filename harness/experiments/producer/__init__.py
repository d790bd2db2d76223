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

from dataclasses import dataclass

from ...core.errors import HarnessError
from ...core.options import Option
from ..declaration import Experiment, Stores
from ..launch import PythonWorkers
from .producer_loops import producer_loop
from .producer_settings import DEFAULT_MAX_IN_FLIGHT, settings
from .producer_predictors import ProducerPredictor

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


@dataclass
class ProducerWorkers(PythonWorkers):
    """Python workers that also get the producer's settings and the delivery log's path."""

    def more(self, run) -> dict:
        from ...checker.deliveries import FILE_NAME
        return {"delivery_log": run.run_dir / FILE_NAME, "option": {"producer": settings(run.params)}}


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
