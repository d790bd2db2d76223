"""dedupe: at-least-once delivery, exactly-once effect, with an idempotency key.

What it proves: the same crashes as offset-after cause no duplicate charge
when the payment id is recorded in a dedupe table (unique key) in the SAME
Postgres transaction as the charge. A redelivered payment finds its key,
charges nothing, and counts a dedupe hit.

Order of steps: poll; one Postgres transaction {insert the id into the dedupe
table; if it was new, insert the ledger row}; commit offsets every
`commit_every` records. Kill point: AFTER_EFFECT_BEFORE_COMMIT (in
offset_after.run, which this mode reuses with the guarded effect).

Expected: lost = 0, duplicates = 0, dedupe hits = redeliveries = the sum of
len(unacked) over all crashes.
"""

from . import offset_after
from .context import WorkerContext


def run(ctx: WorkerContext) -> None:
    offset_after.run(ctx, effect=ctx.apply_effect_deduped)
