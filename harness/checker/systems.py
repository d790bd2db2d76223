"""Audit a service that writes rows in Postgres and publishes events to Kafka (dual write, outbox).

Three stores, read each on its own and compared by payment id: the service's
rows table (psql), the outbox table (rows not yet marked sent) and the events
topic as any plain consumer reads it (every record of every partition, from
the beginning). From them:

- `events.unpublished`: ids with a row and no event (the dual write's lost events);
- `events.orphaned`: ids with an event and no row (an event about nothing);
- `events.duplicates`: event records beyond one per id (a relay that published again);
- `outbox.unsent`: outbox rows the relay never marked sent.

Each event's value must carry its payment's id and amount. What could not be
read is None with its error, never 0.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from .effects import MAX_IDS
from .kafka_output import bad_records, read_ids
from ..clients import pgconn


@dataclass
class ServiceAudit:
    rows: int | None = None
    events: int | None = None
    unpublished: int | None = None
    orphaned: int | None = None
    event_duplicates: int | None = None
    outbox_rows: int | None = None
    outbox_unsent: int | None = None
    ids: dict = field(default_factory=dict)            # metric -> every id behind it
    integrity: list = field(default_factory=list)      # (failure text, ids)
    errors: list = field(default_factory=list)

    def metrics(self) -> dict:
        return {"events.unpublished": self.unpublished, "events.orphaned": self.orphaned,
                "events.duplicates": self.event_duplicates, "outbox.unsent": self.outbox_unsent}

    def section(self) -> dict:
        return {"rows": self.rows, "events": self.events, "unpublished": self.unpublished,
                "orphaned": self.orphaned, "event_duplicates": self.event_duplicates,
                "outbox_rows": self.outbox_rows, "outbox_unsent": self.outbox_unsent,
                "unpublished_ids": sorted(self.ids.get("events.unpublished") or [])[:MAX_IDS],
                "orphaned_ids": sorted(self.ids.get("events.orphaned") or [])[:MAX_IDS],
                "duplicate_event_ids": sorted(self.ids.get("events.duplicates") or [])[:MAX_IDS]}


def compare(amounts: dict, row_ids: list | None, event_records: list | None,
            outbox: list | None = None) -> ServiceAudit:
    """Pure part: `row_ids` from the rows table, `event_records` [(key, value[, partition, offset])] from the topic, `outbox`
    [(message_id, sent)] from the outbox table; None for a store that could not be read."""
    a = ServiceAudit()
    if row_ids is not None:
        a.rows = len(row_ids)
    if event_records is not None:
        keys = Counter(r[0] for r in event_records)
        a.events = len(event_records)
        dup = sorted(k for k, n in keys.items() if n > 1)
        a.event_duplicates = sum(n - 1 for n in keys.values())
        a.ids["events.duplicates"] = dup
        bad = bad_records(amounts, event_records)
        if bad:
            a.integrity.append((f"events values: {len(bad)} id(s) with an event whose value does not match its "
                                f"payment", bad))
        never = sorted(str(k) for k in keys if k not in amounts)
        if never:
            a.integrity.append((f"events ids never sent: {len(never)} id(s) with events but no payment", never))
    if row_ids is not None and event_records is not None:
        rows, events = set(row_ids), {r[0] for r in event_records}
        a.ids["events.unpublished"] = sorted(rows - events)
        a.ids["events.orphaned"] = sorted(events - rows)
        a.unpublished, a.orphaned = len(rows - events), len(events - rows)
    if outbox is not None:
        a.outbox_rows = len(outbox)
        unsent = sorted(i for i, sent in outbox if not sent)
        a.outbox_unsent = len(unsent)
        a.ids["outbox.unsent"] = unsent
    return a


def audit_service(exp, stack, names, amounts: dict) -> ServiceAudit:
    from psycopg import sql
    from ..stack.stack import redact
    from ..workload.sqlnames import table_identifier
    row_ids = outbox = None
    errors = []
    try:
        with pgconn.connect(stack.postgres_dsn, connect_timeout=10) as conn:
            row_ids = [r[0] for r in conn.execute(sql.SQL("select message_id from {}")
                                                  .format(table_identifier(names.rows_table))).fetchall()]
            if exp.stores.outbox:
                outbox = [(r[0], r[1]) for r in conn.execute(
                    sql.SQL("select message_id, sent_at is not null from {}")
                    .format(table_identifier(names.outbox_table))).fetchall()]
    except Exception as e:  # noqa: BLE001 - report, never raise
        errors.append(f"service tables: {redact(pgconn.reason(e))}")
    records, err = read_ids(stack.bootstrap_servers, names.events_topic, "read_committed")
    if err:
        errors.append(f"events topic: {err}")
        records = None
    a = compare(amounts, row_ids, records, outbox)
    a.errors = errors
    return a
