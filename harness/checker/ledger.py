"""Read the Postgres ledger (and dedupe table) of a run, from Postgres alone.

One query per table, with quoted identifiers. A failure is reported as an
error with no rows (`rows is None`), never as an empty ledger: a count that
could not be measured must show as unknown, not as zero.
"""

from dataclasses import dataclass
from ..clients import pgconn


@dataclass
class LedgerRows:
    rows: list | None              # [(message_id, amount)], None when the ledger could not be read
    dedupe_hits: int | None
    error: str | None = None
    dedupe_rows: list | None = None     # [(message_id, hits)], None without a dedupe table or when unreadable
    dedupe_error: str | None = None


def _first_line(e: Exception) -> str:
    from ..stack.stack import redact
    return redact(pgconn.reason(e))


def read_ledger(dsn: str, ledger: str, dedupe: str | None) -> LedgerRows:
    """Each table is read on its own: an unreadable dedupe table leaves the ledger's numbers known."""
    from psycopg import sql
    from ..workload.sqlnames import table_identifier
    out = LedgerRows(None, None)
    try:
        with pgconn.connect(dsn, connect_timeout=10) as conn:
            try:
                rows = conn.execute(sql.SQL("select message_id, amount from {}").format(table_identifier(ledger))
                                    ).fetchall()
                out.rows = [(r[0], int(r[1]) if r[1] is not None else None) for r in rows]
            except Exception as e:  # noqa: BLE001 - report, never raise
                out.error = _first_line(e)
                conn.rollback()
            if dedupe:
                try:
                    out.dedupe_rows = [(r[0], int(r[1])) for r in conn.execute(
                        sql.SQL("select message_id, hits from {}").format(table_identifier(dedupe))).fetchall()]
                    out.dedupe_hits = sum(h for _, h in out.dedupe_rows)
                except Exception as e:  # noqa: BLE001
                    out.dedupe_error = _first_line(e)
    except Exception as e:  # noqa: BLE001 - the connection itself failed: nothing is known
        out.error = _first_line(e)
        if dedupe:
            out.dedupe_error = out.error
    return out
