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
import statistics
from dataclasses import dataclass, field
from urllib.parse import quote

from ..checker import user_sql
from ..checker.predictors import CLAIMS, ClaimPredictor
from ..procs import dying_with_this_process
from .launch import Launch, assign_partitions
from .model import Experiment, Stores

DEFAULT_CLAIM = "exactly-once"
AUDIT_SQL_TIMEOUT_MS = user_sql.TIMEOUT_MS
FEW_KILLS = 5                 # fewer kills than this say little about a consumer
MAX_WITNESSES = 20
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
def kill_quality(kills: list[dict], first_commit_at: float | None, requested: int | None) -> list[str]:
    """Warnings when the kills cannot say much about the consumer."""
    out = []
    if len(kills) < FEW_KILLS:
        out.append(f"only {len(kills)} kill(s) landed{'' if requested is None else f' of {requested} asked'}: "
                   f"too few to mean much (give more --messages so the kills have time to land, or more --kills)")
    if kills and (first_commit_at is None or all(k["time"] < first_commit_at for k in kills)):
        out.append("every kill struck before the group's first committed offset: they tested start-up, "
                   "not processing")
    return out


def slot_of(partition: int | None, slots: list[list[int]]) -> str | None:
    for i, parts in enumerate(slots):
        if partition in parts:
            return f"w{i}"
    return None


def attempt_at(starts: list[dict], worker: str | None, t: float) -> int | None:
    """The attempt of `worker` that was running at time t (the last one started before t)."""
    runs = [s for s in starts if s["worker"] == worker and s["t"] <= t]
    return max(runs, key=lambda s: s["t"])["attempt"] if runs else None


def _explaining(times: list, worker: str | None, kills: list[dict]) -> list[dict]:
    """The kills that can explain a duplicate: those between its first and last effect, its slot's first."""
    if len(times) < 2:
        return []
    between = [k for k in kills if times[0] <= k["time"] <= times[-1]]
    return [k for k in between if k.get("worker") == worker] or between


def witnesses(dup_times: dict, lost_ids: list, kills: list[dict], starts: list[dict],
              positions: dict, slots: list, t0: float) -> tuple[list[dict], dict]:
    """Per violating id: its partition and slot, each effect's time and the attempt running then, and the
    kills that explain it (for a duplicate: the kills between its first and last effect). Witnesses are
    taken in turn from each explaining kill, so every kill that caused a duplicate is shown; also
    returned: how many duplicated ids each kill explains (by its index in `kills`)."""
    def rel(t):
        return None if t is None else round(t - t0, 3)

    def kill_row(k):
        return {"worker": k.get("worker"), "attempt": k.get("attempt"), "pid": k.get("pid"), "t": rel(k["time"])}

    def row(i, kind, near, times=()):
        part = (positions.get(i) or (None, None))[0]
        worker = slot_of(part, slots)
        return {"id": i, "kind": kind, "partition": part, "worker": worker,
                "effects": [{"t": rel(t), "attempt": attempt_at(starts, worker, t)} for t in times],
                "kills": [kill_row(k) for k in near]}

    by_kill: dict = {}                    # index of the first explaining kill -> ids, in id order
    explained: dict = {}
    for i in sorted(dup_times):
        times = sorted(dup_times[i])
        worker = slot_of((positions.get(i) or (None, None))[0], slots)
        near = _explaining(times, worker, kills)
        key = kills.index(near[0]) if near else None
        if not times:                      # effects counted by --audit-sql: no insert times to place them
            near = ([k for k in kills if k.get("worker") == worker] or kills)[:5]
        by_kill.setdefault(key, []).append((i, times, near))
        if key is not None:
            explained[key] = explained.get(key, 0) + 1
    out: list = []
    room = MAX_WITNESSES - min(len(lost_ids), MAX_WITNESSES // 2)     # lost ids get their share of the rows
    queues = [by_kill[k] for k in sorted(by_kill, key=lambda k: (k is None, k or 0))]
    while queues and len(out) < room:
        for q in list(queues):
            if len(out) >= room:
                break
            i, times, near = q.pop(0)
            out.append(row(i, "duplicated", near, times))
            if not q:
                queues.remove(q)
    for i in lost_ids:
        if len(out) >= MAX_WITNESSES:
            break
        worker = slot_of((positions.get(i) or (None, None))[0], slots)
        out.append(row(i, "lost", ([k for k in kills if k.get("worker") == worker] or kills)[:5]))
    return out, explained


def _duplicate_times(dsn: str, ledger: str) -> dict | None:
    """id -> the insert times (epoch seconds) of its ledger rows, for every id with more than one; None
    when unreadable."""
    import psycopg
    from psycopg import sql
    from ..workload.sqlnames import table_identifier
    try:
        with psycopg.connect(dsn, connect_timeout=10) as conn:
            rows = conn.execute(sql.SQL(
                "select message_id, array_agg(extract(epoch from applied_at)::float8 order by id) from {} "
                "group by message_id having count(*) > 1").format(table_identifier(ledger))).fetchall()
    except Exception:  # noqa: BLE001 - witnesses are best effort; the verdict does not depend on them
        return None
    return {mid: [float(t) for t in ts] for mid, ts in rows}


def annotate(run, result, report) -> None:
    """The report's `consumer` section, and its words in the summary."""
    from ..faults import crashlog
    from ..stack.model import redact
    d, p = report.data, run.params
    for key in ("worker_cmd", "audit_sql"):       # the user's own text: no password of theirs in a report
        d["params"][key] = redact(d["params"].get(key))
    claim = p.expect or DEFAULT_CLAIM
    kills = [c for c in crashlog.read(run.crash_log) if c.get("by") == "supervisor" and c.get("time")]
    starts = [e for e in result.events if e.get("event") == "started"]
    slots = assign_partitions(p.partitions, p.workers)
    vd = d["verdict_detail"]
    broken = d["verdict"] == "unexpected"
    dup = vd["differing_ids"].get("duplicates", []) if broken else []
    lost = vd["differing_ids"].get("lost", []) if broken else []
    # With the ledger, every duplicated id with the times of its effects; with --audit-sql, the named ids.
    dup_times = (_duplicate_times(run.stack.postgres_dsn, run.names.ledger_table) if broken and dup
                 and not p.audit_sql else None)
    if dup_times is None:
        dup_times = {i: [] for i in dup}
    t0 = run.progress.t0
    random_asked = next((f.get("kills") for f in d["faults_configured"] if f.get("fault") == "random-kill"), None)
    warnings = kill_quality(kills, run.progress.first_commit_at, random_asked)
    seen, explained = witnesses(dup_times, lost, kills, starts, run.positions, slots, t0)
    rs = d["timings"].get("restart_seconds") or []
    d["consumer"] = {
        "command": redact(p.worker_cmd),
        "claim": claim,
        "claim_held": None if d["verdict"] not in ("as-predicted", "unexpected") else d["verdict"] == "as-predicted",
        "audit": "audit-sql" if p.audit_sql else "ledger",
        "kills_landed": len(kills),
        "kills": [{"worker": k.get("worker"), "attempt": k.get("attempt"), "pid": k.get("pid"),
                   "t": round(k["time"] - t0, 3), "by": k.get("point"),
                   "duplicates_explained": explained.get(n, 0) if dup_times and any(dup_times.values()) else None}
                  for n, k in enumerate(kills)],
        "first_commit_seconds": None if run.progress.first_commit_at is None
        else round(run.progress.first_commit_at - t0, 3),
        "restart_median_seconds": round(statistics.median(rs), 3) if rs else None,
        "restart_max_seconds": max(rs) if rs else None,
        "starts": [{"worker": s["worker"], "attempt": s["attempt"], "pid": s.get("pid"), "t": round(s["t"] - t0, 3)}
                   for s in starts],
        "warnings": warnings,
        "witnesses": seen,
    }
    c = d["consumer"]
    # A claim is tested, not predicted from crash records: say so in the sentence's verdict words.
    for said, meant in (("exactly as predicted from the crash log", "as claimed"), ("exactly as predicted", "as claimed"),
                        ("NOT as predicted", "NOT as claimed")):
        if said in d["summary"]:
            d["summary"] = d["summary"].replace(said, meant, 1)
            break
    text = f" Claim {claim}: " + {True: "held", False: "BROKEN", None: "not judged"}[c["claim_held"]]
    text += f"; {len(kills)} kill(s) landed"
    if rs:
        text += f", restarts took {c['restart_median_seconds']:.2f} s (median) to commit again"
    text += "."
    if explained:
        text += f" {len(explained)} of {len(kills)} kill(s) left duplicated effects behind."
    w = c["witnesses"][0] if c["witnesses"] else None
    if w:
        eff = ", ".join(f"+{e['t']:.3f} s (attempt {e['attempt']})" for e in w["effects"] if e["t"] is not None)
        ks = ", ".join(f"{k['worker']} attempt {k['attempt']} at +{k['t']:.3f} s" for k in w["kills"][:3])
        text += (f" Witness: {w['id']} {w['kind']}" + (f", applied at {eff}" if eff else "")
                 + (f"; kill(s): {ks}" if ks else "") + ".")
    text += "".join(f" Warning: {x}." for x in warnings)
    d["summary"] += text


CUSTOM = Experiment(
    name="custom",
    steps=("your consumer: poll, effect and offset commit in its own order",),
    kill_points=(),
    default_point=None,
    stores=Stores(ledger=True, output_if_written=True),
    proves="Your consumer (--worker-cmd) keeps its claim (--expect, default exactly-once) under seeded SIGKILLs.",
    expected="no lost and/or no duplicated effect per id, as --expect claims; a violation names the ids and kills",
    predictors=(ClaimPredictor(DEFAULT_CLAIM),),
    launcher=CustomWorkers(),
    default_faults=("random-kill",),
    options=("worker_cmd", "expect", "audit_sql"),
    variants={f"expect={c}": {"predictors": (ClaimPredictor(c),)} for c in CLAIMS},
    suite={"include": False},
)

