"""The worker side of dedupe: offset-after's loop with the dedupe key in the effect's transaction, and its kill points.
"""

from ...checker.damage import DEDUPED
from ..declaration import KillPoint
from ..offsets.offset_loops import at_least_once_loop

D_POLL = KillPoint("after-poll-before-effect", "poll", "PG transaction", frozenset({DEDUPED}),
                   "the effects since the last commit (none with --commit-every 1) come again: dedupe hits")
D_INSIDE = KillPoint("inside-effect-txn", "dedupe key", "effect (same transaction)", frozenset({DEDUPED}),
                     "the open Postgres transaction rolls back key and charge together: this payment is charged "
                     "once on redelivery; earlier uncommitted ones are dedupe hits")
D_EFFECT = KillPoint("after-effect-before-commit", "PG transaction", "commit offset", frozenset({DEDUPED}),
                     "this payment and every effect since the last commit come again: dedupe hits, no charge")
D_COMMIT = KillPoint("after-commit", "commit offset", None, frozenset({DEDUPED}),
                     "nothing when the commit covered this payment; otherwise the uncommitted ones are dedupe hits")


def dedupe_loop(ctx) -> None:
    at_least_once_loop(ctx, ctx.apply_effect_deduped, (D_POLL.name, D_INSIDE.name, D_EFFECT.name, D_COMMIT.name))
