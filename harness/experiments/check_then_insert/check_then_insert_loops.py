"""The worker side of key-check-then-insert: the SELECT-then-INSERT effect, its loop and its kill points.
"""

from __future__ import annotations

from ...checker.damage import DEDUPED
from ...workload.sqlnames import table_identifier
from ..declaration import KillPoint
from ..offsets.offset_loops import at_least_once_loop

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
