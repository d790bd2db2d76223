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

from ...checker.damage import ABORTED, DEDUPED, DUPLICATED
from ...checker.predictors import FencedPredictor, LedgerPredictor, OutputPredictor
from ..common_options import TRANSACTION_OPTIONS
from ..declaration import Experiment, KillPoint, Stores
from .eos_loops import (
    EFFECT, INSIDE, POLL, PRODUCE, SEND_OFFSETS, TXN_COMMIT, eos_boundary_loop, eos_dedupe_loop, eos_loop,
    warm_producer)
from .txn_java import TxnJavaWorkers

CLIENT_FAULTS = ("abort", "client-pause")     # transactional_loop carries them out (runtime/client_faults.py)
ABORTS = "records already in the open transaction are aborted (read_uncommitted keeps a copy) and produced again"


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
    warm_up=warm_producer, options=TRANSACTION_OPTIONS, leader="coordinator", client_faults=CLIENT_FAULTS,
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
