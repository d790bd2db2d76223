"""`harness clean`: remove runs' topics and tables, and nothing else.

A name's shape proves nothing: anyone may create a topic `harness.customer-config`
or a table `harness.ledger_reports`. So a name is deleted only when it is
exactly one of the names (naming.RunNames, naming.run_tables) of a run id
the harness knows: one it registered in the database (workload.registry),
one of its reports under the reports folder names, or one the user named on
the command line; and a topic under a run's own prefix (`harness-<run id>-`:
Kafka Streams' internal topics, or any its user made there) goes with that
run. Never a run still in progress (its registry entry names a
live process), whoever asks. A cleaned run's own PostgreSQL role
(workload.run_role: one with the harness's comment naming that run) is
dropped with its tables, and its Kafka user loses its ACLs and is retired
(workload.run_kafka_user: never deleted, see workload/kafka_users.py); `--all`
also drops such a role, and retires such a user (one whose ACL on its run's own
prefix says the harness made it), of any run that is not live, whose tables
are already gone. A user retired before is left as it is. Every other `harness.*` topic and every other
table of the `harness` schema is kept, and the command says which and why.
Table names read back from Postgres are never trusted as SQL: they are
compared with the names the harness makes and quoted as identifiers when
dropped.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from ..clients import kafka_client, kafka_logging
from ..stack.stack import Stack
from ..workload import registry, run_kafka_user, run_role, tables
from ..workload.naming import SCHEMA, TOPIC_PREFIX, RunNames, run_tables
from ..clients import pgconn

OWN_TOPIC_PREFIX = "harness-"          # RunNames.own_prefix without the run id
REPORT_MAX_BYTES = 16 * 1024 * 1024     # as harness.reporting.validate.MAX_BYTES (and MAX_VALUES below)
REPORT_MAX_VALUES = 1_000_000


@dataclass
class Plan:
    topics: list[str] = field(default_factory=list)
    tables: list[str] = field(default_factory=list)
    runs: list[str] = field(default_factory=list)                   # run ids whose data goes
    kept: list[tuple[str, str]] = field(default_factory=list)       # (name as it may be printed, why)


def shown(name: str) -> str:
    """A name read from Kafka or Postgres as it may reach a terminal: control characters escaped."""
    return name if name.isprintable() else ascii(name)


def plan(topics: list[str], schema_tables: list[str], known: set[str], live: dict[str, str],
         named: list[str] | None = None) -> Plan:
    """What to drop of `topics` and `schema_tables` (unqualified names in the harness schema).

    `known`: run ids the harness knows; `live`: run id -> why it is still in progress; `named`:
    the run ids the user asked for (None: --all, every known run). Pure: no I/O.
    """
    wanted = set(named) if named is not None else set(known)
    owner_of_topic = {t: r for r in wanted | set(live) for t in RunNames(r).topics()}
    # Topics a run's user made under its own prefix (Kafka Streams' internal ones, or a consumer's): the longest
    # run id whose prefix starts the name owns it.
    prefixes = sorted(((RunNames(r).own_prefix, r) for r in wanted | set(live)), key=lambda pr: -len(pr[0]))

    def topic_owner(t: str) -> str | None:
        return owner_of_topic.get(t) or next((r for pre, r in prefixes if t.startswith(pre)), None)
    owner_of_table = {t: r for r in wanted | set(live) for t in run_tables(r)}
    p = Plan()

    def sort(name: str, owner: str | None, drop: list, kind: str) -> None:
        if owner in live:
            p.kept.append((shown(name), live[owner]))
        elif owner in wanted:
            drop.append(name)
        elif named is None:
            p.kept.append((shown(name), f"no run the harness knows (its registry or reports) has this {kind}"))
    for t in sorted(topics):
        if t.startswith((TOPIC_PREFIX, OWN_TOPIC_PREFIX)):   # else not a name the harness could have made: not ours to mention
            sort(t, topic_owner(t), p.topics, "topic")
    for t in sorted(schema_tables):
        if t != registry.TABLE:                         # the registry itself
            sort(f"{SCHEMA}.{t}", owner_of_table.get(t), p.tables, "table")
    p.runs = sorted(wanted - set(live))         # all their names went: their registry entries go too
    return p


def reported_run_ids(folder: Path) -> set[str]:
    """Run ids of the reports under `folder` (a run's folder, or a suite's): valid run ids only."""
    out = set()
    for pattern in ("*/report.json", "*/*/report.json"):
        try:
            paths = list(folder.glob(pattern))
        except OSError:
            continue
        for f in paths:
            try:
                if not f.is_file() or f.is_symlink() or f.stat().st_size > REPORT_MAX_BYTES:
                    continue
                text = f.read_text()
                if text.count(",") + text.count("[") + text.count("{") > REPORT_MAX_VALUES:
                    continue                # not a report this harness wrote: not parsed at all
                d = json.loads(text)
            except (OSError, ValueError, RecursionError):
                continue
            run_id = d.get("run_id") if isinstance(d, dict) else None
            if registry.valid_run_id(run_id):
                out.add(run_id)
    return out


def schema_tables(dsn: str) -> list[str]:
    """Every table name of the harness schema (unqualified), ours or not."""
    with pgconn.connect(dsn, autocommit=True, connect_timeout=10) as conn:
        rows = conn.execute("select table_name from information_schema.tables where table_schema = %s",
                            (SCHEMA,)).fetchall()
    return [r[0] for r in rows]


def clean_runs(stack: Stack, run_ids: list[str], all_runs: bool) -> Plan:
    """Drop what `plan` says; return the plan (what went, what was kept and why)."""
    from confluent_kafka.admin import AdminClient
    from ..core.paths import reports_dir
    entries = registry.entries(stack.postgres_dsn)
    known = {r for r in entries} | reported_run_ids(reports_dir())
    live = {r: e.why_live() for r, e in entries.items() if e.live()}
    admin = AdminClient(kafka_client.config(stack.bootstrap_servers, kafka_logging.client_config()))
    topics = list(admin.list_topics(timeout=15).topics)
    p = plan(topics, schema_tables(stack.postgres_dsn), known, live, None if all_runs else list(run_ids))
    if p.topics:
        for fut in admin.delete_topics(p.topics, operation_timeout=30).values():
            try:
                fut.result(timeout=60)
            except Exception:  # noqa: BLE001 - already gone is fine
                pass
    admin.poll(0)   # hand the client's log lines to the logger
    tables.drop(stack.postgres_dsn, p.tables)
    _drop_roles(stack, p, all_runs)
    _drop_kafka_users(stack, p, all_runs)
    registry.forget(stack.postgres_dsn, p.runs)
    return p


def _drop_kafka_users(stack: Stack, p: Plan, all_runs: bool) -> None:
    """Retire the Kafka users (their ACLs go) of the cleaned runs, and with --all those of every run not live;
    listed before the registry is read again, as the roles are (a run registers before it makes its user).
    Users retired before are not listed (run_users), so never taken for ones the harness did not make."""
    found = set(run_kafka_user.run_users(stack))       # those that can still log in: retired ones are done
    users = {run_kafka_user.user_name(r) for r in p.runs} & found
    if all_runs:
        entries = registry.entries(stack.postgres_dsn)
        live = {run_kafka_user.user_name(r) for r, e in entries.items() if e.live()}
        for u in sorted(found - live - users):
            if run_kafka_user.run_of(stack, u) is None:     # only named like a run's user: not ours to remove
                p.kept.append((shown(u), "a Kafka user named like a run's that the harness did not make (no ACL "
                                         "on a run's own prefix)"))
            else:
                users.add(u)
    run_kafka_user.retire_users(stack, users)


def _drop_roles(stack: Stack, p: Plan, all_runs: bool) -> None:
    """The run roles of the cleaned runs, and with --all those of every run not live. The roles are
    listed before the registry is read again: a run registers before it makes its role, so a run that
    started after this command's first look is in that read, live, and keeps its role."""
    import psycopg
    try:
        runs = set(p.runs)
        if all_runs:
            roles = run_role.run_ids(stack.role_maker_dsn)
            entries = registry.entries(stack.postgres_dsn)
            runs |= {r for r in roles if r not in entries or not entries[r].live()}
        for run_id in sorted(runs):
            run_role.drop(stack.role_maker_dsn, run_id)
    except psycopg.errors.InsufficientPrivilege:
        pass            # a role that may not make roles made none (run_role's fallback): none to drop
