"""key-check-then-insert: an idempotency key checked with a SELECT, then inserted, with no unique constraint.

The reference page (../shared/seeds, 004): "the insert of the key must be
protected by a unique constraint so two concurrent retries cannot both
proceed." This worker checks the key (SELECT), and when it is not there
inserts key and effect in one transaction, on a key table whose key is a plain
column. One delivery at a time, that works: every redelivery after a crash
finds its key (the planned crashes show it, 0 duplicates). Two deliveries in
flight at once do not: the overlap fault (faults/overlap.py) freezes a worker
right after its check, lets a replacement apply the payment, then resumes the
frozen one, whose insert nothing stops: one duplicate per episode, predicted
from the overlap log.

The fix is a unique key. `harness run dedupe --fault planned-crash --fault
overlap` runs the same crashes and the same episodes on `dedupe`, whose key
is the table's primary key: each late write conflicts and counts a dedupe hit
instead.
"""

from __future__ import annotations

from ...checker.predictors import LedgerPredictor
from ..declaration import Experiment, Stores
from .check_then_insert_loops import KC_CHECK, KC_COMMIT, KC_EFFECT, KC_POLL, check_then_insert_loop

KEY_CHECK_THEN_INSERT = Experiment(
    name="key-check-then-insert",
    steps=("poll", "key check (SELECT)", "PG transaction {insert key (no unique constraint), effect}", "commit offset"),
    kill_points=(KC_POLL, KC_CHECK, KC_EFFECT, KC_COMMIT),
    default_point=KC_EFFECT.name,
    stores=Stores(ledger=True, dedupe=True, dedupe_unique=False),
    proves="Mistake: a key checked, then inserted, without a unique constraint; two deliveries "
           "of one payment in flight at once both pass the check. Fix: a unique key (dedupe).",
    expected="duplicates = overlap episodes (0 from the planned crashes alone), lost 0, dedupe hits = redeliveries",
    predictors=(LedgerPredictor(dedupe=True, unique_key=False),),
    loop=check_then_insert_loop,
    default_faults=("planned-crash", "overlap"),
    overlap_point=KC_CHECK.name,
    overlap_applied=KC_EFFECT.name,
    lesson="Mistake: checking the key, then inserting it, with no unique constraint, so two concurrent deliveries "
           "both pass the check. Fix: the key's insert protected by a unique constraint (dedupe).",
    suite={"group": "mistakes", "weight": 3},
)
