"""Read the Postgres ledger (and dedupe table) of a run, from Postgres alone.

One query per table, with quoted identifiers. A failure is reported as an
error with no rows (`rows is None`), never as an empty ledger: a count that
could not be measured must show as unknown, not as zero.
"""

from dataclasses import dataclass


@dataclass
class LedgerRows:
    rows: list | None              # [(message_id, amount)], None when the ledger could not be read
    dedupe_hits: int | None
    error: str | None = None


def read_ledger(dsn: str, ledger: str, dedupe: str | None) -> LedgerRows:
    import psycopg
    from psycopg import sql
    from ..stack.model import redact
    from ..workload.sqlnames import table_identifier as _ident
    try:
        with psycopg.connect(dsn, connect_timeout=10) as conn:
            rows = conn.execute(sql.SQL("select message_id, amount from {}").format(_ident(ledger))).fetchall()
            hits = conn.execute(sql.SQL("select coalesce(sum(hits), 0) from {}").format(_ident(dedupe))
                                ).fetchone()[0] if dedupe else None
    except Exception as e:  # noqa: BLE001 - report, never raise
        msg = str(e).splitlines()[0] if str(e) else repr(e)
        return LedgerRows(None, None, error=redact(msg))
    return LedgerRows(rows=[(r[0], int(r[1]) if r[1] is not None else None) for r in rows],
                      dedupe_hits=int(hits) if hits is not None else None)
