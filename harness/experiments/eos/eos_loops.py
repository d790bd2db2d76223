"""The worker side of eos, eos-boundary, eos-dedupe and zombie: the transactional loop and its kill points.

Errors, as librdkafka documents them, and the deadline on transactional calls: see the package's docstring.
"""

import json
import sys
import time

from ...clients import kafka_client
from ...runtime.call_deadline import CallDeadline
from ...runtime.client_faults import AFTER_SEND_OFFSETS, BEFORE_COMMIT, MID_PRODUCE, PLANNED_ABORT
from ..common_options import TRANSACTION_TIMEOUT_MS, TXN_STUCK_AFTER_S

FENCED_EXIT = 3
POLL_BATCH = 500

# init/commit/abort on a healthy local broker take milliseconds; beyond this something is wrong.
TXN_CALL_TIMEOUT_S = 30

# init_transactions() is called again this often while the coordinator aborts the predecessor's transaction.
INIT_STEP_S = 0.01

POLL, INSIDE, EFFECT = "after-poll-before-effect", "inside-effect-txn", "after-effect-before-produce"
PRODUCE, SEND_OFFSETS, TXN_COMMIT = ("after-produce-before-txn-commit", "after-send-offsets-before-txn-commit",
                                     "after-txn-commit")


def _new_producer(ctx):
    """A transactional producer for this slot, connected to the cluster (not yet initialised: that
    would fence whoever holds the transactional.id now)."""
    args = ctx.args
    # With no broker connection up yet, init_transactions() cannot look up its coordinator and tries
    # again only 500 ms later (about half of our cold starts did): connected first.
    return kafka_client.connected_producer(args.bootstrap, {
                  "transactional.id": args.transactional_id,
                  "enable.idempotence": True, "acks": "all", "linger.ms": 5, "log_level": 3,
                  # Right after a commit the coordinator is still writing the previous transaction's markers
                  # and answers CONCURRENT_TRANSACTIONS; librdkafka's default 100 ms backoff made every
                  # send_offsets_to_transaction cost ~100 ms here. Retry sooner (measured: ~105 ms -> ~8 ms).
                  "retry.backoff.ms": 5, "retry.backoff.max.ms": 50,
                  "transaction.timeout.ms": ctx.option("transaction_timeout_ms") or TRANSACTION_TIMEOUT_MS},
                  args.output_topic, connect_s=TXN_CALL_TIMEOUT_S, required=True)


def warm_producer(ctx) -> None:
    """A warm spare's preparation: its producer, created and connected before it is needed."""
    ctx.prepared["producer"] = (ctx.args.transactional_id, _new_producer(ctx))


def init_transactions(producer, within_s: float = TXN_CALL_TIMEOUT_S) -> int:
    """init_transactions(), called again every INIT_STEP_S while the coordinator refuses it; returns the
    number of calls.

    A successor's first InitProducerId is refused with CONCURRENT_TRANSACTIONS: it has just made the
    coordinator abort the dead predecessor's open transaction, which takes a few milliseconds. On its
    own librdkafka asks again only after a fixed 500 ms (its PID timer, rdkafka_idempotence.c, not a
    setting), and that wait was most of an EOS restart. Each new call of init_transactions() after a
    timeout resumes the request at once (rd_kafka_idemp_start(immediate)), as its documentation allows:
    measured here, 0.50-1.0 s became about 12 ms."""
    from confluent_kafka import KafkaException
    deadline = time.monotonic() + within_s
    calls = 0
    while True:
        calls += 1
        try:
            producer.init_transactions(INIT_STEP_S)
            return calls
        except KafkaException as e:
            err = e.args[0]
            if err.fatal() or not err.retriable() or time.monotonic() > deadline:
                raise


def call_deadline(ctx) -> CallDeadline:
    """The bound on this worker's transactional calls: past it, the call in progress is logged as
    `txn_stuck` with what the worker held, and the worker exits with STUCK_EXIT for a restart."""
    def on_stuck(call: str, seconds: float, held: dict) -> None:
        ctx.events.emit("txn_stuck", call=call, seconds=seconds, since=round(time.time() - seconds, 3),
                        delivered=ctx.kill.delivered, **held)
        print(f"worker {ctx.worker}: {call} still blocked after {seconds} s; exiting for a restart "
              f"(its transaction's outcome is unknown)", file=sys.stderr, flush=True)
    return CallDeadline(ctx.option("txn_stuck_after") or TXN_STUCK_AFTER_S, on_stuck)


def make_producer(ctx, deadline: CallDeadline):
    tid, p = ctx.prepared.pop("producer", (None, None))
    if p is None or tid != ctx.args.transactional_id:      # none prepared, or for another id (fresh ids)
        p = _new_producer(ctx)
    t0 = time.time()
    with deadline.call("init_transactions", produced=[], unacked=[]):
        # fences the previous holder of this id, aborts its transaction; the deadline ends a wait that never does
        calls = init_transactions(p, within_s=2 * deadline.seconds + TXN_CALL_TIMEOUT_S)
    ctx.events.emit("txn_initialized", seconds=round(time.time() - t0, 3), calls=calls,
                    transactional_id=ctx.args.transactional_id)
    return p


def output_value(ctx, msg) -> bytes:
    try:
        value = json.loads(msg.value())
    except ValueError:
        value = None
    if not isinstance(value, dict):
        value = {"id": msg.key().decode()}
    # Who wrote it, in which of its transactions: a reader can then tell an aborted transaction's record (and
    # a torn transaction) even when the writer died before its delivery report (checker/anomalies.py).
    # First, so a reader finds them without parsing a large payload.
    out = {"worker": ctx.worker, "attempt": ctx.attempt, "txn": ctx.history.txn_no}
    out.update((k, v) for k, v in value.items() if k not in out)
    return json.dumps(out).encode()


def transactional_loop(ctx, effect=None, dedupe: bool = False) -> None:
    """poll; per record: [effect], produce in the open transaction; every commit_every records (or
    --commit-interval-ms): send_offsets_to_transaction, commit_transaction. `effect` writes outside
    Kafka (the ledger); with `dedupe` it is guarded by the dedupe table in its own transaction."""
    from confluent_kafka import KafkaException

    deadline = call_deadline(ctx)
    producer = make_producer(ctx, deadline)   # first: fences the dead predecessor and aborts its transaction
    ctx.assign()                      # then: committed offsets are stable and can be fetched
    ctx.kill.before_crash = lambda: producer.flush(TXN_CALL_TIMEOUT_S)
    in_txn: list = []
    txn_ids = lambda: [m.key().decode() for m in in_txn]      # noqa: E731 - called only when needed
    ledger = txn_ids if effect else ()        # ledger rows since the last commit: one per record in the transaction
    held = {"produced": txn_ids, "unacked": lambda: list(ledger()) if effect else []}
    faults = ctx.client_faults
    interval = (ctx.option("commit_interval_ms") or 0) / 1000.0
    txn_started = 0.0

    def commit_due() -> bool:
        if interval:
            return time.monotonic() - txn_started >= interval
        return len(in_txn) >= ctx.commit_every

    def flush() -> int:
        return producer.flush(TXN_CALL_TIMEOUT_S)

    def abort_txn(reason: str, planned: bool = False) -> None:
        """Abort the open transaction and rewind to the committed offsets. The event says what the abort
        undoes, for the prediction: these records may sit in the log as aborted copies (certainly, when
        `planned`: flushed first), and these ledger rows are applied again."""
        ctx.events.emit("txn_aborted", reason=reason, planned=planned, produced=txn_ids(),
                        unacked=list(ledger()) if effect else [])
        # The event lists what it held: a fencing met by the abort below must not list it again.
        in_txn.clear()
        # A stuck abort can only end aborted.
        with deadline.call("abort_transaction", produced=[], unacked=[], outcome="aborted"):
            _retrying(lambda: producer.abort_transaction(TXN_CALL_TIMEOUT_S), deadline.seconds)
        ctx.history.txn("abort")
        ctx.rewind()

    def commit_txn():
        if faults.abort_due():                   # the abort fault: this one ends aborted, on purpose
            # exact when every record of it is in the log: flushed, no delivery report with an error
            abort_txn(PLANNED_ABORT, planned=flush() == 0 and ctx.history.txn_failed_sends() == 0)
            raise Rewound()
        faults.pause(BEFORE_COMMIT, txn_ids, flush, **held)
        offsets = ctx.offsets_after(in_txn)
        with deadline.call("send_offsets_to_transaction", **held):
            _retrying(lambda: producer.send_offsets_to_transaction(
                offsets, ctx.consumer.consumer_group_metadata(), TXN_CALL_TIMEOUT_S), deadline.seconds)
        for m in list(in_txn):
            ctx.kill.at(SEND_OFFSETS, m, unacked=ledger, produced=in_txn)
        faults.pause(AFTER_SEND_OFFSETS, txn_ids, flush, **held)
        ctx.history.txn("committing")
        with deadline.call("commit_transaction", **held):
            _retrying(lambda: producer.commit_transaction(TXN_CALL_TIMEOUT_S), deadline.seconds)
        ctx.history.txn("commit")
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
                        ctx.history.txn("begin")
                        txn_started = time.monotonic()
                    if effect:
                        ctx.kill.at(POLL, msg, unacked=ledger, produced=in_txn)
                        if dedupe:
                            effect(msg, inside=lambda m=msg: ctx.kill.at(INSIDE, m, unacked=ledger, produced=in_txn))
                        else:
                            effect(msg)
                        ctx.kill.at(EFFECT, msg, unacked=lambda m=msg: ledger() + [m.key().decode()],
                                    produced=in_txn)
                    else:
                        ctx.kill.at("after-poll-before-produce", msg, produced=in_txn)
                    # Same partition as the input: a dead transaction blocks exactly the crashed worker's partitions.
                    producer.produce(ctx.args.output_topic, key=msg.key(), value=output_value(ctx, msg),
                                     partition=msg.partition(), on_delivery=ctx.history.on_delivery())
                    in_txn.append(msg)
                    ctx.kill.at(PRODUCE, msg, unacked=ledger, produced=in_txn)
                    faults.pause(MID_PRODUCE, (msg.key().decode(),), flush, **held)
                    if commit_due():
                        commit_txn()
                    ctx.kill.at(TXN_COMMIT, msg, unacked=ledger, produced=in_txn)
                if in_txn and (ctx.at_end() or commit_due()):
                    commit_txn()
            except Rewound:
                continue
            except KafkaException as e:
                err = e.args[0]
                if err.fatal():
                    raise
                if err.txn_requires_abort():
                    # (and perhaps the record in hand's ledger row is applied again: the produce failed after it)
                    abort_txn(str(err))
                    continue
                raise
            if not in_txn and ctx.caught_up():
                return
    except KafkaException as e:
        err = e.args[0]
        if err.fatal() or "fenced" in str(err).lower():
            ctx.events.emit("fenced", reason=str(err), delivered=ctx.kill.delivered,
                            produced=[m.key().decode() for m in in_txn], unacked=list(ledger()) if effect else [])
            print(f"worker {ctx.worker}: fatal producer error, exiting for a restart: {err}", file=sys.stderr)
            sys.exit(FENCED_EXIT)
        raise


class Rewound(Exception):
    """The open transaction was aborted on purpose and the consumer rewound: drop the rest of the batch."""


def _retrying(call, deadline_s: float):
    """Retry a transactional call whose error is retriable (a commit that timed out is retried, not
    aborted), for as long as the worker's CallDeadline allows (past it, the worker ends); should that
    watcher ever fail, the retries stop on their own after twice its time, with the call's error."""
    from confluent_kafka import KafkaException
    give_up = time.monotonic() + 2 * deadline_s + TXN_CALL_TIMEOUT_S
    i = 0
    while True:
        try:
            return call()
        except KafkaException as e:
            if not e.args[0].retriable() or time.monotonic() > give_up:
                raise
            i += 1
            time.sleep(min(0.2 * i, 1.0))


def eos_loop(ctx) -> None:
    transactional_loop(ctx)


def eos_boundary_loop(ctx) -> None:
    transactional_loop(ctx, effect=ctx.apply_effect)


def eos_dedupe_loop(ctx) -> None:
    transactional_loop(ctx, effect=ctx.apply_effect_deduped, dedupe=True)
