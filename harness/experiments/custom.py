"""custom: crash-test a consumer the harness did not write (`harness run custom --worker-cmd CMD`).

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

Progress of a foreign worker is seen from outside: a slot counts as busy once
the group's committed offsets of its partitions (HARNESS_PARTITIONS) grow after
its attempt started; random kills strike only busy workers, and the restart
time is the kill to the next such growth.
"""

from __future__ import annotations

import os
import shlex
import signal
from dataclasses import dataclass, field
from urllib.parse import quote

from ..checker import user_sql
from ..checker.predictors import CLAIMS, ClaimPredictor
from ..procs import dying_with_this_process
from ..errors import HarnessError
from ..options import Option
from .custom_report import DEFAULT_CLAIM, annotate
from .launch import Launch, assign_partitions
from .declaration import Experiment, Stores

AUDIT_SQL_TIMEOUT_MS = user_sql.TIMEOUT_MS
WORKER_CMD = Option("worker_cmd", str, "custom only: your consumer, started once per worker slot (split like a shell "
                    "would, run without one) with the run's names in HARNESS_* environment variables (README: "
                    "\"Test your own consumer\").", metavar="CMD",
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
    "HARNESS_INPUT_TOPIC": "the run's input topic: key = payment id, value = JSON with id and amount",
    "HARNESS_GROUP_ID": "the consumer group whose committed offsets mark progress (and the end of the run)",
    "HARNESS_PARTITIONS": "comma-separated input partitions of this worker slot (for consumers that assign)",
    "HARNESS_WORKER": "the worker slot, w0, w1, ...",
    "HARNESS_ATTEMPT": "1 for the first start of the slot, +1 for each restart",
    "HARNESS_POSTGRES_DSN": "a libpq URI postgresql://user:password@host:port/dbname (environment only)",
    "HARNESS_LEDGER_TABLE": "schema-qualified ledger table: write one (message_id text, amount bigint) row per effect",
    "HARNESS_OUTPUT_TOPIC": "an output topic, created, for consumers that produce (key = id, value as the input)",
}


def libpq_uri(dsn: str) -> str:
    """Any libpq DSN as a postgresql:// URI, one format for every language's client to parse."""
    import psycopg.conninfo
    d = psycopg.conninfo.conninfo_to_dict(dsn)
    auth = quote(d.get("user", ""), safe="")
    if d.get("password"):
        auth += ":" + quote(d["password"], safe="")
    host = d.get("host", "127.0.0.1")
    return f"postgresql://{auth}@{host}:{d.get('port', 5432)}/{quote(d.get('dbname', 'postgres'), safe='')}"


# -- the audit by the user's own query -----------------------------------------------------------------
def audit_sql_reader(query: str, dsn: str, timeout_ms: int = AUDIT_SQL_TIMEOUT_MS):
    """A ledger reader (checker/ledger.py) that runs the user's --audit-sql at `dsn` (the stack's read-only
    role when it has one: see checker/user_sql.py), read-only, with a statement timeout. It must return
    (message_id, amount) rows; anything else is one error."""
    from ..checker.ledger import LedgerRows, _first_line

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
    _readers: dict = field(default_factory=dict, repr=False)   # run id -> its committed-offset consumer

    def prepare(self, run) -> Launch:
        p, names = run.params, run.names
        # It dies with the harness, even a SIGKILLed one (procs.EXEC_DYING_WITH_PARENT).
        argv = dying_with_this_process(shlex.split(p.worker_cmd))
        slots = assign_partitions(p.partitions, p.workers)
        ends = _ends(run.positions)
        base = {**os.environ,
                "HARNESS_BOOTSTRAP_SERVERS": run.stack.bootstrap_servers,
                "HARNESS_INPUT_TOPIC": names.input_topic,
                "HARNESS_GROUP_ID": names.group,
                "HARNESS_POSTGRES_DSN": libpq_uri(run.stack.postgres_dsn),
                "HARNESS_LEDGER_TABLE": names.ledger_table,
                "HARNESS_OUTPUT_TOPIC": names.output_topic}

        def env(slot) -> dict:
            return {**base, "HARNESS_PARTITIONS": ",".join(map(str, slots[slot.index])),
                    "HARNESS_WORKER": slot.name, "HARNESS_ATTEMPT": str(slot.attempt)}

        def at_end(committed: dict | None, partitions) -> bool:
            return committed is not None and all(committed.get(q, 0) >= ends.get(q, 0) for q in partitions)

        def group_done() -> bool:
            return at_end(run.progress.committed, range(p.partitions))

        def may_exit(slot) -> bool:
            # An exit 0 ends the slot's work only when its partitions are consumed (read now, not the last sample).
            return at_end(self._committed(run), slots[slot.index])

        announced: dict = {}

        def watch(sup) -> None:
            _observe(sup, run, slots, announced)

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
        from .. import kafka_client, kafka_logging
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


def _ends(positions: dict) -> dict:
    """partition -> its end offset, from the broker's acknowledgements of the produced payments."""
    ends: dict = {}
    for part, off in positions.values():
        ends[part] = max(ends.get(part, 0), off + 1)
    return ends


def _observe(sup, run, slots, announced: dict) -> None:
    """Write the events a harness worker would write itself: `started` per attempt, and `first_message`
    when the committed offsets of the slot's partitions grow after the attempt started."""
    import time
    adv = run.progress.advanced_at if run.progress else {}
    for s in sup.slots:
        if s.proc is None:
            continue
        if announced.get(s.index) != s.attempt:
            announced[s.index] = s.attempt
            sup.result.events.append({"event": "started", "worker": s.name, "attempt": s.attempt,
                                      "pid": s.proc.pid, "t": s.started_at or time.time()})
        if s.first_message_at is None:
            grew = [adv[q] for q in slots[s.index] if q in adv and adv[q] > s.started_at]
            if grew:
                s.first_message_at = min(grew)
                sup.result.events.append({"event": "first_message", "worker": s.name, "attempt": s.attempt,
                                          "t": s.first_message_at})


# -- what the report adds: the kills, their quality, the witnesses --------------------------------------
CUSTOM = Experiment(
    name="custom",
    steps=("your consumer: poll, effect and offset commit in its own order",),
    kill_points=(),
    default_point=None,
    stores=Stores(ledger=True, output_if_written=True),
    # a consumer we did not write may be stopped mid-transaction at the end: say so, do not fail it for that
    allows=frozenset({"hanging-transaction"}),
    proves="Your consumer (--worker-cmd) keeps its claim (--expect, default exactly-once) under seeded SIGKILLs.",
    expected="no lost and/or no duplicated effect per id, as --expect claims; a violation names the ids and kills",
    predictors=(ClaimPredictor(DEFAULT_CLAIM),),
    launcher=CustomWorkers(),
    default_faults=("random-kill",),
    options=(WORKER_CMD, EXPECT, AUDIT_SQL),
    rules=(consumer_rule,),
    refuses={"commit_every": "your consumer commits its offsets as it likes (it applies to the harness's own workers)",
             "crash_rate": "its kills are random: --kills, --kill-every (it applies to the harness's own workers)"},
    variants={f"expect={c}": {"predictors": (ClaimPredictor(c),)} for c in CLAIMS},
    suite={"include": False},
)

