"""The worker side of dual-write and outbox: the services, the relay, the downstream consumer and their kill points.
"""

import time

from ...checker.damage import DEDUPED, LOST, ORPHANED, REPUBLISHED, UNPUBLISHED
from ...runtime.evidence import KeyedRecord
from ..declaration import KillPoint
from ..offsets.offset_loops import at_least_once_loop

POLL_BATCH = 500
RELAY_BATCH = 200

# A produce to a healthy local broker is acknowledged in milliseconds.
PRODUCE_TIMEOUT_S = 30
IDLE_S = 0.05


def events_producer(ctx):
    from ...clients import kafka_client
    return kafka_client.connected_producer(ctx.args.bootstrap, {"enable.idempotence": True, "acks": "all",
                                                                "linger.ms": 0, "log_level": 3},
                                           ctx.args.events_topic)


def publish(ctx, producer, key: bytes, value: bytes) -> None:
    """Produce one event and wait for the broker's acknowledgement."""
    from confluent_kafka import KafkaException
    errors = []
    producer.produce(ctx.args.events_topic, key=key, value=value,
                     on_delivery=lambda err, _m: errors.append(err) if err else None)
    if producer.flush(PRODUCE_TIMEOUT_S) or errors:
        raise KafkaException(errors[0]) if errors else RuntimeError("event not acknowledged in time")


def insert_row(ctx, msg) -> bool:
    """The service's business row for this payment (its own commit unless a transaction is open).
    False when the row already exists."""
    from psycopg import sql
    from ...runtime.context import amount_of
    from ...workload.sqlnames import table_identifier
    row = ctx.pg.execute(sql.SQL("insert into {} (message_id, amount, worker, attempt) values (%s, %s, %s, %s) "
                                 "on conflict (message_id) do nothing returning message_id")
                         .format(table_identifier(ctx.args.rows)),
                         (msg.key().decode(), amount_of(msg), ctx.worker, ctx.attempt)).fetchone()
    return row is not None


RF_ACCEPT = KillPoint("after-accept-before-row", "accept the request (commit its offset)", "row (PG commit)",
                      frozenset({LOST}), "the request is dropped: no row, no event (its caller does not retry)")
RF_ROW = KillPoint("after-row-before-produce", "row (PG commit)", "produce the event", frozenset({LOST, UNPUBLISHED}),
                   "the row exists, its event is never published: the downstream never applies the payment "
                   "(--kill-point after-produce-before-row runs the other order)")
RF_PRODUCE = KillPoint("after-produce", "produce the event", None, frozenset(), "nothing: both writes are done")

EF_ACCEPT = KillPoint("after-accept-before-produce", "accept the request (commit its offset)", "produce the event",
                      frozenset({LOST}), "the request is dropped: no event, no row (its caller does not retry)")
EF_PRODUCE = KillPoint("after-produce-before-row", "produce the event", "row (PG commit)", frozenset({ORPHANED}),
                       "the event is out, its row never written: the downstream applies a payment the service "
                       "has no record of (an orphan event)")
EF_ROW = KillPoint("after-row", "row (PG commit)", None, frozenset(), "nothing: both writes are done")


def dual_write_service(ctx, event_first: bool) -> None:
    producer = events_producer(ctx)
    ctx.assign()
    while True:
        for msg in ctx.poll(POLL_BATCH):
            ctx.deliver(msg)
            ctx.commit([msg])                     # the request is taken: its caller will not send it again
            if event_first:
                ctx.kill.at(EF_ACCEPT.name, msg, acked_unapplied=[msg])
                publish(ctx, producer, msg.key(), msg.value())
                ctx.kill.at(EF_PRODUCE.name, msg, event_only=lambda: [msg.key().decode()])
                insert_row(ctx, msg)
                ctx.kill.at(EF_ROW.name, msg)
            else:
                ctx.kill.at(RF_ACCEPT.name, msg, acked_unapplied=[msg])
                insert_row(ctx, msg)
                ctx.kill.at(RF_ROW.name, msg, acked_unapplied=[msg], row_only=lambda: [msg.key().decode()])
                publish(ctx, producer, msg.key(), msg.value())
                ctx.kill.at(RF_PRODUCE.name, msg)
        if ctx.caught_up():
            return


def row_first_service(ctx) -> None:
    dual_write_service(ctx, event_first=False)


def event_first_service(ctx) -> None:
    dual_write_service(ctx, event_first=True)


def downstream_loop(ctx) -> None:
    """The events' consumer: once its upstream is done (so the end of the events topic is known), poll,
    apply each event with its key in the dedupe table (one PG transaction), commit."""
    while not ctx.finished(ctx.args.after):
        time.sleep(IDLE_S)
    at_least_once_loop(ctx, ctx.apply_effect_deduped, ("downstream-after-poll", "downstream-inside-effect-txn",
                                                       "downstream-after-effect", "downstream-after-commit"))


OS_POLL = KillPoint("after-poll-before-txn", "poll", "PG transaction {row, outbox row}", frozenset(),
                    "nothing: the request is redelivered and handled once")
OS_INSIDE = KillPoint("inside-txn", "row", "outbox row (same PG transaction)", frozenset(),
                      "the open transaction rolls back row and outbox row together: redelivered, handled once")
OS_TXN = KillPoint("after-txn-before-commit", "PG transaction {row, outbox row}", "commit offset", frozenset(),
                   "nothing: the redelivered request finds its row and writes nothing")
OS_COMMIT = KillPoint("after-commit", "commit offset", None, frozenset(), "nothing")
R_READ = KillPoint("relay-after-read-before-publish", "relay: read unsent outbox rows", "publish", frozenset(),
                   "nothing: the row is still unsent and is published once by the next relay")
R_PUBLISH = KillPoint("relay-after-publish-before-mark", "relay: publish (idempotent producer)", "mark sent",
                      frozenset({REPUBLISHED, DEDUPED}),
                      "the row is still unsent: the next relay publishes it again (a new producer session, so the "
                      "idempotent producer cannot drop it); the downstream's dedupe table absorbs the copy")
R_MARK = KillPoint("relay-after-mark", "relay: mark sent", None, frozenset(), "nothing")


def outbox_service(ctx) -> None:
    """poll; per request one PG transaction {row (unique per payment), outbox row}; commit the offset."""
    from psycopg import sql
    from ...workload.sqlnames import table_identifier
    ctx.assign()
    while True:
        for msg in ctx.poll(POLL_BATCH):
            ctx.deliver(msg)
            ctx.kill.at(OS_POLL.name, msg)
            with ctx.pg.transaction():
                if insert_row(ctx, msg):
                    ctx.kill.at(OS_INSIDE.name, msg)
                    ctx.pg.execute(sql.SQL("insert into {} (message_id, payload) values (%s, %s)")
                                   .format(table_identifier(ctx.args.outbox)),
                                   (msg.key().decode(), msg.value().decode()))
            ctx.kill.at(OS_TXN.name, msg)
            ctx.commit([msg])
            ctx.kill.at(OS_COMMIT.name, msg)
        if ctx.caught_up():
            return


def relay_loop(ctx) -> None:
    """Publish unsent outbox rows in order, one at a time, each marked sent once the broker has it. Done when
    the service is done and nothing is left unsent."""
    from psycopg import sql
    from ...workload.sqlnames import table_identifier
    producer = events_producer(ctx)
    outbox = table_identifier(ctx.args.outbox)
    ctx.events.emit("started", partitions=[])
    first = True
    while True:
        upstream_done = ctx.finished(ctx.args.after)       # before the read: rows written later are not missed
        rows = ctx.pg.execute(sql.SQL("select id, message_id, payload from {} where sent_at is null order by id "
                                      "limit %s").format(outbox), (RELAY_BATCH,)).fetchall()
        for oid, message_id, payload in rows:
            rec = KeyedRecord(message_id, payload.encode())      # an outbox row, as the kill switch sees it
            if first:
                first = False
                ctx.events.emit("first_message", message_id=message_id)
            ctx.deliver(rec)
            ctx.kill.at(R_READ.name, rec)
            publish(ctx, producer, rec.key(), rec.value())
            ctx.kill.at(R_PUBLISH.name, rec, republished=lambda: [rec.message_id])
            ctx.pg.execute(sql.SQL("update {} set sent_at = clock_timestamp() where id = %s").format(outbox), (oid,))
            ctx.kill.at(R_MARK.name, rec)
        if not rows:
            if upstream_done:
                return
            time.sleep(IDLE_S)
