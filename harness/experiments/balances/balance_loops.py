"""The worker side of increment and versioned: the two balance effects, their loops and their kill points.
"""

from __future__ import annotations

import json

from ...checker.damage import DEDUPED, DUPLICATED
from ...workload.sqlnames import table_identifier as table_ident
from ..declaration import KillPoint
from ..offsets.offset_loops import at_least_once_loop


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


increment_loop = _loop(apply_increment, INCREMENT_POINTS)
versioned_loop = _loop(apply_versioned, VERSIONED_POINTS)
