"""eos, eos-boundary, eos-dedupe and zombie: Kafka transactions, and where they stop.

`eos`: a transactional consume-transform-produce loop (KIP-447,
exactly_once_v2) writes each input record to the output topic exactly once as
seen by read_committed consumers, even when SIGKILLed mid-transaction. Output
records and consumed offsets commit atomically; a restarted worker with the
same `transactional.id` fences its dead predecessor and aborts its open
transaction at once. read_uncommitted consumers still see the aborted copies:
Kafka marks them, it does not erase them.

`eos-boundary`: the same loop also inserts a ledger row in Postgres (its own
commit) before producing. Each aborted transaction leaves its Postgres rows
behind: the topic stays exact, the ledger duplicates. Kafka's exactly-once
ends at the first write outside Kafka. `eos-dedupe` guards that write with
the dedupe table in one Postgres transaction, and both sides are exact.

`zombie`: the eos worker frozen with SIGSTOP, replaced under the same
transactional.id, then resumed: it must be fenced (the zombie fault).

The abort and client-pause faults act inside this loop (runtime/client_faults.py):
a planned abort at a commit point, a self-inflicted SIGSTOP at a planned step.

Errors, as librdkafka documents them: abortable -> abort_transaction and
rewind to the committed offsets; retriable (a commit that timed out) -> retry
the same call; fatal (fenced) -> exit with FENCED_EXIT for a restart. A
transactional call still blocked after --txn-stuck-after seconds (retries
included) ends the worker with STUCK_EXIT and a `txn_stuck` event: its
transaction's outcome is unknown, so what it held becomes a bound
(runtime/call_deadline.py). Before a planned death the worker flushes the
producer, so the aborted records really are in the log and their number is
predicted exactly from the crash log.
"""

import json
import sys
import time

from ..clients import kafka_client
from ..checker.damage import ABORTED, DEDUPED, DUPLICATED
from ..checker.predictors import FencedPredictor, LedgerPredictor, OutputPredictor
from ..runtime.call_deadline import CallDeadline
from ..runtime.client_faults import AFTER_SEND_OFFSETS, BEFORE_COMMIT, MID_PRODUCE, PLANNED_ABORT
from .common_options import GROUP_PROTOCOL, TRANSACTION_OPTIONS, TRANSACTION_TIMEOUT_MS, TXN_STUCK_AFTER_S
from .declaration import Experiment, KillPoint, Stores
from .txn_java import TxnJavaWorkers

FENCED_EXIT = 3
POLL_BATCH = 500
# init/commit/abort on a healthy local broker take milliseconds; beyond this something is wrong.
TXN_CALL_TIMEOUT_S = 30
# init_transactions() is called again this often while the coordinator aborts the predecessor's transaction.
INIT_STEP_S = 0.01

POLL, INSIDE, EFFECT = "after-poll-before-effect", "inside-effect-txn", "after-effect-before-produce"
PRODUCE, SEND_OFFSETS, TXN_COMMIT = ("after-produce-before-txn-commit", "after-send-offsets-before-txn-commit",
                                     "after-txn-commit")
CLIENT_FAULTS = ("abort", "client-pause")     # transactional_loop carries them out (runtime/client_faults.py)
ABORTS = "records already in the open transaction are aborted (read_uncommitted keeps a copy) and produced again"


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


def _points(ledger_damage=None) -> tuple:
    """The transactional loop's gaps; with a ledger, each also re-applies (or dedupes) its rows."""
    extra = frozenset({ledger_damage}) if ledger_damage else frozenset()
    led = {None: "", DUPLICATED: "; the ledger rows written since the last commit are written again",
           DEDUPED: "; the ledger rows since the last commit come again as dedupe hits"}[ledger_damage]
    d = frozenset({ABORTED}) | extra
    pts = []
    if ledger_damage:
        pts.append(KillPoint(POLL, "poll", "effect", d, ABORTS + led))
        if ledger_damage == DEDUPED:
            pts.append(KillPoint(INSIDE, "dedupe key", "effect (same PG transaction)", d,
                                 "the open Postgres transaction rolls back key and row together" + led))
        pts.append(KillPoint(EFFECT, "effect (own PG commit)", "produce", d,
                             ABORTS + "; this payment's ledger row" + (" comes again as a dedupe hit"
                                                                      if ledger_damage == DEDUPED else
                                                                      " is written again, as are the earlier ones")))
    else:
        pts.append(KillPoint("after-poll-before-produce", "poll", "produce", d, ABORTS))
    pts += [KillPoint(PRODUCE, "produce", "send offsets", d, "this record and the open transaction are aborted" + led),
            KillPoint(SEND_OFFSETS, "send offsets to the transaction", "commit transaction", d,
                      "offsets and records are in the transaction, which aborts: both are redone" + led),
            KillPoint(TXN_COMMIT, "commit transaction", None, d,
                      "nothing when this record's transaction just committed; otherwise it aborts" + led)]
    return tuple(pts)


# What the four share: their options, the coordinator as the leader a leader-kill kills, the client faults
# their loop carries out, output tagged and in poll order (records to their input's partition), and
# --client java: the same loop on Kafka's Java client (txn_java.py), without the Python loop's client faults.
TRANSACTIONAL = dict(
    warm_up=warm_producer, options=TRANSACTION_OPTIONS + (GROUP_PROTOCOL,), leader="coordinator", client_faults=CLIENT_FAULTS,
    tagged_output=True, ordered_output=True,
    variants={"client=java": {"launcher": TxnJavaWorkers(), "client_faults": (), "warm_up": None}})

EOS = Experiment(
    name="eos",
    steps=("poll", "produce (in the transaction)", "send_offsets_to_transaction", "commit_transaction"),
    kill_points=_points(),
    default_point=PRODUCE,
    stores=Stores(output=True),
    proves="Kafka exactly-once: output and offsets commit atomically; read_committed sees each record once.",
    expected="read_committed output: 0 lost, 0 duplicates; read_uncommitted shows the aborted copies",
    predictors=(OutputPredictor(),),
    loop=eos_loop,
    suite={"group": "eos", "weight": 8},
    **TRANSACTIONAL,
)

EOS_BOUNDARY = Experiment(
    name="eos-boundary",
    steps=("poll", "ledger insert (own PG commit)", "produce", "send_offsets_to_transaction", "commit_transaction"),
    kill_points=_points(DUPLICATED),
    default_point=PRODUCE,
    stores=Stores(ledger=True, output=True),
    proves="Where Kafka's exactly-once stops: at the first write outside Kafka.",
    expected="Kafka output exact; Postgres ledger duplicates = aborted records",
    predictors=(LedgerPredictor(), OutputPredictor()),
    loop=eos_boundary_loop,
    suite={"group": "eos", "weight": 7},
    **TRANSACTIONAL,
)

EOS_DEDUPE = Experiment(
    name="eos-dedupe",
    steps=("poll", "PG transaction {dedupe key, ledger insert}", "produce", "send_offsets_to_transaction",
           "commit_transaction"),
    kill_points=_points(DEDUPED),
    default_point=PRODUCE,
    stores=Stores(ledger=True, dedupe=True, output=True),
    proves="Exactly-once on both sides: Kafka transactions for the topic, an idempotency key for the database.",
    expected="Kafka output exact and Postgres exact",
    predictors=(LedgerPredictor(dedupe=True), OutputPredictor()),
    loop=eos_dedupe_loop,
    suite={"group": "eos", "weight": 6},
    **TRANSACTIONAL,
)

ZOMBIE = Experiment(
    name="zombie",
    steps=EOS.steps,
    kill_points=EOS.kill_points,       # the eos loop: its gaps are where the freeze may catch it
    default_point=EOS.default_point,
    stores=Stores(output=True),
    proves="Zombie fencing: a producer that wakes up after its replacement took its transactional.id is fenced.",
    expected="the zombie gets a fatal fenced error; read_committed output exact",
    predictors=(OutputPredictor(), FencedPredictor()),
    loop=eos_loop,
    default_faults=("zombie",),
    suite={"group": "eos", "weight": 5},
    **TRANSACTIONAL,
)
