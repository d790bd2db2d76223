"""Run one experiment end to end: workload -> workers -> audit -> report.

The flow is one way, as in Jepsen: create this run's topics and tables,
produce the seeded payments, save the crash plan, let the supervisor run and
restart the workers until the input is consumed and committed, then audit
Postgres and Kafka, predict from the crash log, judge, and write the report.
Whatever happens (time limit, Ctrl-C), the workers are gone and a report is
written before this returns.
"""

import dataclasses
import os
import shutil
import statistics
import sys
import time
from dataclasses import asdict
from pathlib import Path

from . import experiments
from .checker import kafka_output, ledger as ledger_audit
from .checker.predict import predict, judge
from .environment import describe
from .errors import HarnessError
from .faults import crashlog
from .faults.crashplan import CrashPlan, random_kill_delays
from .faults.supervisor import Supervisor, restart_seconds
from .faults.zombie import ZombieNemesis
from .checker.output_watcher import OutputWatcher
from .paths import reports_dir
from .report.model import RunReport, SCHEMA_VERSION, write_all
from .rundir import claim_run_dir
from .stack.model import Stack, redact
from .workload import tables
from .workload.naming import RunNames, new_run_id
from .workload.payments import make_payments, create_topic, produce
from .params import RunParams, FRESH_ID_TRANSACTION_TIMEOUT_MS, TXN_ABORT_MARGIN_S  # noqa: F401

class Progress:
    """Samples the run group's committed offsets in a thread: drives the progress bar and the timeline.

    The sampling runs beside the supervisor, never inside its loop: a committed-offset fetch waits
    for pending transactional offsets (KIP-447), so it can block for as long as a dead
    transaction stays open, and the supervisor must keep reacting meanwhile.
    """

    SAMPLE_EVERY_S = 0.5

    def __init__(self, stack: Stack, names: RunNames, partitions: int, total: int, ui=None):
        import threading
        from confluent_kafka import Consumer, TopicPartition
        self.c = Consumer({"bootstrap.servers": stack.bootstrap_servers, "group.id": names.group,
                           "enable.auto.commit": False, "log_level": 3})
        self.tps = [TopicPartition(names.input_topic, p) for p in range(partitions)]
        self.total, self.ui, self.samples, self.t0 = total, ui, [], time.time()
        self.done = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, name="progress", daemon=True)
        self._thread.start()

    def _take_sample(self) -> None:
        try:
            self.done = sum(max(0, tp.offset) for tp in self.c.committed(self.tps, timeout=5))
        except Exception:  # noqa: BLE001 - progress is best effort
            return
        self.samples.append([round(time.time() - self.t0, 3), self.done])

    def _sample(self) -> None:
        while not self._stop.wait(self.SAMPLE_EVERY_S):
            self._take_sample()

    def __call__(self, info: dict) -> None:
        if self.ui:
            self.ui(self.done, self.total, info.get("crashes", 0), info.get("restarts", 0))

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=10)
        self._take_sample()
        self.c.close()


def assign_partitions(partitions: int, workers: int) -> list[list[int]]:
    """Partition p goes to worker slot p % workers; slots without a partition are not started."""
    slots = [[p for p in range(partitions) if p % workers == w] for w in range(workers)]
    return [s for s in slots if s]


def run(params: RunParams, stack: Stack, out: Path | None = None, log=print, ui=None,
        run_id: str | None = None) -> tuple[RunReport, Path]:
    params.validate()
    exp = experiments.CATALOG[params.experiment]
    if params.effect == "postgres":
        exp = dataclasses.replace(exp, mode="eos-streams-pg", uses_ledger=True)
    if exp.name == "zombie":
        params.crash_rate = 0.0           # the zombie nemesis is the only fault
    if params.fresh_transactional_id and not params.transaction_timeout_ms:
        params.transaction_timeout_ms = FRESH_ID_TRANSACTION_TIMEOUT_MS
    run_id = run_id or new_run_id(exp.name)
    names = RunNames(run_id)
    run_dir = claim_run_dir(Path(out) if out else reports_dir() / run_id)
    crash_log, events = run_dir / "crash-log.jsonl", run_dir / "events.jsonl"

    payments = make_payments(params.messages, params.amount, params.payload_bytes)
    sent_ids = [p.id for p in payments]
    plan = CrashPlan.make(sent_ids, params.crash_rate if params.kill_mode == "points" else 0.0, params.seed)
    plan.save(run_dir / "crash-plan.json")

    log(f"[{run_id}] creating topic {names.input_topic} ({params.partitions} partitions) and tables")
    create_topic(stack.bootstrap_servers, names.input_topic, params.partitions)
    if exp.uses_output:
        create_topic(stack.bootstrap_servers, names.output_topic, params.partitions)
    tables.create(stack.postgres_dsn, names.ledger_table, names.dedupe_table if exp.uses_dedupe else None)
    t_prod = time.time()
    produce(stack.bootstrap_servers, names.input_topic, payments)
    log(f"[{run_id}] produced {len(payments)} payments in {time.time() - t_prod:.1f} s; "
        f"{len(plan.crash_ids)} planned crashes (seed {params.seed})" if params.kill_mode == "points" else
        f"[{run_id}] produced {len(payments)} payments; {params.kills} random SIGKILLs (seed {params.seed})")

    slots = assign_partitions(params.partitions, params.workers)
    kill_point = params.kill_point or exp.kill_point

    def command(slot) -> list[str]:
        cmd = [sys.executable, "-m", "harness.processors.worker", "--mode", exp.mode,
               "--worker", slot.name, "--attempt", str(slot.attempt), "--bootstrap", stack.bootstrap_servers,
               "--group", names.group, "--input-topic", names.input_topic,
               "--partitions", ",".join(map(str, slots[slot.index])), "--ledger", names.ledger_table,
               "--commit-every", str(params.commit_every), "--crash-log", str(crash_log),
               "--events", str(events), "--crash-plan", str(run_dir / "crash-plan.json"),
               "--kill-point", kill_point]
        if exp.uses_dedupe:
            cmd += ["--dedupe", names.dedupe_table]
        if exp.uses_output:
            tid = names.transactional_id(slot.index)
            if params.fresh_transactional_id:
                tid += f"-attempt-{slot.attempt}"
            cmd += ["--output-topic", names.output_topic, "--transactional-id", tid]
        if params.transaction_timeout_ms:
            cmd += ["--transaction-timeout-ms", str(params.transaction_timeout_ms)]
        if params.commit_interval_ms:
            cmd += ["--commit-interval-ms", str(params.commit_interval_ms)]
        return cmd

    env = {**os.environ, "HARNESS_WORKER_DSN": stack.postgres_dsn}
    group_done = None
    progress = Progress(stack, names, params.partitions, params.messages, ui)
    if exp.name == "eos-streams":
        command, env, slots = _streams_command(params, exp, names, stack, run_dir, crash_log, log)
        group_done = lambda: progress.done >= params.messages  # noqa: E731 - Streams runs until told to stop
    nemesis = ZombieNemesis(params.zombie_pause) if exp.name == "zombie" else None
    watcher = OutputWatcher(stack.bootstrap_servers, names.output_topic) if exp.uses_output else None
    sup = Supervisor(run_dir, len(slots), command, env, params.time_limit, crash_log, events,
                     random_kill_delays=random_kill_delays(params.seed, params.kills) if params.kill_mode == "random" else None,
                     progress=progress, group_done=group_done,
                     on_tick=nemesis.on_tick if nemesis else None, hold=nemesis.busy if nemesis else None,
                     standby=True)
    try:
        result = sup.run()
    except BaseException:
        if watcher:
            watcher.stop()
        raise
    if exp.name == "eos-streams":
        from .streams import first_record_events
        result.events = sorted(result.events + first_record_events(run_dir / "workers"), key=lambda e: e.get("t", 0))
        # Streams' working state (RocksDB files and a 14 MB native library copy) is not evidence: drop it.
        shutil.rmtree(run_dir / "streams-state", ignore_errors=True)
    progress(result.__dict__ | {"crashes": len(crashlog.read(crash_log))})
    progress.close()

    crashes = crashlog.read(crash_log)
    if params.fresh_transactional_id and crashes and result.status == "complete":
        # Nobody fenced the dead producers: their transactions end only when the broker times them out.
        wait = crashes[-1]["time"] + params.transaction_timeout_ms / 1000 + TXN_ABORT_MARGIN_S - time.time()
        if wait > 0:
            log(f"[{run_id}] waiting {wait:.0f} s for the broker to abort the dead transactions "
                f"(fresh transactional.id: nothing fenced them)")
            time.sleep(wait)
    if watcher:
        watcher.stop()
    audit = ledger_audit.audit_ledger(stack.postgres_dsn, names.ledger_table,
                                      names.dedupe_table if exp.uses_dedupe else None, sent_ids)
    kout = kafka_output.audit_output(stack.bootstrap_servers, names.output_topic, sent_ids) if exp.uses_output else None
    extra = {"t0": progress.t0}
    if nemesis:
        extra["zombie"] = nemesis.report(result.events)
    if watcher:
        extra["read_committed_stall_seconds"] = watcher.stalls([c["time"] for c in crashes if c.get("time")])
    report = build_report(params, exp, names, stack, run_id, payments, crashes, audit, kout, result, progress.samples,
                          kill_point, extra)
    write_all(report, run_dir)
    return report, run_dir


def _streams_command(params, exp, names, stack, run_dir, crash_log, log):
    """The Java worker's command line and environment (the JDBC password goes in the environment)."""
    from . import streams
    jar = streams.build(log)
    env = {**os.environ, "HARNESS_PG_PASSWORD": streams.jdbc(stack.postgres_dsn)[2]}
    slots = [[p for p in range(params.partitions)]] * min(params.workers, params.partitions)

    def command(slot):
        return streams.command(jar, slot, bootstrap=stack.bootstrap_servers, input_topic=names.input_topic,
                               output_topic=names.output_topic, application_id=names.group,
                               state_dir=run_dir / "streams-state", crash_plan=run_dir / "crash-plan.json",
                               crash_log=crash_log, commit_interval_ms=params.commit_interval_ms,
                               ledger_table=names.ledger_table if exp.uses_ledger else None,
                               dsn=stack.postgres_dsn)
    return command, env, slots


def build_report(params, exp, names, stack, run_id, payments, crashes, audit, kout, result, samples, kill_point,
                 extra: dict | None = None) -> RunReport:
    extra = extra or {}
    sent_ids = [p.id for p in payments]
    pred = predict("zombie" if exp.name == "zombie" else exp.mode, crashes, params.kill_mode, params.commit_every)
    observed = {"ledger.duplicates": audit.counts.duplicates, "ledger.lost": audit.counts.lost,
                "ledger.dedupe_hits": audit.dedupe_hits}
    if kout:
        for iso in ("read_committed", "read_uncommitted"):
            observed[f"kafka.{iso}.duplicates"] = kout[iso]["duplicates"]
            observed[f"kafka.{iso}.lost"] = kout[iso]["lost"]
    if "zombie" in extra:
        observed["zombie.fenced"] = int(extra["zombie"]["fenced"])
    v = judge(pred, observed, audit.counts.per_id, audit.counts.lost_ids)
    verdict = v.verdict
    if result.status == "incomplete":
        verdict = "incomplete"
    elif result.status == "interrupted":
        verdict = "interrupted"

    # The headline counts describe the ledger when the experiment has one, else the read_committed output.
    if exp.uses_ledger:
        counts = {"effects": audit.counts.effects, "duplicates": audit.counts.duplicates, "lost": audit.counts.lost}
        dup_ids, lost_ids = audit.counts.duplicate_ids, audit.counts.lost_ids
        prefix = "ledger."
    else:
        rc = kout["read_committed"]
        counts = {"effects": rc["records"], "duplicates": rc["duplicates"], "lost": rc["lost"]}
        dup_ids, lost_ids = rc["duplicate_ids"], rc["lost_ids"]
        prefix = "kafka.read_committed."
    delivered = [c.get("delivered") for c in crashes if c.get("by") != "supervisor"] + \
        [e.get("delivered") for e in result.events if e.get("event") in ("done", "fenced")]
    # Known only when every process reported its count: a supervisor's random SIGKILL leaves no record, and
    # the Streams worker reports deliveries only in its crash lines, not when it is stopped at the end.
    deliveries = (sum(x for x in delivered if isinstance(x, int))
                  if params.kill_mode == "points" and exp.name != "eos-streams" else None)
    counts = {"sent": len(payments), "deliveries": deliveries, **counts,
              "dedupe_hits": audit.dedupe_hits if exp.uses_dedupe else None}

    predicted = {"duplicates": pred.value(prefix + "duplicates"), "lost": pred.value(prefix + "lost"),
                 "dedupe_hits": pred.value("ledger.dedupe_hits"),
                 "exact": pred.exact, "note": pred.note,
                 "expectations": [e.text() for e in pred.expectations]}
    if kout:
        predicted["kafka_output"] = {iso: {"duplicates": pred.value(f"kafka.{iso}.duplicates"),
                                           "lost": pred.value(f"kafka.{iso}.lost")}
                                     for iso in ("read_committed", "read_uncommitted")}

    rs = restart_seconds(crashes, result.events)
    wall = result.wall_seconds
    data = {
        "schema_version": SCHEMA_VERSION,
        "run_id": run_id,
        "experiment": exp.name,
        "status": result.status,
        "proves": exp.proves,
        "steps": exp.steps,
        "params": {**asdict(params), "kill_point": kill_point},
        "environment": describe(stack),
        "stack": {"kind": stack.kind, "bootstrap_servers": stack.bootstrap_servers,
                  "postgres_dsn": redact(stack.postgres_dsn), "input_topic": names.input_topic,
                  "output_topic": names.output_topic if exp.uses_output else None,
                  "consumer_group": names.group,
                  "ledger_table": names.ledger_table if exp.uses_ledger else None,
                  "dedupe_table": names.dedupe_table if exp.uses_dedupe else None},
        "crashes": [{k: c.get(k) for k in ("point", "message_id", "partition", "offset", "unacked", "worker",
                                           "attempt", "time")} for c in crashes],
        "counts": counts,
        "predicted": predicted,
        "kafka_output": ({**{iso: {k: kout[iso][k] for k in ("records", "duplicates", "lost")}
                             for iso in ("read_committed", "read_uncommitted")},
                          "aborted_records": kout["aborted_records"]} if kout else None),
        "ledger": {"expected_total": sum(p.amount for p in payments),
                   "actual_total": audit.actual_total if exp.uses_ledger else None},
        "anomalies": {"lost_ids": lost_ids[:20], "lost_total": len(lost_ids),
                      "duplicate_ids": dup_ids[:20], "duplicates_total": counts["duplicates"],
                      "unexpected_ids": audit.counts.unexpected_ids[:20]},
        "verdict": verdict,
        "verdict_detail": {"failed": v.failed, "differing_ids": v.differing_ids,
                           "reason": result.reason, "audit_error": audit.error},
        "timings": {"wall_seconds": round(wall, 3),
                    "restart_seconds": rs,
                    "restart_median_seconds": round(statistics.median(rs), 3) if rs else None,
                    "restart_max_seconds": max(rs) if rs else None,
                    "messages_per_second": round(len(payments) / wall, 1) if wall > 0 else None},
        "restarts": result.restarts,
        "timeline": _timeline(samples, crashes, result, extra.pop("t0", time.time())),
        **extra,
    }
    stalls = extra.get("read_committed_stall_seconds")
    if stalls:
        data["timings"]["read_committed_stall_median_seconds"] = round(statistics.median(stalls), 3)
        data["timings"]["read_committed_stall_max_seconds"] = max(stalls)
    data["summary"] = summarize(data)
    return RunReport(data)


def _timeline(samples, crashes, result, t0: float) -> dict:
    """Progress samples, crashes and restarts, all in seconds since the workers started (t0)."""
    starts = [e["t"] - t0 for e in result.events if e.get("event") == "started" and e.get("attempt", 1) > 1]
    return {"progress": [[t, v] for t, v in samples],
            "crashes": [round(c["time"] - t0, 3) for c in crashes if c.get("time")],
            "restarts": [round(s, 3) for s in starts]}


def summarize(d: dict) -> str:
    """One sentence that says what happened, for the terminal, Markdown and HTML alike."""
    c, led, exp = d["counts"], d["ledger"], d["experiment"]
    n = len(d["crashes"])
    how = {"as-predicted": ("exactly as predicted from the crash log" if n else "exactly as predicted")
           if d["predicted"]["exact"] else "within the predicted bounds",
           "unexpected": "NOT as predicted", "incomplete": "but the run did not finish",
           "interrupted": "but the run was interrupted"}[d["verdict"]]
    parts = []
    if led.get("actual_total") is not None:
        parts.append(f"{c['lost']:,} lost and {c['duplicates']:,} duplicated effects of {c['sent']:,} payments "
                     f"(ledger {led['actual_total']:,} of {led['expected_total']:,})")
    ko = d.get("kafka_output")
    if ko:
        rc, ru = ko["read_committed"], ko["read_uncommitted"]
        parts.append(f"read_committed output {rc['records']:,} records with {rc['duplicates']:,} duplicates and "
                     f"{rc['lost']:,} lost; read_uncommitted {ru['records']:,} records")
    faults = f"after {n:,} crashes" if n else "with no planned crash"
    text = f"{exp}: " + "; ".join(parts) + f" {faults}, {how}."
    if ko and led.get("actual_total") is not None and c["duplicates"] and not ko["read_committed"]["duplicates"]:
        text += (f" Kafka EOS covered the topic ({ko['read_committed']['duplicates']} duplicates) and not the database "
                 f"({c['duplicates']:,} duplicate charges).")
    z = d.get("zombie")
    if z:
        t = z["times_since_pause"]
        text += (f" The zombie was frozen for {z['pause_seconds']:g} s, replaced, resumed"
                 + (f" and fenced {t['zombie_fenced'] - t.get('resumed', 0):.2f} s after waking"
                    if z["fenced"] and "zombie_fenced" in t else ", and NOT fenced") + ".")
    stalls = d.get("read_committed_stall_seconds")
    if stalls:
        text += (f" read_committed readers of the output stalled {statistics.median(stalls):.2f} s (median) after "
                 f"each crash.")
    return text
