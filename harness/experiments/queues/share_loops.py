"""The worker loops of the queues family: where the ACCEPT sits decides what a crash costs.

Each loop polls a batch of acquired records from the run's share group and
handles them one by one; the acknowledgements are committed every
`commit_every` records and at the end of each batch (explicit mode: every
record of a poll is acknowledged before the next poll). Each gap between two
steps is a kill point; the crash record lists what the death leaves:

- `unacked`: effects applied whose ACCEPT the broker has not confirmed. Their
  locks expire and any member acquires them again: applied again (duplicates),
  or, with the dedupe table, dedupe hits.
- `acked_unapplied`: ACCEPTed records whose effect never ran. An accepted record
  is never delivered again: lost.

Records acquired and not yet touched come again after the lock, at no cost.
"""

from ...checker.damage import DEDUPED, DUPLICATED, LOST
from ..declaration import KillPoint
from .share_facts import PERMANENT, TRANSIENT, error_kinds
from .share_worker import ShareWorker

AA_POLL = KillPoint("after-acquire-before-effect", "acquire", "effect", frozenset({DUPLICATED}),
                    "the batch's locks expire and it comes again; the effects applied since the last ACCEPT "
                    "commit (none with --commit-every 1) are applied again")
AA_EFFECT = KillPoint("after-effect-before-accept", "effect", "ACCEPT", frozenset({DUPLICATED}),
                      "this payment (and every effect not yet ACCEPTed) comes again after its lock expires: "
                      "charged twice")
AA_ACCEPT = KillPoint("after-accept", "ACCEPT", None, frozenset({DUPLICATED}),
                      "nothing when the commit covered this payment; with --commit-every N the effects not yet "
                      "ACCEPTed are applied again")

AB_POLL = KillPoint("after-acquire-before-accept", "acquire", "ACCEPT", frozenset(),
                    "nothing accepted, nothing applied: the batch comes again after its lock, no damage")
AB_ACCEPT = KillPoint("after-accept-before-effect", "ACCEPT", "effect", frozenset({LOST}),
                      "this payment and the rest of its ACCEPTed batch are lost: the broker never delivers an "
                      "accepted record again")
AB_EFFECT = KillPoint("after-effect", "effect", None, frozenset({LOST}),
                      "nothing with --commit-every 1; otherwise the rest of the ACCEPTed batch is lost")

SD_POLL = KillPoint("after-acquire-before-effect", "acquire", "PG transaction", frozenset({DEDUPED}),
                    "the effects not yet ACCEPTed come again: dedupe hits, no charge")
SD_INSIDE = KillPoint("inside-effect-txn", "dedupe key", "effect (same transaction)", frozenset({DEDUPED}),
                      "the open transaction rolls back key and charge together: this payment is charged once "
                      "on redelivery; earlier ones not yet ACCEPTed are dedupe hits")
SD_EFFECT = KillPoint("after-effect-before-accept", "PG transaction", "ACCEPT", frozenset({DEDUPED}),
                      "this payment and every effect not yet ACCEPTed come again: dedupe hits, no charge")
SD_ACCEPT = KillPoint("after-accept", "ACCEPT", None, frozenset({DEDUPED}),
                      "nothing when the commit covered this payment; otherwise the ones not yet ACCEPTed are "
                      "dedupe hits")


def _run(ctx, handle) -> None:
    """Poll until the events account for every input record; `handle(share, batch)` does one batch."""
    share = ShareWorker(ctx)
    try:
        while not share.done():
            batch = share.poll()
            if batch:
                handle(share, batch)
    finally:
        share.close()


def ack_after_loop(ctx, effect=None, points=(AA_POLL.name, None, AA_EFFECT.name, AA_ACCEPT.name)) -> None:
    """acquire, effect, ACCEPT: at-least-once. With the dedupe effect (and its inner point), exact."""
    after_poll, inside, after_effect, after_accept = points
    effect = effect or ctx.apply_effect

    def handle(share, batch):
        pending: list = []
        for msg in batch:
            share.at(after_poll, msg, unacked=pending)
            if inside:
                effect(msg, inside=lambda m=msg: share.at(inside, m, unacked=pending))
            else:
                effect(msg)
            pending.append(msg)
            share.at(after_effect, msg, unacked=pending)
            if len(pending) >= ctx.commit_every:
                share.acknowledge(pending)
                pending.clear()
            share.at(after_accept, msg, unacked=pending)
        share.acknowledge(pending)
    _run(ctx, handle)


def ack_before_loop(ctx) -> None:
    """acquire up to commit_every records, ACCEPT them, then apply each effect: at-most-once."""
    def handle(share, batch):
        for start in range(0, len(batch), ctx.commit_every):
            chunk = batch[start:start + ctx.commit_every]
            for msg in chunk:
                share.at(AB_POLL.name, msg)
            chunk = share.acknowledge(chunk)   # a refused ACCEPT comes again (commit_lost): not applied now
            for i, msg in enumerate(chunk):
                share.at(AB_ACCEPT.name, msg, acked_unapplied=chunk[i:])
                ctx.apply_effect(msg)
                share.at(AB_EFFECT.name, msg, acked_unapplied=chunk[i + 1:])
    _run(ctx, handle)


def dedupe_loop(ctx) -> None:
    ack_after_loop(ctx, ctx.apply_effect_deduped, (SD_POLL.name, SD_INSIDE.name, SD_EFFECT.name, SD_ACCEPT.name))


POISON = KillPoint("poison-acquired", "acquire", "effect", frozenset({LOST, DUPLICATED}),
                   "a poison payment kills its worker at every delivery: the death left at the delivery-count limit "
                   "has the broker archive it, lost; each death also spends a delivery of every record held with "
                   "it, and repeats the effects not yet ACCEPTed (none with --commit-every 1)")

POISON_ACCEPT = KillPoint("after-accept", "ACCEPT", None, frozenset(),
                          "never struck: the poison payments kill their worker before the effect, and no other "
                          "payment is planned")


def _apply_then_accept(ctx, share, msg, pending: list) -> None:
    """The effect, then the ACCEPT of every effect waiting for one once `commit_every` of them wait."""
    ctx.apply_effect(msg)
    pending.append(msg)
    if len(pending) >= ctx.commit_every:
        share.acknowledge(pending)
        pending.clear()


def poison_loop(ctx) -> None:
    """acquire, effect, ACCEPT, where the crash plan's payments are poison: each of their deliveries kills the
    worker before the effect (not only the first, as a planned crash does), until the broker archives them."""
    poison = ctx.kill.plan_ids

    def handle(share, batch):
        pending: list = []
        for msg in batch:
            if msg.key().decode() in poison:
                ctx.kill.crash(POISON.name, msg, unacked=[m.key().decode() for m in pending], held=share.held_now())
            _apply_then_accept(ctx, share, msg, pending)
        share.acknowledge(pending)
    _run(ctx, handle)


RL_RELEASE = KillPoint("transient-error", "acquire", "RELEASE", frozenset(),
                       "never a death: half the crash plan's payments meet a transient error here instead, on their "
                       "first delivery: RELEASEd, back at once at delivery count 2 and applied then, no damage")
RL_REJECT = KillPoint("permanent-error", "acquire", "REJECT", frozenset({LOST}),
                      "never a death: the plan's other payments meet a permanent error here at every delivery: "
                      "REJECTed, the broker archives the record, never delivered again: lost")
RL_ACCEPT = KillPoint("after-accept", "ACCEPT", None, frozenset(),
                      "never struck: the crash plan's payments meet errors, not deaths, and no other payment is planned")


def release_loop(ctx) -> None:
    """acquire, effect, ACCEPT, where the crash plan's payments meet an error instead of a death (share_facts.
    error_kinds): a transient one on the first delivery is RELEASEd, a permanent one REJECTed. The effects before
    it are ACCEPTed first, so each verb's acknowledgement is its record's alone."""
    kinds = error_kinds(ctx.kill.plan_ids)

    def handle(share, batch):
        pending: list = []
        for msg in batch:
            kind = kinds.get(msg.key().decode())
            if kind == PERMANENT or (kind == TRANSIENT and msg.delivery_count() == 1):
                share.acknowledge(pending)
                pending.clear()
                share.acknowledge([msg], "REJECT" if kind == PERMANENT else "RELEASE")
                continue
            _apply_then_accept(ctx, share, msg, pending)
        share.acknowledge(pending)
    _run(ctx, handle)
