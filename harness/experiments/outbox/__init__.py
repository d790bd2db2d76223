"""dual-write and outbox: a service that writes a row in Postgres and publishes an event to Kafka.

`dual-write`: for each payment request the service commits its business row
in Postgres, then produces the event. Two systems, no shared transaction: a
crash between the two leaves a row whose event never goes out (the
downstream never hears of the payment). With `--kill-point
after-produce-before-row` (or any other point of that order) the service
produces first and writes the row second: a crash between leaves an event
whose row does not exist (an orphan: the downstream acts on something the
service has no record of). The service acknowledges each request as it takes
it, as an HTTP service whose caller does not retry: nobody sends it again.

`outbox`: the service writes the row and an outbox row in ONE Postgres
transaction; a relay process publishes unsent outbox rows with an idempotent
producer and marks each sent. A relay killed between publish and mark-sent
publishes that row again when it comes back: the idempotent producer dedupes
retries within one producer session, not across a restart. So the topic holds
one duplicate per such crash, and the downstream consumer, which applies each
event with the dedupe table in its transaction, stays exact.

Each run has three kinds of process (roles): the service (consuming the
payments topic, one per partition set), the relay (outbox only) and the
downstream consumer (the events topic, its own consumer group). All are
slots of one supervisor (experiments/launch.py RoleWorkers).
"""

from ...checker.predictors import EventsPredictor, LedgerPredictor
from ..declaration import Experiment, Role, Stores
from ..launch import RoleWorkers
from .outbox_loops import (
    EF_ACCEPT, EF_PRODUCE, EF_ROW, OS_COMMIT, OS_INSIDE, OS_POLL, OS_TXN, RF_ACCEPT, RF_PRODUCE, RF_ROW,
    R_MARK, R_PUBLISH, R_READ, downstream_loop, event_first_service, outbox_service, relay_loop,
    row_first_service)

DOWNSTREAM = "downstream"
DUAL_WRITE_ROLES = (Role("service", row_first_service), Role(DOWNSTREAM, downstream_loop, consumes="events",
                                                              after=("service",)))
EVENT_FIRST = {
    "steps": ("accept the request (commit its offset)", "produce the event", "row (own PG commit)"),
    "kill_points": (EF_ACCEPT, EF_PRODUCE, EF_ROW),
    "default_point": EF_PRODUCE.name,
    "roles": (Role("service", event_first_service),) + DUAL_WRITE_ROLES[1:],
    "expected": "events without rows (orphans) = crashes; every event applied once downstream",
}

DUAL_WRITE = Experiment(
    name="dual-write",
    steps=("accept the request (commit its offset)", "row (own PG commit)", "produce the event"),
    kill_points=(RF_ACCEPT, RF_ROW, RF_PRODUCE),
    default_point=RF_ROW.name,
    stores=Stores(ledger=True, dedupe=True, rows=True, events=True),
    proves="The dual write: a row in Postgres and an event in Kafka, no shared transaction; a crash between "
           "them leaves one without the other.",
    expected="rows without events = crashes, and the downstream misses those payments",
    predictors=(LedgerPredictor(dedupe=True), EventsPredictor()),
    roles=DUAL_WRITE_ROLES,
    launcher=RoleWorkers(),
    variants={f"kill_point={p.name}": EVENT_FIRST for p in (EF_ACCEPT, EF_PRODUCE, EF_ROW)},
    lesson="Mistake: writing the database and then the queue (or the other way) as two commits, so a crash "
           "between them loses events (or publishes orphans). Fix: the outbox, the event written in the row's "
           "transaction and published by a relay.",
    suite={"group": "mistakes", "weight": 3},
)

OUTBOX = Experiment(
    name="outbox",
    steps=("poll", "PG transaction {row, outbox row}", "commit offset",
           "relay: publish the outbox row (idempotent producer)", "relay: mark it sent"),
    kill_points=(OS_POLL, OS_INSIDE, OS_TXN, OS_COMMIT, R_READ, R_PUBLISH, R_MARK),
    default_point=R_PUBLISH.name,
    stores=Stores(ledger=True, dedupe=True, rows=True, outbox=True, events=True),
    proves="The outbox: row and event commit in one Postgres transaction; the relay publishes at least once, "
           "and a dedupe key downstream makes the effect exact.",
    expected="topic duplicates = relay crashes between publish and mark-sent; downstream effects exact",
    predictors=(LedgerPredictor(dedupe=True, unacked="republished"), EventsPredictor()),
    roles=(Role("service", outbox_service), Role("relay", relay_loop, consumes=None, after=("service",)),
           Role(DOWNSTREAM, downstream_loop, consumes="events", after=("relay",))),
    launcher=RoleWorkers(),
    lesson="Mistake: the dual write, row and event in two commits. Fix: the outbox, both in one transaction; its "
           "relay publishes at least once (the idempotent producer dedupes retries, not a restarted relay), so the "
           "downstream keeps its dedupe key.",
    suite={"group": "mistakes", "weight": 3},
)
