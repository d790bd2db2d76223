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

from ..checker.damage import DEDUPED
from ..checker.predictors import LedgerPredictor
from ..workload.sqlnames import table_identifier
from .declaration import Experiment, KillPoint, Stores
from .offsets import at_least_once_loop

KC_POLL = KillPoint("after-poll-before-check", "poll", "key check (SELECT)", frozenset({DEDUPED}),
                    "the records since the last commit (none with --commit-every 1) come again and find their keys")
KC_CHECK = KillPoint("after-check-before-insert", "key check (SELECT)", "PG transaction", frozenset({DEDUPED}),
                     "nothing written for this payment: its redelivery checks again and applies it once; earlier "
                     "uncommitted ones find their keys")
KC_EFFECT = KillPoint("after-insert-before-commit", "PG transaction", "commit offset", frozenset({DEDUPED}),
                      "this payment and every one since the last commit come again and find their keys")
KC_COMMIT = KillPoint("after-commit", "commit offset", None, frozenset({DEDUPED}),
                      "nothing when the commit covered this payment; otherwise the uncommitted ones find their keys")


def _sql(text: str, table: str):
    from psycopg import sql
    return sql.SQL(text).format(t=table_identifier(table))


def apply_effect_checked(ctx, msg, inside=None) -> bool:
    """SELECT the key; when it is there, count a hit on one of its rows and skip; else `inside()` (the gap
    between check and insert) and one transaction {insert key, effect}. True if applied."""
    msg_id, table = msg.key().decode(), ctx.args.dedupe
    if ctx.pg.execute(_sql("select 1 from {t} where message_id = %s limit 1", table), (msg_id,)).fetchone():
        ctx.pg.execute(_sql("update {t} set hits = hits + 1 where ctid = "
                            "(select ctid from {t} where message_id = %s limit 1)", table), (msg_id,))
        return False
    if inside:
        inside()
    with ctx.pg.transaction():
        ctx.pg.execute(_sql("insert into {t} (message_id) values (%s)", table), (msg_id,))
        ctx.apply_effect(msg)
    return True


def check_then_insert_loop(ctx) -> None:
    at_least_once_loop(ctx, lambda msg, inside=None: apply_effect_checked(ctx, msg, inside),
                       (KC_POLL.name, KC_CHECK.name, KC_EFFECT.name, KC_COMMIT.name))


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
