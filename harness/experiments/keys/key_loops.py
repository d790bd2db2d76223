"""The worker side of the idempotency-key mistakes: each mistake's loop, its effect and its kill points.
"""

from __future__ import annotations

import time
import uuid

from ...checker.damage import DEDUPED, DUPLICATED, LOST
from ...runtime import crashlog
from ...workload.sqlnames import table_identifier as table_ident
from ..declaration import KillPoint
from ..offsets.offset_loops import POLL_BATCH, at_least_once_loop


def _sql(text: str, *tables):
    from psycopg import sql
    return sql.SQL(text).format(*(table_ident(t) for t in tables))


def keyed_loop(ctx, handle) -> None:
    """poll; per record handle(msg, pending) (its own key and effect steps and kill points); commit every
    commit_every records; `pending` are the records handled since the last commit."""
    ctx.assign()
    pending: list = []
    while True:
        for msg in ctx.poll(POLL_BATCH):
            ctx.deliver(msg)
            handle(msg, pending)
            pending.append(msg)
            if len(pending) >= ctx.commit_every:
                ctx.commit(pending)
                pending = []
            handle.after_commit(msg, pending)
        if pending and ctx.at_end():
            ctx.commit(pending)        # the tail of the input: fewer than commit_every records
            pending = []
        if not pending and ctx.caught_up():
            return


def _with(pending, msg):
    return lambda: [m.key().decode() for m in pending] + [msg.key().decode()]


# -- key-after-effect --------------------------------------------------------------------------------------
KA_POLL = KillPoint("after-poll-before-effect", "poll", "key lookup", frozenset({DEDUPED}),
                    "the records since the last commit (none with --commit-every 1) come again and find their keys")
KA_EFFECT = KillPoint("after-effect-before-key", "effect (own commit)", "record key (own commit)",
                      frozenset({DUPLICATED, DEDUPED}),
                      "this payment's effect has no key: its redelivery charges again; earlier uncommitted ones "
                      "find their keys")
KA_KEY = KillPoint("after-key-before-commit", "record key (own commit)", "commit offset", frozenset({DEDUPED}),
                   "this payment and every one since the last commit come again and find their keys: dedupe hits")
KA_COMMIT = KillPoint("after-commit", "commit offset", None, frozenset({DEDUPED}),
                      "nothing when the commit covered this payment; otherwise the uncommitted ones are dedupe hits")


class KeyAfterEffect:
    def __init__(self, ctx):
        self.ctx = ctx

    def __call__(self, msg, pending) -> None:
        ctx, msg_id = self.ctx, msg.key().decode()
        ctx.kill.at(KA_POLL.name, msg, unacked=pending)
        hit = ctx.pg.execute(_sql("update {} set hits = hits + 1 where message_id = %s returning hits",
                                  ctx.args.dedupe), (msg_id,)).fetchone()
        if hit:
            return
        ctx.apply_effect(msg)                                   # commits on its own
        ctx.kill.at(KA_EFFECT.name, msg, unacked=_with(pending, msg))
        ctx.pg.execute(_sql("insert into {} (message_id) values (%s) on conflict (message_id) do nothing",
                            ctx.args.dedupe), (msg_id,))        # a second commit
        ctx.kill.at(KA_KEY.name, msg, unacked=_with(pending, msg))

    def after_commit(self, msg, pending) -> None:
        self.ctx.kill.at(KA_COMMIT.name, msg, unacked=pending)


def key_after_effect_loop(ctx) -> None:
    keyed_loop(ctx, KeyAfterEffect(ctx))


# -- key-before-effect -------------------------------------------------------------------------------------
KB_POLL = KillPoint("after-poll-before-key", "poll", "record key (own commit)", frozenset({DEDUPED}),
                    "the records since the last commit (none with --commit-every 1) come again and find their keys")
KB_KEY = KillPoint("after-key-before-effect", "record key (own commit)", "effect (own commit)",
                   frozenset({LOST, DEDUPED}),
                   "this payment has a key and no effect: its redelivery finds the key and skips it for good (lost)")
KB_EFFECT = KillPoint("after-effect-before-commit", "effect (own commit)", "commit offset", frozenset({DEDUPED}),
                      "this payment and every one since the last commit come again and find their keys: dedupe hits")
KB_COMMIT = KillPoint("after-commit", "commit offset", None, frozenset({DEDUPED}),
                      "nothing when the commit covered this payment; otherwise the uncommitted ones are dedupe hits")


class KeyBeforeEffect:
    def __init__(self, ctx):
        self.ctx = ctx

    def __call__(self, msg, pending) -> None:
        ctx, msg_id = self.ctx, msg.key().decode()
        ctx.kill.at(KB_POLL.name, msg, unacked=pending)
        hits = ctx.pg.execute(_sql("insert into {} as d (message_id) values (%s) on conflict (message_id) "
                                   "do update set hits = d.hits + 1 returning d.hits", ctx.args.dedupe),
                              (msg_id,)).fetchone()[0]           # commits on its own
        if hits:
            return
        # The key says "done" (an acknowledgement) for an effect not applied yet.
        ctx.kill.at(KB_KEY.name, msg, unacked=_with(pending, msg), acked_unapplied=[msg])
        ctx.apply_effect(msg)
        ctx.kill.at(KB_EFFECT.name, msg, unacked=_with(pending, msg))

    def after_commit(self, msg, pending) -> None:
        self.ctx.kill.at(KB_COMMIT.name, msg, unacked=pending)


def key_before_effect_loop(ctx) -> None:
    keyed_loop(ctx, KeyBeforeEffect(ctx))


# -- key-per-attempt ---------------------------------------------------------------------------------------
KP_POLL = KillPoint("after-poll-before-effect", "poll", "PG transaction", frozenset({DUPLICATED}),
                    "the effects since the last commit (none with --commit-every 1) are applied again under new keys")
KP_INSIDE = KillPoint("inside-effect-txn", "minted key", "effect (same transaction)", frozenset({DUPLICATED}),
                      "the open transaction rolls back key and charge: this payment is charged once on redelivery; "
                      "earlier uncommitted ones are charged again under new keys")
KP_EFFECT = KillPoint("after-effect-before-commit", "PG transaction", "commit offset", frozenset({DUPLICATED}),
                      "this payment and every effect since the last commit are charged again: their new keys are new")
KP_COMMIT = KillPoint("after-commit", "commit offset", None, frozenset({DUPLICATED}),
                      "nothing when the commit covered this payment; otherwise the uncommitted ones are charged again")


def apply_effect_minted_key(ctx, msg, inside=None) -> bool:
    """The dedupe transaction of `dedupe`, but keyed by a key minted for this delivery: the payment id
    (for the audit) and a fresh UUID, so no redelivery can ever find it."""
    key = f"{msg.key().decode()}/{uuid.uuid4()}"
    with ctx.pg.transaction():
        hits = ctx.pg.execute(_sql("insert into {} as d (message_id) values (%s) on conflict (message_id) "
                                   "do update set hits = d.hits + 1 returning d.hits", ctx.args.dedupe),
                              (key,)).fetchone()[0]
        if hits:
            return False
        if inside:
            inside()
        ctx.apply_effect(msg)
        return True


def key_per_attempt_loop(ctx) -> None:
    at_least_once_loop(ctx, lambda msg, inside=None: apply_effect_minted_key(ctx, msg, inside),
                       (KP_POLL.name, KP_INSIDE.name, KP_EFFECT.name, KP_COMMIT.name))


# -- key-expiry --------------------------------------------------------------------------------------------
KE_POLL = KillPoint("after-poll-before-effect", "poll", "purge, PG transaction", frozenset({DEDUPED, DUPLICATED}),
                    "the effects since the last commit (none with --commit-every 1) come again: charged again if "
                    "their keys expired first, else dedupe hits")
KE_INSIDE = KillPoint("inside-effect-txn", "dedupe key", "effect (same transaction)", frozenset({DEDUPED, DUPLICATED}),
                      "key and charge roll back together: this payment is charged once on redelivery; earlier "
                      "uncommitted ones are charged again if their keys expired first")
KE_EFFECT = KillPoint("after-effect-before-commit", "PG transaction", "commit offset", frozenset({DEDUPED, DUPLICATED}),
                      "this payment and every one since the last commit come again: charged again when the "
                      "redelivery comes after the key expired, else dedupe hits")
KE_COMMIT = KillPoint("after-commit", "commit offset", None, frozenset({DEDUPED, DUPLICATED}),
                      "nothing when the commit covered this payment; otherwise the uncommitted ones come again")


def key_expiry_loop(ctx) -> None:
    """`dedupe`'s loop with a TTL cache for keys: purge keys older than the TTL, then the dedupe
    transaction. Times are this worker's clock (time.time()), written into the table, so the purge's
    cutoff and the evidence it leaves use one clock."""
    ttl = ctx.option("dedupe_ttl")
    again = {i for c in crashlog.read(ctx.kill.log_path) for i in (c.get("unacked") or [])}
    key_at: dict = {}                  # payment id -> when its key was written, for the records since the last commit
    ctx.assign()
    pending: list = []

    def evidence(pending_now):
        """What the predictor needs beyond `unacked`: when each of their keys was written, and the TTL."""
        return {"key_at": lambda: {i: key_at[i] for i in (m.key().decode() for m in pending_now) if i in key_at},
                "dedupe_ttl": ttl}

    while True:
        for msg in ctx.poll(POLL_BATCH):
            msg_id = msg.key().decode()
            ctx.deliver(msg)
            ctx.kill.at(KE_POLL.name, msg, unacked=pending, **evidence(pending))
            now = time.time()
            ctx.pg.execute(_sql("delete from {} where first_at < to_timestamp(%s)", ctx.args.dedupe), (now - ttl,))
            with ctx.pg.transaction():
                hits, first = ctx.pg.execute(
                    _sql("insert into {} as d (message_id, first_at) values (%s, to_timestamp(%s)) "
                         "on conflict (message_id) do update set hits = d.hits + 1 "
                         "returning d.hits, extract(epoch from d.first_at)::float8", ctx.args.dedupe),
                    (msg_id, now)).fetchone()
                if not hits:
                    ctx.kill.at(KE_INSIDE.name, msg, unacked=pending, **evidence(pending))
                    ctx.apply_effect(msg)
            if msg_id in again:
                # Evidence for the predictor: this lookup's purge used `now`; any other worker's purge that
                # could have removed the key before the lookup ran took its time before `done_t`.
                ctx.events.emit("redelivered", message_id=msg_id, lookup_t=now, done_t=time.time())
            key_at[msg_id] = float(first)
            pending.append(msg)
            ctx.kill.at(KE_EFFECT.name, msg, unacked=pending, **evidence(pending))
            if len(pending) >= ctx.commit_every:
                ctx.commit(pending)
                pending = []
                key_at.clear()
            ctx.kill.at(KE_COMMIT.name, msg, unacked=pending, **evidence(pending))
        if pending and ctx.at_end():
            ctx.commit(pending)
            pending = []
            key_at.clear()
        if not pending and ctx.caught_up():
            return
