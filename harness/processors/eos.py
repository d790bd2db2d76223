"""eos, eos-boundary, eos-dedupe: Kafka transactions, and where they stop.

What `eos` proves: a transactional consume-transform-produce loop (KIP-447,
exactly_once_v2) writes each input record to the output topic exactly once as
seen by read_committed consumers, even when SIGKILLed mid-transaction. The
output records and the consumed offsets commit atomically; a restarted worker
with the same `transactional.id` fences its dead predecessor and aborts its
open transaction at once. read_uncommitted consumers still see the aborted
copies: Kafka marks them, it does not erase them.

What `eos-boundary` proves: the guarantee ends at the first write outside
Kafka. The same loop also inserts a ledger row in Postgres (committed on its
own) before the Kafka transaction commits; each aborted transaction leaves
its Postgres rows behind, so the ledger gets duplicates while the topic stays
exact. `eos-dedupe` guards that write with the dedupe table in one Postgres
transaction, and both sides are exact.

Order of steps per record: [effect], produce to the output topic; every
`commit_every` records: send_offsets_to_transaction(consumer group metadata),
commit_transaction. Kill points: AFTER_PRODUCE_BEFORE_TXN_COMMIT (eos),
AFTER_EXTERNAL_EFFECT_BEFORE_TXN_COMMIT (eos-boundary, eos-dedupe), and
AFTER_SEND_OFFSETS_BEFORE_TXN_COMMIT (any of them, by --kill-point). Before
dying, the worker flushes the producer, so the aborted records really are in
the log and their number is predicted exactly from the crash log.

Errors, as librdkafka documents them: abortable -> abort_transaction and
rewind the consumer to its committed offsets; retriable (e.g. a commit that
timed out) -> retry the same call; fatal (fenced) -> exit with FENCED_EXIT so
the supervisor restarts the worker.
"""

import json
import sys
import time

from ..faults import killpoints
from .context import WorkerContext

FENCED_EXIT = 3
POLL_BATCH = 500
# The broker aborts a transaction its producer abandoned after this; a restart with the same id aborts it at once.
TRANSACTION_TIMEOUT_MS = 60_000
# init/commit/abort on a healthy local broker take milliseconds; beyond this something is wrong.
TXN_CALL_TIMEOUT_S = 30


def default_kill_point(mode: str) -> str:
    return killpoints.AFTER_PRODUCE_BEFORE_TXN_COMMIT if mode == "eos" \
        else killpoints.AFTER_EXTERNAL_EFFECT_BEFORE_TXN_COMMIT


def make_producer(ctx: WorkerContext):
    from confluent_kafka import Producer
    p = Producer({"bootstrap.servers": ctx.args.bootstrap, "transactional.id": ctx.args.transactional_id,
                  "enable.idempotence": True, "acks": "all", "linger.ms": 5, "log_level": 3,
                  # Right after a commit the coordinator is still writing the previous transaction's markers
                  # and answers CONCURRENT_TRANSACTIONS; librdkafka's default 100 ms backoff made every
                  # send_offsets_to_transaction cost ~100 ms here. Retry sooner (measured: ~105 ms -> ~8 ms).
                  "retry.backoff.ms": 5, "retry.backoff.max.ms": 50,
                  "transaction.timeout.ms": ctx.args.transaction_timeout_ms or TRANSACTION_TIMEOUT_MS})
    t0 = time.time()
    p.init_transactions(TXN_CALL_TIMEOUT_S)     # fences the previous holder of this id, aborts its transaction
    ctx.events.emit("txn_initialized", seconds=round(time.time() - t0, 3))
    return p


def output_value(ctx: WorkerContext, msg) -> bytes:
    try:
        value = json.loads(msg.value())
    except ValueError:
        value = {"id": msg.key().decode()}
    value.update(worker=ctx.worker, attempt=ctx.attempt)
    return json.dumps(value).encode()


def run(ctx: WorkerContext) -> None:
    from confluent_kafka import KafkaException

    mode = ctx.args.mode
    point = ctx.args.kill_point or default_kill_point(mode)
    effect = {"eos": None, "eos-boundary": ctx.apply_effect, "eos-dedupe": ctx.apply_effect_deduped}[mode]
    producer = make_producer(ctx)     # first: fences the dead predecessor and aborts its transaction
    ctx.assign()                      # then: committed offsets are stable and can be fetched
    ctx.kill.before_crash = lambda: producer.flush(TXN_CALL_TIMEOUT_S)
    in_txn: list = []
    interval = (ctx.args.commit_interval_ms or 0) / 1000.0
    txn_started = 0.0

    def commit_due() -> bool:
        """Commit every `commit_every` records, or every `--commit-interval-ms` when that is set."""
        if interval:
            return time.monotonic() - txn_started >= interval
        return len(in_txn) >= ctx.commit_every

    def commit_txn():
        offsets = ctx.offsets_after(in_txn)
        _retrying(lambda: producer.send_offsets_to_transaction(
            offsets, ctx.consumer.consumer_group_metadata(), TXN_CALL_TIMEOUT_S))
        if point == killpoints.AFTER_SEND_OFFSETS_BEFORE_TXN_COMMIT:
            for m in in_txn:
                ctx.kill.maybe_crash(point, m, unacked=in_txn)
        _retrying(lambda: producer.commit_transaction(TXN_CALL_TIMEOUT_S))
        ctx.mark_committed(offsets)
        in_txn.clear()

    try:
        while True:
            batch = ctx.poll(POLL_BATCH)
            try:
                for msg in batch:
                    ctx.deliver(msg)
                    if not in_txn:
                        producer.begin_transaction()
                        txn_started = time.monotonic()
                    if effect:
                        effect(msg)
                    producer.produce(ctx.args.output_topic, key=msg.key(), value=output_value(ctx, msg))
                    in_txn.append(msg)
                    if point != killpoints.AFTER_SEND_OFFSETS_BEFORE_TXN_COMMIT:
                        ctx.kill.maybe_crash(point, msg, unacked=in_txn)
                    if commit_due():
                        commit_txn()
                if in_txn and (ctx.at_end() or commit_due()):
                    commit_txn()
            except KafkaException as e:
                err = e.args[0]
                if err.fatal():
                    raise
                if err.txn_requires_abort():
                    ctx.events.emit("txn_aborted", reason=str(err))
                    producer.abort_transaction(TXN_CALL_TIMEOUT_S)
                    in_txn.clear()
                    ctx.rewind()
                    continue
                raise
            if not in_txn and ctx.caught_up():
                return
    except KafkaException as e:
        err = e.args[0]
        if err.fatal() or "fenced" in str(err).lower():
            ctx.events.emit("fenced", reason=str(err), delivered=ctx.kill.delivered)
            print(f"worker {ctx.worker}: fatal producer error, exiting for a restart: {err}", file=sys.stderr)
            sys.exit(FENCED_EXIT)
        raise


def _retrying(call, attempts: int = 5):
    """Retry a transactional call whose error is retriable (a commit that timed out is retried, not aborted)."""
    from confluent_kafka import KafkaException
    for i in range(attempts):
        try:
            return call()
        except KafkaException as e:
            if e.args[0].retriable() and i < attempts - 1:
                time.sleep(0.2 * (i + 1))
                continue
            raise
