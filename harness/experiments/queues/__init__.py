"""The queues family: share groups (KIP-932, "queues for Kafka") crash-tested like consumer groups.

A share consumer commits no offset: each record is acquired under a time lock
and acknowledged one by one. Where the ACCEPT sits says what a crash costs,
with the same seeded crashes as offset-before / offset-after / dedupe:

- share-ack-after: acquire, effect, ACCEPT. A crash between effect and ACCEPT
  leaves the record acquired; its lock expires and any member applies it again.
- share-ack-before: acquire, ACCEPT, effect. A crash between them loses the
  payment: an accepted record is never delivered again.
- share-dedupe: the idempotency key in the effect's transaction, then ACCEPT: exact.
- share-poison: the crash plan's payments kill their worker at every delivery; after the
  group's delivery-count limit (--delivery-limit) the broker archives them: lost, or, with a
  dead-letter topic (--dead-letter on, share_dead_letter.py), dead-lettered there.
- share-release: the crash plan's payments meet an error instead of a death: a transient one
  is RELEASEd (redelivered, no damage), a permanent one REJECTed (archived: lost).

The loops (share_loops.py) run in worker processes as members of the run's share group
(share_worker.py), or with `--client java` on Kafka's Java client (share_java.py); the predictions are the ledger's (checker/predictors.py) plus
the lock story (share_predictors.py).
"""

from ..common_options import CLIENT
from ..declaration import Experiment, Stores
from . import share_loops as loops
from .share_java import ShareJavaWorkers
from .share_launcher import ShareWorkers
from .share_predictors import LockNote, ShareLedgerPredictor
from .share_facts import PRODUCER
from .share_options import OPTIONS

# In the suite (opt-in: `harness suite --group queues`), three members share one group of three partitions.
SUITE = {"group": "queues", "weight": 2, "args": ["--partitions", "3", "--workers", "3"]}
POISON_RATE = 0.01         # share-poison in the suite: 10 of 1000 payments, each killing a worker 5 times


# What the family's experiments share: members of a share group (refused on a broker without them), an input
# of one record a batch, the opt-in suite group.
COMMON = dict(launcher=ShareWorkers(), producer=PRODUCER, options=OPTIONS)
# --client java: the same loops on Kafka's KafkaShareConsumer (share_java.py; share-release is the Python loop's alone).
JAVA_TOO = {**COMMON, "options": OPTIONS + (CLIENT,), "variants": {"client=java": {"launcher": ShareJavaWorkers()}}}


SHARE_ACK_AFTER = Experiment(
    name="share-ack-after", kill_points=(loops.AA_POLL, loops.AA_EFFECT, loops.AA_ACCEPT),
    default_point=loops.AA_EFFECT.name, loop=loops.ack_after_loop, stores=Stores(ledger=True),
    predictors=(ShareLedgerPredictor(), LockNote()), suite=SUITE, **JAVA_TOO,
    steps=("acquire", "effect", "ACCEPT"),
    proves="A share group at least once: ACCEPT after the effect, and each crash between them charges again "
           "after the lock expires.",
    expected="duplicates = effects not yet ACCEPTed at each crash (a payment a death left at the delivery-count "
             "limit is archived instead), ledger above expected",
    lesson="A share group redelivers what a dead member held once its lock expires: ACCEPT after the effect "
           "duplicates; an idempotency key makes it exact (share-dedupe).",
)

SHARE_ACK_BEFORE = Experiment(
    name="share-ack-before", kill_points=(loops.AB_POLL, loops.AB_ACCEPT, loops.AB_EFFECT),
    default_point=loops.AB_ACCEPT.name, loop=loops.ack_before_loop, stores=Stores(ledger=True),
    predictors=(ShareLedgerPredictor(), LockNote()), suite=SUITE, **JAVA_TOO,
    steps=("acquire", "ACCEPT", "effect"),
    proves="A share group at most once: ACCEPT before the effect, and each crash between them loses payments.",
    expected="lost = crashed payments, duplicates 0, ledger below expected",
    lesson="An ACCEPTed record is never delivered again: accept after the effect, and dedupe.",
)

SHARE_DEDUPE = Experiment(
    name="share-dedupe", kill_points=(loops.SD_POLL, loops.SD_INSIDE, loops.SD_EFFECT, loops.SD_ACCEPT),
    default_point=loops.SD_EFFECT.name, loop=loops.dedupe_loop, stores=Stores(ledger=True, dedupe=True),
    predictors=(ShareLedgerPredictor(dedupe=True), LockNote()), suite=SUITE, **JAVA_TOO,
    steps=("acquire", "PG transaction {dedupe key (unique), effect if new}", "ACCEPT"),
    proves="A share group made exact: the same crashes, harmless with an idempotency key in the effect's "
           "transaction.",
    expected="0 lost, 0 duplicates, ledger exactly as expected, dedupe hits = redeliveries",
)

SHARE_POISON = Experiment(
    name="share-poison", kill_points=(loops.POISON, loops.POISON_ACCEPT),
    default_point=loops.POISON.name, loop=loops.poison_loop, stores=Stores(ledger=True),
    predictors=(ShareLedgerPredictor(), LockNote()), **JAVA_TOO,
    steps=("acquire", "effect", "ACCEPT"),
    suite={**SUITE, "args": SUITE["args"] + ["--crash-rate", str(POISON_RATE)]},
    proves="A poison payment that kills its worker at every delivery is archived after the group's "
           "delivery-count limit: lost, without an error anywhere.",
    expected="lost = the poison payments (and any record their deaths held at the limit), each crashing "
             "share.delivery.count.limit times; with --dead-letter on (Kafka 4.4) they are dead-lettered instead, "
             "lost = 0",
    lesson="A share group gives up on a record silently: name a dead-letter topic (Kafka 4.4, --dead-letter on) "
           "and count what lands there, and catch the poison before it kills the worker.",
)

SHARE_RELEASE = Experiment(
    name="share-release", kill_points=(loops.RL_RELEASE, loops.RL_REJECT, loops.RL_ACCEPT),
    default_point=loops.RL_RELEASE.name, loop=loops.release_loop, stores=Stores(ledger=True),
    plan_errors=True,
    predictors=(ShareLedgerPredictor(errors=True), LockNote()), suite=SUITE, **COMMON,
    steps=("acquire", "effect, or on an error RELEASE (transient) / REJECT (permanent)", "ACCEPT"),
    proves="A share group's two verbs for a failed record side by side: RELEASE on a transient error redelivers "
           "it (no damage), REJECT on a permanent one archives it (lost).",
    expected="lost = the payments with a permanent error (REJECTed), 0 duplicates, ledger below expected by "
             "theirs; released records = the payments with a transient error",
    lesson="RELEASE what may succeed later, REJECT only what never will: a REJECTed record is gone for good "
           "(count it, or name a dead-letter topic).",
)
