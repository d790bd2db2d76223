"""Re-count a finished run from the stack alone, as a skeptic would: `harness audit`.

The run's verdict rests on its own audit code (checker/audit.py and friends).
This module does not use it. It reads the run's input topic afresh for what
was sent, asks Postgres with plain SQL (the sent ids go into a temporary
table, so missing, duplicated, stray and wrong-amount ids are joins), and
reads the output topic twice, read_committed and read_uncommitted. The same
query texts are printed in every report's "Audit it yourself" section, so
what `harness audit` runs is what a reader can paste into psql.

A store that cannot be read is `None` (unknown) with its error, never 0.
"""

import json
import time
import uuid
from collections import Counter
from dataclasses import dataclass, field

import psycopg
from psycopg import sql

from ..stack.redaction import redact

# {t}: the ledger table, {d}: the dedupe table. Shown verbatim (identifiers quoted) in the reports.
LEDGER_TOTALS = "select count(*) as effects, count(distinct message_id) as ids, coalesce(sum(amount), 0) as total from {t}"
LEDGER_DUPLICATES = ("select message_id, count(*) as effects from {t} group by message_id "
                     "having count(*) > 1 order by message_id")
DEDUPE_TOTALS = "select count(*) as keys, coalesce(sum(hits), 0) as hits from {d}"
# Against the ids read from the input topic (temporary table `sent`); `harness audit` only.
MISSING = ("select s.message_id from sent s where not exists "
           "(select 1 from {t} l where l.message_id = s.message_id) order by 1")
STRAY = ("select distinct l.message_id from {t} l where not exists "
         "(select 1 from sent s where s.message_id = l.message_id) order by 1")
WRONG_AMOUNT = ("select distinct l.message_id from {t} l join sent s on s.message_id = l.message_id "
                "where l.amount is distinct from s.amount order by 1")

READ_TIMEOUT_S = 60


class Unreadable(Exception):
    """The store answered with an error: nothing about it is known."""


class DataGone(Exception):
    """The run's topic or table no longer exists (cleaned), or the stack holding it is not this one."""


def quoted(qualified: str) -> str:
    """`harness.ledger_x` -> `"harness"."ledger_x"`, as text for the reports (SQL itself uses sql.Identifier)."""
    schema, _, table = qualified.partition(".")
    return ".".join('"' + part.replace('"', '""') + '"' for part in (schema, table))


def display(template: str, ledger: str | None = None, dedupe: str | None = None) -> str:
    return template.format(t=quoted(ledger) if ledger else "", d=quoted(dedupe) if dedupe else "")


def _composed(template: str, ledger: str | None, dedupe: str | None) -> sql.Composed:
    from ..workload.sqlnames import table_identifier
    args = {}
    if "{t}" in template:
        args["t"] = table_identifier(ledger)
    if "{d}" in template:
        args["d"] = table_identifier(dedupe)
    return sql.SQL(template).format(**args)


@dataclass
class TopicRead:
    records: int
    ids: Counter            # key -> records with that key
    values: dict            # key -> the amount in the (last) value, for input topics


def read_topic(bootstrap: str, topic: str, isolation: str) -> TopicRead:
    """Every record of `topic` up to its end as a fresh `isolation` reader sees it."""
    from confluent_kafka import Consumer, TopicPartition
    from .. import kafka_client
    c = Consumer(kafka_client.config(bootstrap, {
        "group.id": f"harness-recount-{uuid.uuid4().hex[:8]}", "enable.auto.commit": False,
        "auto.offset.reset": "earliest", "isolation.level": isolation, "log_level": 0}))
    try:
        md = c.list_topics(topic, timeout=15)
        meta = md.topics.get(topic)
        if meta is None or meta.error is not None:
            raise DataGone(f"topic {topic} does not exist")
        parts = sorted(meta.partitions)
        ends = {p: c.get_watermark_offsets(TopicPartition(topic, p), timeout=15)[1] for p in parts}
        c.assign([TopicPartition(topic, p, 0) for p in parts])
        ids, values, records = Counter(), {}, 0
        deadline = time.time() + READ_TIMEOUT_S
        while time.time() < deadline:
            for m in c.consume(num_messages=1000, timeout=0.3):
                if m.error():
                    continue
                records += 1
                key = m.key().decode(errors="replace") if m.key() is not None else None
                ids[key] += 1
                try:
                    values[key] = json.loads(m.value()).get("amount")
                except (ValueError, TypeError, AttributeError):
                    values[key] = None
            positions = c.position([TopicPartition(topic, p) for p in parts])
            if all(tp.offset >= ends[tp.partition] for tp in positions if ends[tp.partition] > 0):
                return TopicRead(records, ids, values)
        raise Unreadable(f"reading {topic} ({isolation}) took longer than {READ_TIMEOUT_S} s")
    finally:
        c.close()


@dataclass
class LedgerRecount:
    effects: int
    distinct_ids: int
    total: int
    duplicates: int
    duplicate_ids: list
    missing_ids: list
    stray_ids: list
    wrong_amount_ids: list
    dedupe_keys: int | None = None
    dedupe_hits: int | None = None


def recount_ledger(dsn: str, ledger: str, dedupe: str | None, sent: dict) -> LedgerRecount:
    """Plain SQL over the run's tables; `sent` (id -> amount, from the input topic) becomes a temporary
    table. Nothing is written: the transaction is rolled back, the temporary table with it."""
    try:
        with psycopg.connect(dsn, connect_timeout=10) as conn:
            conn.execute("create temporary table sent (message_id text primary key, amount bigint) on commit drop")
            with conn.cursor().copy("copy sent (message_id, amount) from stdin") as cp:
                for i, amount in sent.items():
                    cp.write_row((i, amount if isinstance(amount, int) else None))

            def rows(template):
                return conn.execute(_composed(template, ledger, dedupe)).fetchall()
            effects, distinct, total = rows(LEDGER_TOTALS)[0]
            dups = rows(LEDGER_DUPLICATES)
            out = LedgerRecount(int(effects), int(distinct), int(total), sum(int(n) - 1 for _, n in dups),
                                [r[0] for r in dups], [r[0] for r in rows(MISSING)], [r[0] for r in rows(STRAY)],
                                [r[0] for r in rows(WRONG_AMOUNT)])
            if dedupe:
                keys, hits = rows(DEDUPE_TOTALS)[0]
                out.dedupe_keys, out.dedupe_hits = int(keys), int(hits)
            conn.rollback()
            return out
    except psycopg.errors.UndefinedTable as e:
        raise DataGone(redact(str(e).splitlines()[0])) from None
    except psycopg.Error as e:
        raise Unreadable(f"PostgreSQL: {redact(str(e).splitlines()[0] if str(e) else repr(e))}") from None


@dataclass
class OutputRecount:
    records: int
    duplicates: int
    missing: int
    duplicate_ids: list = field(default_factory=list)
    missing_ids: list = field(default_factory=list)


def recount_output(read: TopicRead, sent: dict) -> OutputRecount:
    dup_ids = sorted(str(k) for k, n in read.ids.items() if n > 1)
    missing = sorted(i for i in sent if read.ids.get(i, 0) == 0)
    return OutputRecount(read.records, sum(read.ids[k] - 1 for k in dup_ids), len(missing), dup_ids, missing)
