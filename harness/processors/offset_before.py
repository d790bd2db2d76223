"""offset-before: commit the offset, then apply the effect (at-most-once).

What it proves: committing before the effect never duplicates, and every crash
between the two steps loses the payments it had acknowledged but not yet
charged. The broker has forgotten them; nobody will ever redeliver them.

Order of steps: poll up to `commit_every` records, commit the offsets past
them (synchronously), then apply each effect. Kill point:
AFTER_COMMIT_BEFORE_EFFECT, just before the effect of a planned message; the
crash record's `unacked` lists the committed payments that will never be
charged (that one and the rest of its batch).

Expected: lost = the union of `unacked` over all crashes, duplicates = 0.
"""

from ..faults.killpoints import AFTER_COMMIT_BEFORE_EFFECT
from .context import WorkerContext


def run(ctx: WorkerContext) -> None:
    ctx.assign()
    while not ctx.caught_up():
        batch = ctx.poll(ctx.commit_every)
        if not batch:
            continue
        ctx.commit(batch)
        for i, msg in enumerate(batch):
            ctx.deliver(msg)
            ctx.kill.maybe_crash(AFTER_COMMIT_BEFORE_EFFECT, msg, unacked=batch[i:])
            ctx.apply_effect(msg)
