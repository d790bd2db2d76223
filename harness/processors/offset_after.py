"""offset-after: apply the effect, then commit the offset (at-least-once).

What it proves: committing after the effect never loses a payment, and every
crash between the two steps charges again everything processed since the last
commit, because the broker redelivers what it was never told was done.

Order of steps: poll, apply the effect of each record, commit every
`commit_every` records (and at the end of input). Kill point:
AFTER_EFFECT_BEFORE_COMMIT, right after a planned message's effect; the crash
record's `unacked` lists the payments charged since the last commit, each of
which will be charged once more.

Expected: duplicates = the sum of len(unacked) over all crashes, lost = 0.
"""

from ..faults.killpoints import AFTER_EFFECT_BEFORE_COMMIT
from .context import WorkerContext

POLL_BATCH = 500


def run(ctx: WorkerContext, effect=None) -> None:
    """The at-least-once loop; `dedupe` reuses it with a guarded effect."""
    effect = effect or ctx.apply_effect
    ctx.assign()
    pending = []
    while True:
        batch = ctx.poll(POLL_BATCH)
        for msg in batch:
            ctx.deliver(msg)
            effect(msg)
            pending.append(msg)
            ctx.kill.maybe_crash(AFTER_EFFECT_BEFORE_COMMIT, msg, unacked=pending)
            if len(pending) >= ctx.commit_every:
                ctx.commit(pending)
                pending = []
        if pending and ctx.at_end():
            ctx.commit(pending)        # the tail of the input: fewer than commit_every records
            pending = []
        if not pending and ctx.caught_up():
            return
