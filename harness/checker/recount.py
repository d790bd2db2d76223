"""Re-count a finished run from the stack alone, as a skeptic would: `harness audit`.

The run's verdict rests on its own audit code (checker/observe.py and friends).
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
from collections import Counter, defaultdict
from contextlib import contextmanager
from dataclasses import dataclass, field

import psycopg
from psycopg import sql

from ..core.redaction import redact
from ..clients import pgconn

# {t}: the ledger table, {d}: the dedupe table. Shown verbatim (identifiers quoted) in the reports.
LEDGER_TOTALS = "select count(*) as effects, count(distinct message_id) as ids, coalesce(sum(amount), 0) as total from {t}"
LEDGER_DUPLICATES = ("select message_id, count(*) as effects from {t} group by message_id "
                     "having count(*) > 1 order by message_id")
DEDUPE_TOTALS = "select count(*) as keys, coalesce(sum(hits), 0) as hits from {d}"
# {r}: a service's rows table, {o}: its outbox (dual-write, outbox).
ROWS_TOTALS = "select count(*) as rows, count(distinct message_id) as ids from {r}"
OUTBOX_TOTALS = "select count(*) as outbox_rows, count(*) filter (where sent_at is null) as unsent from {o}"
# {a}: the accounts table (increment, versioned): each account's balance as the workers left it.
ACCOUNT_BALANCES = "select account, balance from {a} order by account"
# Against the payments read from the input topic (temporary table `sent`, with each payment's account):
# what each account should hold, the sum of the payments produced to it. `harness audit` only.
ACCOUNT_EXPECTED = ("select s.account, sum(s.amount) as expected from sent s where s.account is not null "
                    "group by s.account order by 1")
# Against the keys read from the events topic (temporary table `events`); `harness audit` only.
UNPUBLISHED = ("select r.message_id from {r} r where not exists "
               "(select 1 from events e where e.message_id = r.message_id) order by 1")
# Against the ids read from the input topic (temporary table `sent`); `harness audit` only.
MISSING = ("select s.message_id from sent s where not exists "
           "(select 1 from {t} l where l.message_id = s.message_id) order by 1")
STRAY = ("select distinct l.message_id from {t} l where not exists "
         "(select 1 from sent s where s.message_id = l.message_id) order by 1")
WRONG_AMOUNT = ("select distinct l.message_id from {t} l join sent s on s.message_id = l.message_id "
                "where l.amount is distinct from s.amount order by 1")

# {j}: the rejects table (key-fingerprint). Against the requests read from the input topic under a key
# already used, with another amount (temporary table `reused`); `harness audit` only, but for REJECTS_TOTALS.
REJECTS_TOTALS = "select count(*) as rejects, count(distinct message_id) as ids from {j}"
REUSED_REJECTED = ("select count(*) from {j} j join reused u on u.message_id = j.message_id "
                   "and u.amount = j.amount")
REUSED_APPLIED = ("select distinct u.message_id from reused u join {t} l on l.message_id = u.message_id "
                  "and l.amount = u.amount order by 1")
REUSED_UNSEEN = ("select u.message_id from reused u where not exists (select 1 from {t} l where l.message_id = "
                 "u.message_id and l.amount = u.amount) and not exists (select 1 from {j} j where j.message_id = "
                 "u.message_id and j.amount = u.amount) order by 1")
REUSED_UNSEEN_NO_REJECTS = ("select u.message_id from reused u where not exists (select 1 from {t} l where "
                            "l.message_id = u.message_id and l.amount = u.amount) order by 1")

READ_TIMEOUT_S = 60


class Unreadable(Exception):
    """The store answered with an error: nothing about it is known."""


class DataGone(Exception):
    """The run's topic or table no longer exists (cleaned), or the stack holding it is not this one."""


def quoted(qualified: str) -> str:
    """`harness.ledger_x` -> `"harness"."ledger_x"`, as text for the reports (SQL itself uses sql.Identifier)."""
    schema, _, table = qualified.partition(".")
    return ".".join('"' + part.replace('"', '""') + '"' for part in (schema, table))


def display(template: str, ledger: str | None = None, dedupe: str | None = None, **tables) -> str:
    """The query as text for the reports; a placeholder with no table given reads as nothing."""
    names = {"t": ledger, "d": dedupe, **tables}
    return template.format_map(defaultdict(str, {k: quoted(v) for k, v in names.items() if v}))


def _composed(template: str, ledger: str | None = None, dedupe: str | None = None, **tables) -> sql.Composed:
    from ..workload.sqlnames import table_identifier
    names = {"t": ledger, "d": dedupe, **tables}
    return sql.SQL(template).format(**{k: table_identifier(v) for k, v in names.items()
                                       if "{" + k + "}" in template})


@dataclass
class TopicRead:
    records: int
    ids: Counter            # key -> records with that key
    values: dict            # key -> the amount in its first value, for input topics
    accounts: dict = field(default_factory=dict)   # key -> the account in its first value, when it names one
    txns: Counter = field(default_factory=Counter)  # (worker, attempt, txn) a value names -> records naming it
    offsets: dict = field(default_factory=dict)     # partition -> the offsets read there, in order
    reused: dict = field(default_factory=dict)      # key -> the amount of a later record of that key with another
    at: dict = field(default_factory=dict)          # (partition, offset) -> key of the record there
    dead_letters: set = field(default_factory=set)  # (topic, partition, offset) a dead letter's headers name


def read_topic(bootstrap: str, topic: str, isolation: str) -> TopicRead:
    """Every record of `topic` up to its end as a fresh `isolation` reader sees it."""
    from confluent_kafka import Consumer, TopicPartition
    from ..clients import kafka_client
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
        ids, values, accounts, records, txns, offsets, reused = Counter(), {}, {}, 0, Counter(), {}, {}
        at, dead_letters = {}, set()
        deadline = time.time() + READ_TIMEOUT_S
        while time.time() < deadline:
            for m in c.consume(num_messages=1000, timeout=0.3):
                if m.error():
                    continue
                records += 1
                offsets.setdefault(m.partition(), []).append(m.offset())
                key = m.key().decode(errors="replace") if m.key() is not None else None
                at[(m.partition(), m.offset())] = key
                named = _dead_letter_of(m.headers())
                if named:
                    dead_letters.add(named)
                ids[key] += 1
                try:
                    body = json.loads(m.value())
                    amount = body.get("amount")
                    if ids[key] == 1:
                        values[key] = amount
                        if body.get("account") is not None:
                            accounts[key] = str(body["account"])
                    elif amount != values.get(key):    # a key produced again with another amount
                        reused[key] = amount
                    txn = _transaction_of(body)
                    if txn:
                        txns[txn] += 1
                except (ValueError, TypeError, AttributeError, RecursionError):
                    values.setdefault(key, None)
            positions = c.position([TopicPartition(topic, p) for p in parts])
            if all(tp.offset >= ends[tp.partition] for tp in positions if ends[tp.partition] > 0):
                return TopicRead(records, ids, values, accounts, txns, offsets, reused, at, dead_letters)
        raise Unreadable(f"reading {topic} ({isolation}) took longer than {READ_TIMEOUT_S} s")
    finally:
        c.close()


def _dead_letter_of(headers) -> tuple | None:
    """(topic, partition, offset) of the input record a share group's dead letter names in its headers (Kafka 4.4:
    __dlq.errors.topic, __dlq.errors.partition, __dlq.errors.offset), None for any other record."""
    if not headers:
        return None
    h = {k: v for k, v in headers if isinstance(k, str) and k.startswith("__dlq.errors.") and isinstance(v, bytes)}
    try:
        return (h["__dlq.errors.topic"].decode(errors="replace"), int(h["__dlq.errors.partition"]),
                int(h["__dlq.errors.offset"]))
    except (KeyError, ValueError):
        return None


def dead_lettered(dead_letter_topic: TopicRead, input_topic: str, sent: TopicRead) -> set:
    """The payments whose input record the dead-letter topic holds a dead letter of (by its headers' place)."""
    return {sent.at[(p, o)] for t, p, o in dead_letter_topic.dead_letters
            if t == input_topic and sent.at.get((p, o)) is not None}


def _transaction_of(body) -> tuple | None:
    """The transaction an output value says it was written in: (worker, attempt, txn), whole numbers only."""
    if not isinstance(body, dict):
        return None
    w, a, n = body.get("worker"), body.get("attempt"), body.get("txn")
    if isinstance(w, str) and len(w) <= 64 and all(type(x) is int and 0 < x < 2 ** 53 for x in (a, n)):
        return w, a, n
    return None


@contextmanager
def _recounting(dsn: str):
    """A connection whose work is rolled back at the end (temporary tables go with it). A missing
    table means the run's data is gone (DataGone); any other error leaves the store Unreadable."""
    try:
        with pgconn.connect(dsn, connect_timeout=10) as conn:
            try:
                yield conn
            finally:
                if not conn.closed:
                    conn.rollback()
    except psycopg.errors.UndefinedTable as e:
        raise DataGone(redact(str(e).splitlines()[0])) from None
    except psycopg.Error as e:
        raise Unreadable(f"PostgreSQL: {redact(pgconn.reason(e))}") from None


def _temporary(conn, name: str, columns: tuple, rows) -> None:
    """A temporary table `name` (a constant of this module; `columns` as SQL) holding `rows`, gone with
    the transaction."""
    conn.execute(f"create temporary table {name} ({', '.join(columns)}) on commit drop")
    with conn.cursor().copy(f"copy {name} ({', '.join(c.split()[0] for c in columns)}) from stdin") as cp:
        for row in rows:
            cp.write_row(row)


def _whole(amount):
    """An amount read from a payment's value, or None when it is not a whole number."""
    return amount if isinstance(amount, int) else None


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


def effects_from_sql(dsn: str, query: str) -> list[tuple]:
    """The (message_id, amount) rows of a user's effects query (`harness audit --audit-sql`), run as
    `user_sql` runs SQL the harness did not write: read-only, one statement, a timeout; `dsn` is the
    stack's read-only role when it has one. A report's own copy of the query never comes here."""
    from . import user_sql
    try:
        columns, rows = user_sql.select(dsn, query)
    except psycopg.Error as e:
        raise Unreadable(f"--audit-sql: {redact(str(e).splitlines()[0] if str(e) else repr(e))}") from None
    if columns != 2:
        raise Unreadable("--audit-sql does not return (message_id, amount) rows")
    return [(None if r[0] is None else str(r[0]), r[1]) for r in rows]


def recount_ledger(dsn: str, ledger: str, dedupe: str | None, sent: dict,
                   effect_rows: list | None = None) -> LedgerRecount:
    """Plain SQL over the run's tables; `sent` (id -> amount, from the input topic) becomes a temporary
    table. Nothing is written: the transaction is rolled back, the temporary table with it. `effect_rows`,
    when given (rows of a custom run's --audit-sql), stand in for the ledger, as a temporary table."""
    with _recounting(dsn) as conn:
        _temporary(conn, "sent", ("message_id text primary key", "amount bigint"),
                   ((i, _whole(amount)) for i, amount in sent.items()))
        if effect_rows is not None:
            _temporary(conn, "effects", ("message_id text", "amount numeric"), effect_rows)
            ledger = "pg_temp.effects"

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
        return out


@dataclass
class OutputRecount:
    records: int
    duplicates: int
    missing: int
    duplicate_ids: list = field(default_factory=list)
    missing_ids: list = field(default_factory=list)
    txns: Counter = field(default_factory=Counter)      # the read's records per transaction their values name
    offsets: dict = field(default_factory=dict)         # partition -> the offsets read there


def recount_output(read: TopicRead, sent: dict) -> OutputRecount:
    dup_ids = sorted(str(k) for k, n in read.ids.items() if n > 1)
    missing = sorted(i for i in sent if read.ids.get(i, 0) == 0)
    return OutputRecount(read.records, sum(read.ids[k] - 1 for k in dup_ids), len(missing), dup_ids, missing,
                         read.txns, read.offsets)


def torn_transactions(committed: OutputRecount, uncommitted: OutputRecount) -> list[tuple]:
    """Transactions a read_committed reader saw in part: some of their records, not all that the log holds
    (a transaction still open is beyond the last stable offset whole, so it is never in part)."""
    return sorted(t for t, n in uncommitted.txns.items() if 0 < committed.txns.get(t, 0) < n)


def service_stores(report: dict) -> dict | None:
    """The rows table, outbox and events topic a run wrote (dual-write, outbox), from its `stack` lists."""
    from ..workload.naming import RunNames
    st = report.get("stack") or {}
    try:
        names = RunNames(report["run_id"])
    except Exception:  # noqa: BLE001 - a run id this harness cannot parse has none of these
        return None
    tables, topics = set(st.get("tables") or []), set(st.get("topics") or [])
    if names.rows_table not in tables or names.events_topic not in topics:
        return None
    return {"rows_table": names.rows_table, "events_topic": names.events_topic,
            **({"outbox_table": names.outbox_table} if names.outbox_table in tables else {})}


@dataclass
class ServiceRecount:
    rows: int
    events: int
    unpublished_ids: list            # rows without an event
    orphaned_ids: list               # events without a row
    event_duplicates: int
    duplicate_event_ids: list
    outbox_rows: int | None = None
    outbox_unsent: int | None = None


def recount_service(dsn: str, rows_table: str, outbox_table: str | None, events: TopicRead) -> ServiceRecount:
    """A service's rows (and outbox) in plain SQL, against the keys of its events topic read afresh."""
    keys = [k for k in events.ids if k is not None]
    with _recounting(dsn) as conn:
        _temporary(conn, "events", ("message_id text primary key",), ((k,) for k in keys))
        rows, _ids = conn.execute(_composed(ROWS_TOTALS, r=rows_table)).fetchone()
        unpublished = [r[0] for r in conn.execute(_composed(UNPUBLISHED, r=rows_table)).fetchall()]
        row_ids = {r[0] for r in conn.execute(_composed("select message_id from {r}", r=rows_table)).fetchall()}
        out = ServiceRecount(int(rows), events.records, unpublished, sorted(k for k in keys if k not in row_ids),
                             sum(n - 1 for n in events.ids.values() if n > 1),
                             sorted(str(k) for k, n in events.ids.items() if n > 1))
        if outbox_table:
            total, unsent = conn.execute(_composed(OUTBOX_TOTALS, o=outbox_table)).fetchone()
            out.outbox_rows, out.outbox_unsent = int(total), int(unsent)
        return out


@dataclass
class ReuseRecount:
    reused: int              # keys of the input topic whose later record carries another amount
    applied_ids: list        # of those, the ids with a ledger row of the later amount
    hidden_ids: list         # neither applied nor rejected with that amount
    rejects: int | None = None      # rows of the rejects table (None: the run has none)
    rejected_reused: int | None = None   # of those, the ones with a reused request's id and amount


def recount_reuse(dsn: str, ledger: str, rejects: str, reused: dict) -> ReuseRecount:
    """Requests under a reused key (key-reuse, key-fingerprint): `reused` (id -> the later amount, from
    the input topic) becomes a temporary table, joined in plain SQL with the ledger and with the run's
    rejects table when it has one (`rejects`, the name the run id gives it: asked of Postgres, not of the
    report, which anyone can edit)."""
    with _recounting(dsn) as conn:
        if conn.execute("select to_regclass(%s)", (quoted(rejects),)).fetchone()[0] is None:
            rejects = None
        _temporary(conn, "reused", ("message_id text primary key", "amount bigint"),
                   ((i, _whole(a)) for i, a in reused.items()))
        applied = [r[0] for r in conn.execute(_composed(REUSED_APPLIED, ledger)).fetchall()]
        unseen = _composed(REUSED_UNSEEN, ledger, j=rejects) if rejects else _composed(REUSED_UNSEEN_NO_REJECTS,
                                                                                     ledger)
        out = ReuseRecount(len(reused), applied, [r[0] for r in conn.execute(unseen).fetchall()])
        if rejects:
            out.rejects = int(conn.execute(_composed(REJECTS_TOTALS, j=rejects)).fetchone()[0])
            out.rejected_reused = int(conn.execute(_composed(REUSED_REJECTED, j=rejects)).fetchone()[0])
        return out


@dataclass
class AccountsRecount:
    balances: dict          # account -> its balance in the accounts table
    expected: dict          # account -> the sum of the payments the input topic holds for it


def recount_accounts(dsn: str, accounts_table: str, sent: dict, sent_accounts: dict) -> AccountsRecount:
    """Each account's balance (plain SQL over the accounts table) and what it should be: the payments read
    from the input topic (id -> amount, id -> account) become a temporary table, summed per account."""
    with _recounting(dsn) as conn:
        _temporary(conn, "sent", ("message_id text primary key", "amount bigint", "account text"),
                   ((i, _whole(amount), sent_accounts.get(i)) for i, amount in sent.items()))
        balances = {r[0]: int(r[1]) for r in conn.execute(_composed(ACCOUNT_BALANCES, a=accounts_table)).fetchall()}
        expected = {r[0]: int(r[1]) for r in conn.execute(ACCOUNT_EXPECTED).fetchall()}
        return AccountsRecount(balances, expected)
