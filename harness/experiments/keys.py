"""The idempotency-key mistakes: a key that is there, and still does not make the effect happen once.

Lesson 11's "Common mistakes" (../shared/seeds, 002) name four ways a consumer
that "has a dedupe table" still charges twice or never. Each is the dedupe
experiment with one thing changed, on the same seeded crashes:

- `key-after-effect`: the effect commits, then the key in a second commit. A
  crash between them leaves an effect without its key: the redelivery charges
  again (duplicates = crashes there; dedupe hits fewer than redeliveries).
- `key-before-effect`: the key commits first, then the effect. A crash between
  them leaves a key without its effect: the redelivery sees the key and skips
  the payment for good (lost = crashes there).
- `key-per-attempt`: key and effect in one transaction, as `dedupe` does, but
  the key is minted per delivery (a fresh UUID, as a server that makes a key
  per request would): no redelivery ever finds its key (duplicates as in
  offset-after, dedupe hits 0).
- `key-expiry`: the `dedupe` worker with a TTL: before each lookup it purges
  the keys older than `--dedupe-ttl` seconds, as a TTL cache would. A crashed
  worker's successor starts after `--restart-delay`; a redelivery that comes
  after its key expired charges again. The worker writes the time of each key
  (its own clock, also the purge's) into its crash record and, when it handles
  a record an earlier crash left unacknowledged, the time of that lookup (and
  of the end of its transaction) as a `redelivered` event: the predictor
  compares them with the TTL, per payment.

The fix for each is `dedupe`: the payment's own id as key, written in the
effect's transaction, kept at least as long as the longest redelivery.
"""

from __future__ import annotations

import time
import uuid

from ..checker.damage import DEDUPED, DUPLICATED, LOST
from ..checker.key_predictors import KeyExpiryPredictor, NoHitsPredictor, SplitKeyPredictor
from ..checker.predictors import LedgerPredictor
from ..runtime import crashlog
from ..workload.sqlnames import table_identifier as table_ident
from ..core.options import Option
from .declaration import Experiment, KillPoint, Stores
from .offsets import POLL_BATCH, at_least_once_loop

# Time scaled down from hours and days: what matters is only that every redelivery comes later than
# the TTL. It always does: a redelivery comes at least --restart-delay after its key was written. 100
# crashes wait 100 restart delays: 0.05 s keeps the experiment at its peers' cost (0.4 s took 55 s).
DEFAULT_DEDUPE_TTL_S = 0.02
DEFAULT_RESTART_DELAY_S = 0.05

DEDUPE_TTL = Option("dedupe_ttl", float, "key-expiry only: the worker purges dedupe keys older than this before each "
                    "lookup, as a TTL cache would.", low=0.0, high=86_400, must="a number of seconds between 0 and "
                    "86,400", metavar="SECONDS", worker=True)


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


KEY_AFTER_EFFECT = Experiment(
    name="key-after-effect",
    steps=("poll", "key lookup", "effect (own commit)", "record key (own commit)", "commit offset"),
    kill_points=(KA_POLL, KA_EFFECT, KA_KEY, KA_COMMIT),
    default_point=KA_EFFECT.name,
    stores=Stores(ledger=True, dedupe=True),
    proves="Mistake: the key recorded after the effect in its own commit; a crash between them "
           "charges again. Fix: key and effect in one transaction (dedupe).",
    expected="duplicates = crashes between effect and key, lost 0, dedupe hits = redeliveries - those crashes",
    predictors=(SplitKeyPredictor(unkeyed_points=(KA_EFFECT.name,)),),
    loop=key_after_effect_loop,
    lesson="Mistake: recording the idempotency key after the effect, in its own commit, so a crash between "
           "them charges again. Fix: key and effect in one transaction (dedupe).",
    suite={"group": "mistakes", "weight": 2},
)


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


KEY_BEFORE_EFFECT = Experiment(
    name="key-before-effect",
    steps=("poll", "record key (own commit)", "effect if the key was new (own commit)", "commit offset"),
    kill_points=(KB_POLL, KB_KEY, KB_EFFECT, KB_COMMIT),
    default_point=KB_KEY.name,
    stores=Stores(ledger=True, dedupe=True),
    proves="Mistake: the key recorded before the effect in its own commit; a crash between them "
           "skips the payment forever. Fix: key and effect in one transaction (dedupe).",
    expected="lost = crashes between key and effect, duplicates 0, dedupe hits = redeliveries",
    predictors=(LedgerPredictor(dedupe=True),),
    loop=key_before_effect_loop,
    lesson="Mistake: recording the idempotency key before the effect, in its own commit, so a crash between "
           "them skips the payment forever. Fix: key and effect in one transaction (dedupe).",
    suite={"group": "mistakes", "weight": 2},
)


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


KEY_PER_ATTEMPT = Experiment(
    name="key-per-attempt",
    steps=("poll", "PG transaction {key minted for this delivery (unique), effect if new}", "commit offset"),
    kill_points=(KP_POLL, KP_INSIDE, KP_EFFECT, KP_COMMIT),
    default_point=KP_EFFECT.name,
    stores=Stores(ledger=True, dedupe=True),
    proves="Mistake: a key minted per attempt (a fresh UUID), so a retry gets a new key and is "
           "charged again. Fix: the payment's own id as the key (dedupe).",
    expected="duplicates = effects not yet committed at each crash (as offset-after), lost 0, dedupe hits 0",
    predictors=(LedgerPredictor(), NoHitsPredictor()),
    loop=key_per_attempt_loop,
    lesson="Mistake: a key minted per attempt (a fresh UUID), so a retry is a new payment and is charged again. "
           "Fix: the payment's own id as the key (dedupe).",
    suite={"group": "mistakes", "weight": 2},
)


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


KEY_EXPIRY = Experiment(
    name="key-expiry",
    steps=("poll", "purge keys older than --dedupe-ttl", "PG transaction {dedupe key (unique), effect if new}",
           "commit offset"),
    kill_points=(KE_POLL, KE_INSIDE, KE_EFFECT, KE_COMMIT),
    default_point=KE_EFFECT.name,
    stores=Stores(ledger=True, dedupe=True, dedupe_expires=True),
    proves="Mistake: dedupe keys that expire before the longest redelivery; a redelivery after "
           "the TTL charges again. Fix: keep keys longer than any redelivery can take (dedupe).",
    expected="duplicates = redeliveries that came after their key expired (all with a TTL below --restart-delay, "
             "none with one well above it), lost 0",
    predictors=(KeyExpiryPredictor(),),
    loop=key_expiry_loop,
    lesson="Mistake: dedupe keys that expire before the slowest redelivery, so a late redelivery charges again. "
           "Fix: keep keys longer than any redelivery can take (dedupe).",
    options=(DEDUPE_TTL,),
    defaults={"dedupe_ttl": DEFAULT_DEDUPE_TTL_S, "restart_delay": DEFAULT_RESTART_DELAY_S},
    suite={"group": "mistakes", "weight": 5},
)
