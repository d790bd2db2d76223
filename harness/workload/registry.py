"""The harness's own list of its runs, in the database: which run ids it made, and which still go.

`harness clean --all` must delete the data of the harness's runs and nothing
else: not a topic someone named `harness.customer-config`, not a table that
merely starts like ours (`harness.ledger_reports`), and not the tables of a
run still in progress. A name's shape proves nothing, so every run records
itself here before it creates anything: its run id, and the host, pid and
process start time of the `harness run` that owns it (the start time makes
a recycled pid recognisable, as for leases). `finished_at` is set when its
report is written. A run is live while that process still runs on this host;
a run of another host is live until it finished (this host cannot see its
process).

The table is `harness.runs`, which no run's own names can be (see naming).
"""

from __future__ import annotations

import os
import re
import socket
from dataclasses import dataclass

import psycopg
from psycopg import sql

from ..core import procs
from .naming import SCHEMA
from ..clients import pgconn

TABLE = "runs"
# What `naming.new_run_id` makes (and what a bench adds after it): the UTC stamp first, then plain characters.
RUN_ID = re.compile(r"\d{8}T\d{6}\.\d{3}-[a-z0-9][a-z0-9._-]{0,150}")


def valid_run_id(run_id) -> bool:
    return isinstance(run_id, str) and RUN_ID.fullmatch(run_id) is not None


@dataclass
class Entry:
    run_id: str
    host: str
    pid: int | None
    start_time: int | None
    finished: bool

    def live(self) -> bool:
        """Whether the run may still be using its topics and tables."""
        if self.finished:
            return False
        if self.host != socket.gethostname():
            return True                    # another host's process: nothing here can prove it ended
        return procs.alive(self.pid) and procs.start_time(self.pid) == self.start_time

    def why_live(self) -> str:
        if self.host != socket.gethostname():
            host = self.host if self.host.isprintable() else ascii(self.host)
            return f"run {self.run_id} of host {host} has not finished"
        return f"run {self.run_id} is in progress (pid {self.pid})"


def _table() -> sql.Composed:
    return sql.Identifier(SCHEMA, TABLE)


def _ensure(conn) -> None:
    from .tables import ensure_schema
    ensure_schema(conn)           # created only when missing: the local stack's run role may not create schemas
    conn.execute(sql.SQL("""create table if not exists {} (
        run_id       text primary key,
        host         text not null,
        pid          integer,
        start_time   bigint,
        started_at   timestamptz not null default clock_timestamp(),
        finished_at  timestamptz)""").format(_table()))


def register(dsn: str, run_id: str) -> None:
    """Record `run_id` as this process's run (call before creating any of its topics or tables)."""
    pid = os.getpid()
    with pgconn.connect(dsn, autocommit=True, connect_timeout=10) as conn:
        for attempt in range(3):        # two runs creating the table at once: one of them retries
            try:
                _ensure(conn)
                break
            except (psycopg.errors.UniqueViolation, psycopg.errors.DuplicateTable,
                    psycopg.errors.DuplicateObject):
                if attempt == 2:
                    raise
        conn.execute(sql.SQL("insert into {} (run_id, host, pid, start_time) values (%s, %s, %s, %s) "
                             "on conflict (run_id) do update set host = excluded.host, pid = excluded.pid, "
                             "start_time = excluded.start_time, finished_at = null").format(_table()),
                     (run_id, socket.gethostname(), pid, procs.start_time(pid)))


def finish(dsn: str, run_id: str) -> None:
    """Mark `run_id` finished (its report is written); never raises: the report matters more."""
    try:
        with pgconn.connect(dsn, autocommit=True, connect_timeout=10, even_interrupted=True) as conn:
            conn.execute(sql.SQL("update {} set finished_at = clock_timestamp() where run_id = %s").format(_table()),
                         (run_id,))
    except psycopg.Error:
        pass


def entries(dsn: str) -> dict[str, Entry]:
    """Every registered run with a valid run id, by run id ({} when no run ever registered)."""
    with pgconn.connect(dsn, autocommit=True, connect_timeout=10) as conn:
        exists = conn.execute("select to_regclass(%s)", (f'"{SCHEMA}"."{TABLE}"',)).fetchone()[0]
        if exists is None:
            return {}
        rows = conn.execute(sql.SQL("select run_id, host, pid, start_time, finished_at is not null from {}")
                            .format(_table())).fetchall()
    return {r[0]: Entry(r[0], str(r[1]), r[2], r[3], bool(r[4])) for r in rows if valid_run_id(r[0])}


def forget(dsn: str, run_ids: list[str]) -> None:
    """Drop the entries of runs whose data is gone."""
    if not run_ids:
        return
    with pgconn.connect(dsn, autocommit=True, connect_timeout=10) as conn:
        exists = conn.execute("select to_regclass(%s)", (f'"{SCHEMA}"."{TABLE}"',)).fetchone()[0]
        if exists is not None:
            conn.execute(sql.SQL("delete from {} where run_id = any(%s)").format(_table()), (list(run_ids),))
