"""Audit the Postgres ledger (and dedupe table) of a run, from Postgres alone."""

from dataclasses import dataclass

from .effects import EffectCounts, count_effects


@dataclass
class LedgerAudit:
    counts: EffectCounts
    actual_total: int
    dedupe_hits: int | None
    error: str | None = None


def audit_ledger(dsn: str, ledger: str, dedupe: str | None, sent_ids: list[str]) -> LedgerAudit:
    import psycopg
    try:
        with psycopg.connect(dsn, connect_timeout=10) as conn:
            rows = conn.execute(f"select message_id, amount from {ledger}").fetchall()
            hits = conn.execute(f"select coalesce(sum(hits), 0) from {dedupe}").fetchone()[0] if dedupe else None
    except Exception as e:  # noqa: BLE001 - report, never raise
        return LedgerAudit(count_effects(sent_ids, []), 0, None, error=str(e).splitlines()[0] if str(e) else repr(e))
    return LedgerAudit(counts=count_effects(sent_ids, [r[0] for r in rows]),
                       actual_total=sum(int(r[1] or 0) for r in rows),
                       dedupe_hits=int(hits) if hits is not None else None)
