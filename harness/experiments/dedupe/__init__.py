"""dedupe: at-least-once delivery made an exactly-once effect by an idempotency key.

The same loop and the same crashes as offset-after, but the payment id goes
into a dedupe table (unique key) in the SAME Postgres transaction as the
charge. A redelivered payment finds its key, charges nothing, and counts a
dedupe hit. The extra kill point inside that transaction shows why it must be
one transaction: a death there rolls back key and charge together.
"""

from ...checker.predictors import LedgerPredictor
from ..common_options import GROUP_OPTIONS, group_rule
from ..declaration import Experiment, Stores
from .dedupe_loops import D_COMMIT, D_EFFECT, D_INSIDE, D_POLL, dedupe_loop

DEDUPE = Experiment(
    name="dedupe",
    steps=("poll", "PG transaction {dedupe key (unique), effect if new}", "commit offset"),
    kill_points=(D_POLL, D_INSIDE, D_EFFECT, D_COMMIT),
    default_point=D_EFFECT.name,
    stores=Stores(ledger=True, dedupe=True),
    proves="Exactly-once effect: the same crashes, made harmless by an idempotency key in the effect's transaction.",
    expected="0 lost, 0 duplicates, ledger exactly as expected, dedupe hits = redeliveries",
    predictors=(LedgerPredictor(dedupe=True),),
    loop=dedupe_loop,
    suite={"group": "core", "weight": 2},
    overlap_point=D_POLL.name,       # its check is the insert itself: a delivery frozen before it
    overlap_applied=D_EFFECT.name,
    options=GROUP_OPTIONS,
    rules=(group_rule,),
)
