"""The worker side of key-reuse and key-fingerprint: the fingerprinted effect and its loop.
"""

from __future__ import annotations

from ...runtime.context import amount_of
from ...workload import reused_payments as reuse
from ...workload.sqlnames import table_identifier
from ..dedupe.dedupe_loops import D_COMMIT, D_EFFECT, D_INSIDE, D_POLL
from ..offsets.offset_loops import at_least_once_loop


def apply_effect_fingerprinted(ctx, msg, inside=None) -> bool:
    """dedupe's transaction with the request's fingerprint beside the key: a key found with another
    fingerprint is another request under a used key, rejected (a rejects row, in the same transaction)
    and not applied. True if applied."""
    from psycopg import sql
    msg_id, fp = msg.key().decode(), reuse.fingerprint(msg.value())
    with ctx.pg.transaction():
        hits, stored = ctx.pg.execute(
            sql.SQL("insert into {} as d (message_id, fingerprint) values (%s, %s) on conflict (message_id) "
                    "do update set hits = d.hits + 1 returning d.hits, d.fingerprint")
            .format(table_identifier(ctx.args.dedupe)), (msg_id, fp)).fetchone()
        if hits == 0:
            if inside:
                inside()
            ctx.apply_effect(msg)
            return True
        if stored != fp:
                        ctx.pg.execute(
                sql.SQL("insert into {} (message_id, amount, fingerprint, key_fingerprint, input_partition, "
                        "input_offset) values (%s, %s, %s, %s, %s, %s) "
                        "on conflict (input_partition, input_offset) do nothing")
                .format(table_identifier(ctx.args.rejects)), (msg_id, amount_of(msg), fp, stored, msg.partition(),
                                                             msg.offset()))
        return False


def fingerprint_loop(ctx) -> None:
    at_least_once_loop(ctx, lambda msg, inside=None: apply_effect_fingerprinted(ctx, msg, inside),
                       (D_POLL.name, D_INSIDE.name, D_EFFECT.name, D_COMMIT.name))
