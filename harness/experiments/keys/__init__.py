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

from ...checker.predictors import LedgerPredictor
from ...core.options import Option
from ..declaration import Experiment, Stores
from .key_loops import (
    KA_COMMIT, KA_EFFECT, KA_KEY, KA_POLL, KB_COMMIT, KB_EFFECT, KB_KEY, KB_POLL, KE_COMMIT, KE_EFFECT,
    KE_INSIDE, KE_POLL, KP_COMMIT, KP_EFFECT, KP_INSIDE, KP_POLL, key_after_effect_loop,
    key_before_effect_loop, key_expiry_loop, key_per_attempt_loop)
from .key_predictors import KeyExpiryPredictor, NoHitsPredictor, SplitKeyPredictor

# Time scaled down from hours and days: what matters is only that every redelivery comes later than
# the TTL. It always does: a redelivery comes at least --restart-delay after its key was written. 100
# crashes wait 100 restart delays: 0.05 s keeps the experiment at its peers' cost (0.4 s took 55 s).
DEFAULT_DEDUPE_TTL_S = 0.02
DEFAULT_RESTART_DELAY_S = 0.05

DEDUPE_TTL = Option("dedupe_ttl", float, "key-expiry only: the worker purges dedupe keys older than this before each "
                    "lookup, as a TTL cache would.", low=0.0, high=86_400, must="a number of seconds between 0 and "
                    "86,400", metavar="SECONDS", worker=True)

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
