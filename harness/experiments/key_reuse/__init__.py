"""A key reused with another payload: `dedupe` hides the client's bug, a fingerprint rejects it.

The reference page (../shared/seeds, 004): "the same key with a different
request payload should be rejected, as it indicates a client bug." The run
plays that client (workload/reused_payments.py): after the payments it produces a seeded
share of their ids again, each with another amount. Both experiments keep
`dedupe`'s loop, kill points and planned crashes:

- `key-reuse` (the mistake): the dedupe table keyed on the id alone. A reused
  request finds its key and is skipped like any redelivery: the ledger stays
  exact, and nobody is told that a request was dropped. The report counts them
  as hidden: reused requests neither applied nor rejected.
- `key-fingerprint` (the fix): the key is stored with the request's fingerprint
  (a hash of its parameters). A delivery that finds its key with the same
  fingerprint is a redelivery (a dedupe hit); one with another fingerprint is
  a different request under a used key: written to the rejects table, in the
  key's transaction, and not applied. The rejected ids and amounts must be the
  reused ones, no more, no fewer.

In both, every delivery that finds its key counts a hit on it (the dedupe
table's `hits`), so hits = redeliveries + reused requests, predicted per id.
"""

from __future__ import annotations

from ...core.options import Option
from ..declaration import Experiment, Stores
from ..dedupe.dedupe_loops import D_COMMIT, D_EFFECT, D_INSIDE, D_POLL, dedupe_loop
from .key_reuse_loops import fingerprint_loop
from .key_reuse_predictors import ReusedKeyPredictor

DEFAULT_REUSE_RATE = 0.05

REUSE_RATE = Option("reuse_rate", float, "key-reuse, key-fingerprint: share of payments the run produces again "
                    "with the same id and another amount (a client bug: a key reused for a new request).",
                    low=0.0, high=1.0, applies_to="key-reuse and key-fingerprint")

STEPS = ("poll", "PG transaction {dedupe key (unique), effect if new}", "commit offset")

KEY_REUSE = Experiment(
    name="key-reuse",
    steps=STEPS,
    kill_points=(D_POLL, D_INSIDE, D_EFFECT, D_COMMIT),
    default_point=D_EFFECT.name,
    stores=Stores(ledger=True, dedupe=True),
    proves="Mistake: a dedupe key checked alone, so a request that reuses a key with another "
           "payload is skipped as a redelivery and the client's bug is hidden. Fix: store the request's "
           "fingerprint with the key and reject a mismatch (key-fingerprint).",
    expected="hidden = reused requests (skipped silently), lost 0, duplicates 0, dedupe hits = redeliveries + "
             "reused requests",
    predictors=(ReusedKeyPredictor(rejects=False),),
    loop=dedupe_loop,
    lesson="Mistake: checking the idempotency key alone, so the same key with another payload (a client bug) is "
           "silently skipped. Fix: store the request's fingerprint with the key and reject a mismatch.",
    options=(REUSE_RATE,),
    defaults={"reuse_rate": DEFAULT_REUSE_RATE},
    suite={"group": "mistakes", "weight": 2},
)

KEY_FINGERPRINT = Experiment(
    name="key-fingerprint",
    steps=("poll", "PG transaction {dedupe key (unique) with the request's fingerprint, effect if new, a rejects "
           "row if the key holds another fingerprint}", "commit offset"),
    kill_points=(D_POLL, D_INSIDE, D_EFFECT, D_COMMIT),
    default_point=D_EFFECT.name,
    stores=Stores(ledger=True, dedupe=True, rejects=True),
    proves="The fix for a reused key: the key stored with the request's fingerprint; the same key with another "
           "payload is rejected into a rejects table, never applied, never hidden.",
    expected="rejected = reused requests (the same ids and amounts), hidden 0, lost 0, duplicates 0, dedupe hits = "
             "redeliveries + reused requests",
    predictors=(ReusedKeyPredictor(rejects=True),),
    loop=fingerprint_loop,
    lesson="Mistake: checking the idempotency key alone, so the same key with another payload is skipped unseen. "
           "Fix: the key stored with the request's fingerprint; a mismatch, a client bug, is rejected into a "
           "rejects table.",
    options=(REUSE_RATE,),
    defaults={"reuse_rate": DEFAULT_REUSE_RATE},
    suite={"group": "mistakes", "weight": 2},
)
