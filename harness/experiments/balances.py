"""increment and versioned: a balance changed by a blind increment, or by a conditional write.

Lesson 11's last common mistake: '"add 100" updates where "set to 600 if
version is 4" would be idempotent'. The payments go to a few accounts (a
seeded draw; every payment of an account on one partition, so each account's
payments keep their order), and each carries the account's version and balance
after it. Both experiments run offset-after's loop on the same seeded crashes;
the update and a ledger row (the payment's journal entry) commit in one
Postgres transaction:

- `increment`: `balance = balance + amount`. A redelivery adds again: each
  account ends over by the amounts of its redelivered payments.
- `versioned`: `balance = <its balance>, version = v where version = v - 1`.
  A redelivery finds version v already there and updates 0 rows; the worker
  counts those in the account's `stale_updates` (this experiment's dedupe
  hits) and writes no journal row. Balances stay exact.
"""

from __future__ import annotations

import json

from ..checker.balance_predictors import BalancePredictor
from ..checker.damage import DEDUPED, DUPLICATED
from ..checker.predictors import LedgerPredictor
from ..workload.sqlnames import table_identifier as table_ident
from .declaration import Experiment, KillPoint, Stores
from .offsets import at_least_once_loop

ACCOUNTS = 5


def _sql(text: str, table: str):
    from psycopg import sql
    return sql.SQL(text).format(table_ident(table))


def _payment(msg) -> dict:
    return json.loads(msg.value())


def apply_increment(ctx, msg, inside=None) -> bool:
    """balance = balance + amount, and the journal row, in one transaction."""
    p = _payment(msg)
    with ctx.pg.transaction():
        ctx.pg.execute(_sql("update {} set balance = balance + %s where account = %s", ctx.args.accounts),
                       (int(p["amount"]), p["account"]))
        if inside:
            inside()
        ctx.apply_effect(msg)
    return True


def apply_versioned(ctx, msg, inside=None) -> bool:
    """balance = the payment's balance, version = v, only where version = v - 1; 0 rows: a stale update."""
    p = _payment(msg)
    with ctx.pg.transaction():
        n = ctx.pg.execute(_sql("update {} set balance = %s, version = %s where account = %s and version = %s",
                                ctx.args.accounts),
                           (int(p["balance"]), int(p["version"]), p["account"], int(p["version"]) - 1)).rowcount
        if n == 0:
            ctx.pg.execute(_sql("update {} set stale_updates = stale_updates + 1 where account = %s",
                                ctx.args.accounts), (p["account"],))
            return False
        if inside:
            inside()
        ctx.apply_effect(msg)
    return True


def _points(prefix: str, damage, again: str) -> tuple:
    return (KillPoint("after-poll-before-update", "poll", "PG transaction", frozenset({damage}),
                      f"the updates since the last commit (none with --commit-every 1) come again: {again}"),
            KillPoint("inside-update-txn", f"{prefix}", "journal row (same transaction)", frozenset({damage}),
                      f"the update rolls back: this payment is applied once on redelivery; earlier uncommitted "
                      f"ones come again: {again}"),
            KillPoint("after-update-before-commit", "PG transaction", "commit offset", frozenset({damage}),
                      f"this payment and every one since the last commit come again: {again}"),
            KillPoint("after-commit", "commit offset", None, frozenset({damage}),
                      f"nothing when the commit covered this payment; otherwise the uncommitted ones: {again}"))


INCREMENT_POINTS = _points("balance = balance + amount", DUPLICATED, "added to the balance again")
VERSIONED_POINTS = _points("balance = X, version = v where version = v - 1", DEDUPED,
                           "their version is already there: 0 rows updated")


def _loop(apply, points):
    def loop(ctx) -> None:
        at_least_once_loop(ctx, lambda msg, inside=None: apply(ctx, msg, inside), tuple(p.name for p in points))
    return loop


INCREMENT = Experiment(
    name="increment",
    steps=("poll", "PG transaction {balance = balance + amount, journal row}", "commit offset"),
    kill_points=INCREMENT_POINTS,
    default_point=INCREMENT_POINTS[2].name,
    stores=Stores(ledger=True, accounts=ACCOUNTS),
    proves="Mistake: a blind increment (\"add 100\"); each redelivery adds again. Fix: a "
           "conditional write, \"set to 600 if version is 4\" (versioned).",
    expected="each account over by the amounts of its redelivered payments; duplicates = redeliveries, lost 0",
    predictors=(LedgerPredictor(), BalancePredictor(blind=True)),
    loop=_loop(apply_increment, INCREMENT_POINTS),
    lesson="Mistake: a blind increment (\"add 100\"), so each redelivery adds again. Fix: a conditional write, "
           "\"set to 600 if version is 4\" (versioned).",
    suite={"group": "mistakes", "weight": 2},
)

VERSIONED = Experiment(
    name="versioned",
    steps=("poll", "PG transaction {balance = X, version = v where version = v - 1; journal row if 1 row}",
           "commit offset"),
    kill_points=VERSIONED_POINTS,
    default_point=VERSIONED_POINTS[2].name,
    stores=Stores(ledger=True, accounts=ACCOUNTS),
    proves="The fix for blind increments: a conditional write on the account's version; a "
           "redelivery updates 0 rows and every balance stays exact.",
    expected="every balance exact, 0 duplicates, 0 lost; 0-row updates (dedupe hits) = redeliveries",
    predictors=(LedgerPredictor(dedupe=True), BalancePredictor(blind=False)),
    loop=_loop(apply_versioned, VERSIONED_POINTS),
    lesson="Mistake: a blind increment, applied again by each redelivery. Fix: a conditional write on the "
           "account's version; a redelivery updates 0 rows.",
    suite={"group": "mistakes", "weight": 2},
)
