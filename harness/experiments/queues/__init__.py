"""The queues family: share groups (KIP-932, "queues for Kafka") crash-tested like consumer groups.

A share consumer commits no offset: each record is acquired under a time lock
and acknowledged one by one. Where the ACCEPT sits says what a crash costs,
with the same seeded crashes as offset-before / offset-after / dedupe:

- share-ack-after: acquire, effect, ACCEPT. A crash between effect and ACCEPT
  leaves the record acquired; its lock expires and any member applies it again.
- share-ack-before: acquire, ACCEPT, effect. A crash between them loses the
  payment: an accepted record is never delivered again.
- share-dedupe: the idempotency key in the effect's transaction, then ACCEPT: exact.

The loops (loops.py) run in worker processes as members of the run's share group
(share_worker.py); the predictions are the ledger's (checker/predictors.py) plus
the lock story (predictors.py).
"""

from ..declaration import Experiment, Stores
from . import loops
from .launcher import ShareWorkers
from .predictors import LockNote, ShareLedgerPredictor
from .share_worker import PRODUCER

# In the suite (opt-in: `harness suite --group queues`), three members share one group of three partitions.
SUITE = {"group": "queues", "weight": 2, "args": ["--partitions", "3", "--workers", "3"]}

SHARE_ACK_AFTER = Experiment(
    name="share-ack-after",
    steps=("acquire", "effect", "ACCEPT"),
    kill_points=(loops.AA_POLL, loops.AA_EFFECT, loops.AA_ACCEPT),
    default_point=loops.AA_EFFECT.name,
    stores=Stores(ledger=True),
    proves="A share group at least once: ACCEPT after the effect, and each crash between them charges again "
           "after the lock expires.",
    expected="duplicates = effects not yet ACCEPTed at each crash, lost 0, ledger above expected",
    predictors=(ShareLedgerPredictor(), LockNote()),
    loop=loops.ack_after_loop,
    suite=SUITE,
    producer=PRODUCER,
    launcher=ShareWorkers(),
    lesson="A share group redelivers what a dead member held once its lock expires: ACCEPT after the effect "
           "duplicates; an idempotency key makes it exact (share-dedupe).",
)

SHARE_ACK_BEFORE = Experiment(
    name="share-ack-before",
    steps=("acquire", "ACCEPT", "effect"),
    kill_points=(loops.AB_POLL, loops.AB_ACCEPT, loops.AB_EFFECT),
    default_point=loops.AB_ACCEPT.name,
    stores=Stores(ledger=True),
    proves="A share group at most once: ACCEPT before the effect, and each crash between them loses payments.",
    expected="lost = crashed payments, duplicates 0, ledger below expected",
    predictors=(ShareLedgerPredictor(), LockNote()),
    loop=loops.ack_before_loop,
    suite=SUITE,
    producer=PRODUCER,
    launcher=ShareWorkers(),
    lesson="An ACCEPTed record is never delivered again: accept after the effect, and dedupe.",
)

SHARE_DEDUPE = Experiment(
    name="share-dedupe",
    steps=("acquire", "PG transaction {dedupe key (unique), effect if new}", "ACCEPT"),
    kill_points=(loops.SD_POLL, loops.SD_INSIDE, loops.SD_EFFECT, loops.SD_ACCEPT),
    default_point=loops.SD_EFFECT.name,
    stores=Stores(ledger=True, dedupe=True),
    proves="A share group made exact: the same crashes, harmless with an idempotency key in the effect's "
           "transaction.",
    expected="0 lost, 0 duplicates, ledger exactly as expected, dedupe hits = redeliveries",
    predictors=(ShareLedgerPredictor(dedupe=True), LockNote()),
    loop=loops.dedupe_loop,
    suite=SUITE,
    producer=PRODUCER,
    launcher=ShareWorkers(),
)
