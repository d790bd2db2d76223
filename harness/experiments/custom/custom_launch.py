"""Starting and watching the consumer a user brings (`harness run custom --worker-cmd CMD`).

The user's program, in any language, is started once per worker slot with the
run's names in its environment (the contract in `ENV` below and in the README),
is SIGKILLed at seeded random times (and on a beat with --kill-every), and is
restarted with the next attempt number until the group's committed offsets
reach the end of every partition; then it gets SIGTERM, and SIGKILL after a
grace period. A foreign consumer keeps no crash records, so what the run tests
is the user's claim itself (`--expect`, judged per id by ClaimPredictor), and
the witnesses of a violation come from what the harness saw on its own: its
kill log (pid, worker, attempt, time) and the ledger rows' insert times
(`applied_at`, a default column), placed side by side per id.

Progress of a foreign worker is seen from outside, from the group's own
timeline (runtime/group_sampler.py, read by checker/group_timeline.py): a
consumer that subscribes owns the partitions the group assigned to its member
(tied to the process by HARNESS_CLIENT_ID as its client.id, or by being the
only new process when the member appeared); one that assigns owns
HARNESS_PARTITIONS. An attempt counts as busy once it owns partitions and has
worked since it started (an owned partition's committed offset grew, or an
effect on it appeared, after it owned it); random kills strike only busy
workers, and the report counts each kill by what it could damage and the
group's stall after it.
"""

from __future__ import annotations

import json
import shlex
import signal
from dataclasses import dataclass, field
from urllib.parse import quote

from ...checker import group_timeline, user_sql
from ...checker.predictors import CLAIMS
from ...core.procs import dying_with_this_process
from ...core.errors import HarnessError
from ... import REQUIRED_AUTH
from ...core.options import Option
from .custom_report import DEFAULT_CLAIM, GROUP_TIMELINE, annotate, ends_of
from ..launch import Launch, assign_partitions, kafka_login, worker_env
from ...clients import pgconn

AUDIT_SQL_TIMEOUT_MS = user_sql.TIMEOUT_MS
WORKER_CMD = Option("worker_cmd", str, "custom only: your consumer, started once per worker slot (split like a shell "
                    "would, run without one) with the run's names in HARNESS_* environment variables (docs/your-"
                    "own-consumer.md).", metavar="CMD",
                    must="your consumer's command line, e.g. --worker-cmd \"python my_consumer.py\"")
EXPECT = Option("expect", str, "custom only: the claim under test: nothing lost or duplicated, nothing lost, or "
                "nothing duplicated, per payment id.", shown=DEFAULT_CLAIM, choices=tuple(CLAIMS))
AUDIT_SQL = Option("audit_sql", str, "custom only: count effects with this query (read-only transaction, statement "
                   "timeout) returning one (message_id, amount) row per effect, instead of the ledger table.",
                   metavar="SELECT", must="a SELECT returning (message_id, amount) rows")


def consumer_rule(params, exp) -> None:
    """The consumer under test must be given, and be a command this machine can start."""
    if not (params.worker_cmd or "").strip():
        raise HarnessError(f"{exp.name} runs your consumer: give it with --worker-cmd \"CMD\"")
    import shutil
    try:
        argv = shlex.split(params.worker_cmd)
    except ValueError as e:
        raise HarnessError(f"--worker-cmd cannot be split into words like a shell would: {e}")
    if not argv:
        raise HarnessError("--worker-cmd is empty")
    if shutil.which(argv[0]) is None:
        raise HarnessError(f"--worker-cmd: {argv[0]!r} is not an executable file or a command on PATH "
                           f"(the command runs without a shell)")


# The environment contract: name -> what it holds. Other tools script against these names.
ENV = {
    "HARNESS_BOOTSTRAP_SERVERS": "Kafka bootstrap servers",
    "HARNESS_KAFKA_CONFIG": "the Kafka client settings the cluster needs (security.protocol, sasl.*, ssl.*) as a JSON "
                            "object in librdkafka's names; {} for a plaintext cluster (environment only: secrets)",
    "HARNESS_KAFKA_JAVA_CONFIG": "the same in the Java client's names, as java.util.Properties text (empty when "
                                 "there are none, or when one has no Java equivalent)",
    "HARNESS_INPUT_TOPIC": "the run's input topic: key = payment id, value = JSON with id and amount",
    "HARNESS_GROUP_ID": "the consumer group whose committed offsets mark progress (and the end of the run)",
    "HARNESS_PARTITIONS": "comma-separated input partitions of this worker slot (for consumers that assign)",
    "HARNESS_WORKER": "the worker slot, w0, w1, ...",
    "HARNESS_ATTEMPT": "1 for the first start of the slot, +1 for each restart",
    "HARNESS_CLIENT_ID": "a client.id naming the run, slot and attempt: give it to your Kafka client so that the "
                         "harness can tell which group member is which process",
    "HARNESS_POSTGRES_DSN": "a libpq URI postgresql://user:password@host:port/dbname?require_auth=scram-sha-256 "
                            "(environment only)",
    "HARNESS_POSTGRES_DSN_NO_REQUIRE_AUTH": "the same URI without ?require_auth, for drivers that are not libpq "
                                            "(Go's pgx sends an unknown parameter to the server, which refuses it)",
    "HARNESS_LEDGER_TABLE": "schema-qualified ledger table: write one (message_id text, amount bigint) row per effect",
    "HARNESS_OUTPUT_TOPIC": "an output topic, created, for consumers that produce (key = id, value as the input)",
    "HARNESS_RUN_PREFIX": "the names the run's Kafka user may make: a transactional.id, and topics of its own, must "
                          "start with it on the harness's SCRAM stacks (harness-<run id>-)",
}


def kafka_settings_env(settings: dict) -> dict:
    """HARNESS_KAFKA_CONFIG and HARNESS_KAFKA_JAVA_CONFIG: the run's Kafka login (its own user's on the
    harness's SCRAM stack, else the stack's settings), in librdkafka's and in Java's names."""
    from ...clients import kafka_java
    try:
        java = kafka_java.properties_text(kafka_java.java_properties(settings, "a Java consumer"))
    except HarnessError:
        java = ""
    return {"HARNESS_KAFKA_CONFIG": json.dumps(settings), "HARNESS_KAFKA_JAVA_CONFIG": java}


def libpq_uri(dsn: str, require_scram: bool = True) -> str:
    """Any libpq DSN as a postgresql:// URI, one format for every language's client to parse; with
    `require_scram`, ending in `?require_auth=scram-sha-256` (libpq 16+ then sends no password to a
    server that does not run SCRAM; JDBC ignores the parameter, Go's pgx sends it to the server as a
    setting, which refuses it: such clients read the bare URI)."""
    import psycopg.conninfo
    d = psycopg.conninfo.conninfo_to_dict(dsn)
    auth = quote(d.get("user", ""), safe="")
    if d.get("password"):
        auth += ":" + quote(d["password"], safe="")
    host = d.get("host", "127.0.0.1")
    return (f"postgresql://{auth}@{host}:{d.get('port', 5432)}/{quote(d.get('dbname', 'postgres'), safe='')}"
            + (f"?require_auth={REQUIRED_AUTH}" if require_scram else ""))


# -- the audit by the user's own query -----------------------------------------------------------------
def audit_sql_reader(query: str, dsn: str, timeout_ms: int = AUDIT_SQL_TIMEOUT_MS):
    """A ledger reader (checker/ledger.py) that runs the user's --audit-sql at `dsn` (the stack's read-only
    role when it has one: see checker/user_sql.py), read-only, with a statement timeout. It must return
    (message_id, amount) rows; anything else is one error."""
    from ...checker.ledger import LedgerRows, _first_line

    def read(_dsn: str, ledger: str, dedupe: str | None) -> LedgerRows:
        try:
            columns, rows = user_sql.select(dsn, query, timeout_ms)
        except Exception as e:  # noqa: BLE001 - an audit error, never a traceback
            return LedgerRows(None, None, error=f"--audit-sql failed: {_first_line(e)}")
        if columns != 2:
            return LedgerRows(None, None, error=f"--audit-sql must return two columns (message_id, "
                                                f"amount), it returned {columns}")
        out = []
        for mid, amount in rows:
            try:
                whole = int(amount)
                if whole != amount:
                    raise ValueError
            except (TypeError, ValueError):
                return LedgerRows(None, None, error=f"--audit-sql must return (message_id, amount) rows with a whole "
                                                    f"amount; got amount {amount!r} for message_id {mid!r}")
            out.append((None if mid is None else str(mid), whole))
        return LedgerRows(out, None)
    return read


# -- the launcher ------------------------------------------------------------------------------------
@dataclass
class CustomWorkers:
    """The user's --worker-cmd, run without a shell, one process per slot, restarted after each death."""
    sees_gaps = True        # GroupWatch sets each slot's in_gap, for random-kill:aim=gap
    _readers: dict = field(default_factory=dict, repr=False)   # run id -> its committed-offset consumer
    _watches: dict = field(default_factory=dict, repr=False)   # run id -> its GroupWatch

    def prepare(self, run) -> Launch:
        p, names = run.params, run.names
        # It dies with the harness, even a SIGKILLed one (procs.dying_with).
        argv = dying_with_this_process(shlex.split(p.worker_cmd))
        slots = assign_partitions(p.partitions, p.workers)
        ends = ends_of(run.positions)
        base = {**worker_env(run),
                "HARNESS_BOOTSTRAP_SERVERS": run.stack.bootstrap_servers,
                **kafka_settings_env(kafka_login(run)),
                "HARNESS_INPUT_TOPIC": names.input_topic,
                "HARNESS_GROUP_ID": names.group,
                "HARNESS_POSTGRES_DSN": libpq_uri(run.worker_dsn),
                "HARNESS_POSTGRES_DSN_NO_REQUIRE_AUTH": libpq_uri(run.worker_dsn, require_scram=False),
                "HARNESS_LEDGER_TABLE": names.ledger_table,
                "HARNESS_OUTPUT_TOPIC": names.output_topic,
                "HARNESS_RUN_PREFIX": names.own_prefix}

        def env(slot) -> dict:
            return {**base, "HARNESS_PARTITIONS": ",".join(map(str, slots[slot.index])),
                    "HARNESS_WORKER": slot.name, "HARNESS_ATTEMPT": str(slot.attempt),
                    "HARNESS_CLIENT_ID": group_timeline.client_id(names.run_id, slot.name, slot.attempt)}

        def at_end(committed: dict | None, partitions) -> bool:
            return committed is not None and all(committed.get(q, 0) >= ends.get(q, 0) for q in partitions)

        def group_done() -> bool:
            return at_end(run.progress.committed, range(p.partitions))

        def may_exit(slot) -> bool:
            # An exit 0 ends the slot's work only when its partitions are consumed (read now, not the last sample).
            return at_end(self._committed(run), slots[slot.index])

        group = self._watches[names.run_id] = GroupWatch(run, slots, ends)

        def watch(sup) -> None:
            group.observe(sup)

        def bad_input(result) -> str | None:
            if not result.gave_up_on or run.progress.first_commit_at is not None:
                return None
            deaths = [d for d in result.unplanned_deaths if d["worker"] == result.gave_up_on]
            last = deaths[-1]["exit_code"] if deaths else "unknown"
            early = " before its partitions were consumed" if last == 0 else ""
            return (f"--worker-cmd failed {len(deaths)} times (last exit {last}{early}) and never committed "
                    f"an offset of its input; see {run.run_dir / 'workers' / (result.gave_up_on + '.log')}")

        reader = audit_sql_reader(p.audit_sql, user_sql.dsn_for(run.stack)) if p.audit_sql else None
        return Launch(lambda slot: list(argv), env, slots, group_done=group_done, reports_deliveries=False,
                      standby=False, watch=watch, may_exit=may_exit,
                      ledger_reader=reader, annotate=annotate, bad_input=bad_input,
                      planned_exits=(-signal.SIGKILL,), own_process_group=True)

    def _committed(self, run) -> dict | None:
        """The group's committed offsets right now (the supervisor's thread only)."""
        from confluent_kafka import Consumer, TopicPartition
        from ...clients import kafka_client, kafka_logging
        reader = self._readers.get(run.names.run_id)
        if reader is None:
            reader = self._readers[run.names.run_id] = Consumer(kafka_client.config(run.stack.bootstrap_servers, {
                "group.id": run.names.group, "enable.auto.commit": False, **kafka_logging.client_config()}))
        try:
            got = reader.committed(
                [TopicPartition(run.names.input_topic, q) for q in range(run.params.partitions)], timeout=10)
        except Exception:  # noqa: BLE001 - unknown: the exit is not the end of the work
            return None
        if any(tp.error for tp in got):
            return None
        return {tp.partition: max(0, tp.offset) for tp in got}

    def finish(self, run, result) -> None:
        reader = self._readers.pop(run.names.run_id, None)
        if reader is not None:
            reader.close()
        group = self._watches.pop(run.names.run_id, None)
        if group is not None:
            group.close()


def ledger_rows_since(dsn: str, ledger: str, positions: dict):
    """A reader of the ledger rows inserted since a row id: [(row id, input partition, insert time)], for the
    group sampler's thread (its own connection, a statement timeout). A row committed after a later one
    was read is missed here (the report reads the whole ledger)."""
    from psycopg import sql
    from ...workload.sqlnames import table_identifier
    state: dict = {}
    query = sql.SQL("select id, message_id, extract(epoch from applied_at)::float8 from {} where id > %s "
                    "order by id limit %s").format(table_identifier(ledger))

    def read(after: int, limit: int):
        conn = state.get("conn")
        if conn is None or conn.closed:
            conn = state["conn"] = pgconn.connect(dsn, autocommit=True, connect_timeout=5,
                                                   options="-c statement_timeout=3000")
        rows = conn.execute(query, (after, limit)).fetchall()
        return [(i, (positions.get(mid) or (None, None))[0], t) for i, mid, t in rows]

    def close() -> None:
        if state.get("conn") is not None:
            state["conn"].close()
    read.close = close
    return read


class GapClock:
    """Per partition, when its committed offset last moved and when the ledger last grew on it, sample by
    sample: a worker is in its gap (an effect applied, its offset not yet committed: where random-kill's
    aim=gap strikes) when the ledger grew on a partition it owns, since it started, after that partition's
    commit last moved."""

    def __init__(self):
        self.moved: dict = {}           # partition -> time its committed offset was last seen to change
        self.at: dict = {}              # partition -> the committed offset seen then
        self.grew: dict = {}            # partition -> the latest insert time on it

    def add(self, sample: dict) -> None:
        for q, off in (sample.get("committed") or {}).items():
            if self.at.get(q) != off:
                self.at[q], self.moved[q] = off, sample["t"]
        self.grew.update(sample.get("effects") or {})

    def in_gap(self, partitions, started_at: float) -> bool:
        return any(self.grew.get(q, 0.0) > max(self.moved.get(q, 0.0), started_at) for q in partitions)


class GroupWatch:
    """The run's group, watched from the supervisor's loop: the `started` and `first_message` events a
    harness worker would write itself, the first when an attempt starts, the second when the group's
    timeline first shows it owning partitions and working (checker/group_timeline.Work), and each slot's
    `has_work` (a random kill spares a worker whose partitions are all committed to their end). Its work
    per new sample is bounded (incremental: the mode, the ties, each attempt's Work). An error here must not
    end the run: it is kept (`failed`), the report says so, and no further worker is taken as busy."""

    def __init__(self, run, slots: list, ends: dict):
        self.run, self.slots, self.ends, self.path = run, slots, ends, run.run_dir / GROUP_TIMELINE
        self.ties = group_timeline.MemberTies(run.names.run_id)
        self.mode = group_timeline.Mode()
        self.work: dict = {}                         # slot index -> Work of its running attempt
        self.sampler = self.ledger = None
        self.announced: dict = {}
        self.poked: dict = {}
        self.seen = 0
        self.failed: str | None = None
        self.commits = GapClock()

    def _start(self) -> None:
        """The sampler starts with the supervisor's loop (not when the launch is prepared)."""
        from ...clients import kafka_client, kafka_logging
        from ...runtime.group_sampler import GroupSampler
        run, p, names = self.run, self.run.params, self.run.names
        self.ledger = None if p.audit_sql else ledger_rows_since(run.stack.postgres_dsn, names.ledger_table,
                                                                 run.positions)
        self.sampler = GroupSampler(kafka_client.config(run.stack.bootstrap_servers, kafka_logging.client_config()),
                                    names.group, names.input_topic, p.partitions, self.path, self.ledger).start()

    def observe(self, sup) -> None:
        if self.failed:
            return
        try:
            self._observe(sup)
        except Exception as e:  # noqa: BLE001 - the run goes on; its report says the timeline stopped
            self.failed = f"{type(e).__name__}: {str(e)[:200]}"
            self.run.log(f"the group's timeline stopped ({self.failed}): no further worker is taken as busy")

    def _observe(self, sup) -> None:
        import time
        from ...runtime.group_sampler import append
        for s in sup.slots:
            if s.proc is not None and self.announced.get(s.index) != s.attempt:
                self.announced[s.index] = s.attempt
                self.work[s.index] = group_timeline.Work(s.name, s.attempt, s.started_at, self.slots[s.index])
                sup.result.events.append({"event": "started", "worker": s.name, "attempt": s.attempt,
                                          "pid": s.proc.pid, "t": s.started_at or time.time()})
        if self.sampler is None:
            self._start()
        for s in sup.slots:
            if s.proc is not None and s.proc.poll() is not None and self.poked.get(s.index) != s.attempt:
                self.poked[s.index] = s.attempt
                self.sampler.poke()
        new = self.sampler.snapshot(self.seen)
        if not new:
            return
        alive = [(s.name, s.attempt, s.started_at) for s in sup.slots if s.proc is not None and s.proc.poll() is None]
        for sample in new:
            for tie in self.ties.update(sample, alive):
                append(self.path, tie)
            in_group = self.mode.add(sample)
            for s in sup.slots:
                work = self.work.get(s.index)
                if s.proc is None or work is None or s.first_message_at is not None:
                    continue
                if work.add(sample, self.ties, in_group) is not None:
                    s.first_message_at = work.at
                    sup.result.events.append({"event": "first_message", "worker": s.name, "attempt": s.attempt,
                                              "t": work.at})
            self.commits.add(sample)
        self.seen += len(new)
        last = new[-1]
        for s in sup.slots:
            if s.proc is None:
                continue
            mine = group_timeline.owned(last, self.ties, s.name, s.attempt, self.slots[s.index], self.mode.value)
            committed = last.get("committed")
            # all it owns is committed to the end: a kill now could damage nothing (it is spared)
            s.has_work = not (committed is not None and mine and all(
                (committed.get(q) or 0) >= self.ends.get(q, 0) for q in mine))
            s.in_gap = self.commits.in_gap(mine or (), s.started_at or 0.0)

    def close(self) -> None:
        from ...runtime.group_sampler import append
        if self.sampler is not None:
            self.sampler.close()
        if self.ledger is not None:
            self.ledger.close()
        if self.failed:
            try:
                append(self.path, {"failed": self.failed})
            except OSError:
                pass


# -- what the report adds: the kills, their quality, the witnesses --------------------------------------
