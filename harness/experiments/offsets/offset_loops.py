"""The worker side of offset-before and offset-after: their loops and the kill points between their steps.

at_least_once_loop is the loop the other at-least-once families share (dedupe, keys, balances, ...).
"""

from ...checker.damage import DUPLICATED, LOST
from ..declaration import KillPoint

POLL_BATCH = 500

OB_POLL = KillPoint("after-poll-before-commit", "poll", "commit offset", frozenset(),
                    "nothing committed, nothing applied: the batch is delivered again, no damage")
OB_COMMIT = KillPoint("after-commit-before-effect", "commit offset", "effect", frozenset({LOST}),
                      "this payment and the rest of its committed batch are lost: the broker will not redeliver them")
OB_EFFECT = KillPoint("after-effect", "effect", None, frozenset({LOST}),
                      "nothing with --commit-every 1; otherwise the rest of the committed batch is lost")


def offset_before_loop(ctx) -> None:
    """poll up to commit_every records, commit past them, then apply each effect."""
    ctx.assign()
    while not ctx.caught_up():
        batch = ctx.poll(ctx.commit_every)
        for msg in batch:
            ctx.deliver(msg)
            ctx.kill.at(OB_POLL.name, msg)
        if not batch:
            continue
        ctx.commit(batch)
        for i, msg in enumerate(batch):
            ctx.kill.at(OB_COMMIT.name, msg, acked_unapplied=batch[i:])
            ctx.apply_effect(msg)
            ctx.kill.at(OB_EFFECT.name, msg, acked_unapplied=batch[i + 1:])


OA_POLL = KillPoint("after-poll-before-effect", "poll", "effect", frozenset({DUPLICATED}),
                    "the effects applied since the last commit (none with --commit-every 1) are applied again")
OA_EFFECT = KillPoint("after-effect-before-commit", "effect", "commit offset", frozenset({DUPLICATED}),
                      "this payment and every effect since the last commit are applied again")
OA_COMMIT = KillPoint("after-commit", "commit offset", None, frozenset({DUPLICATED}),
                      "nothing when the commit covered this payment; with --commit-every N the uncommitted "
                      "effects are applied again")


def at_least_once_loop(ctx, effect, points: tuple) -> None:
    """poll, apply each effect, commit every commit_every records; `points` names the three gaps
    (and, with a dedupe effect, the gap inside its transaction)."""
    after_poll, inside, after_effect, after_commit = points
    ctx.assign()
    pending: list = ctx.pending            # the context commits it when a rebalance takes a partition away
    while True:
        for msg in ctx.poll(POLL_BATCH):
            ctx.deliver(msg)
            ctx.kill.at(after_poll, msg, unacked=pending)
            if inside:
                effect(msg, inside=lambda m=msg: ctx.kill.at(inside, m, unacked=pending))
            else:
                effect(msg)
            pending.append(msg)
            ctx.kill.at(after_effect, msg, unacked=pending)
            if len(pending) >= ctx.commit_every:
                ctx.commit(pending)
                pending.clear()
            ctx.kill.at(after_commit, msg, unacked=pending)
        if pending and ctx.at_end():
            ctx.commit(pending)        # the tail of the input: fewer than commit_every records
            pending.clear()
        if not pending and ctx.caught_up():
            return


def offset_after_loop(ctx) -> None:
    at_least_once_loop(ctx, ctx.apply_effect, (OA_POLL.name, None, OA_EFFECT.name, OA_COMMIT.name))
