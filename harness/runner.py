"""Run one experiment end to end: workload -> workers and faults -> audit -> verdict -> report.

The flow is one way, as in Jepsen: create this run's topics and tables,
produce the seeded payments, set up the faults (the crash plan is written
here), let the supervisor run, restart and break the workers until the input
is consumed and committed, then audit Postgres and Kafka, predict from the
crash log, judge, and write the report. What each experiment does comes from
its declaration (harness/experiments/); this module branches on no name.
Whatever happens (time limit, Ctrl-C, SIGTERM), the workers are gone and a
report is written before this returns.
"""

from __future__ import annotations

import signal
import threading
import time
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path

from . import experiments, kafka_logging
from .checker.audit import audit_run
from .checker.output_watcher import OutputWatcher
from .checker.verdict import judge
from .environment import describe
from .experiments.launch import PythonWorkers
from .experiments.predictors import predict
from .faults import crashlog
from .faults.crashplan import CrashPlan
from .faults.supervisor import Supervisor, SupervisorResult, restart_seconds
from .params import RunParams, TXN_ABORT_MARGIN_S, FRESH_ID_TRANSACTION_TIMEOUT_MS
from .paths import reports_dir
from .report import build
from .report.model import RunReport, write_all
from .rundir import claim_run_dir
from .stack.model import Stack, redact
from .workload import tables
from .workload.naming import RunNames, new_run_id
from .workload.payments import make_payments, create_topic, produce

# Exit status of `harness run` (and the worst of a suite's runs) per verdict.
EXIT_CODES = {"as-predicted": 0, "unexpected": 1, "incomplete": 3, "audit-failed": 3, "interrupted": 130}


@dataclass
class Run:
    """Everything about one run that launchers and faults may read."""
    params: RunParams
    exp: object
    names: RunNames
    stack: Stack
    run_dir: Path
    amounts: dict                  # payment id -> amount, in production order
    log: object = print
    progress: object = None
    crash_log: Path = field(init=False)
    events: Path = field(init=False)
    crash_plan: Path = field(init=False)

    @property
    def sent_ids(self) -> list:
        return list(self.amounts)

    def __post_init__(self):
        self.crash_log = self.run_dir / "crash-log.jsonl"
        self.events = self.run_dir / "events.jsonl"
        self.crash_plan = self.run_dir / "crash-plan.json"


class Progress:
    """Samples the run group's committed offsets in a thread: drives the progress bar and the timeline.

    The sampling runs beside the supervisor, never inside its loop: a committed-offset fetch waits
    for pending transactional offsets (KIP-447), so it can block for as long as a dead
    transaction stays open, and the supervisor must keep reacting meanwhile.
    """

    SAMPLE_EVERY_S = 0.5

    def __init__(self, stack: Stack, names: RunNames, partitions: int, total: int, ui=None):
        from confluent_kafka import Consumer, TopicPartition
        self.c = Consumer({"bootstrap.servers": stack.bootstrap_servers, "group.id": names.group,
                           "enable.auto.commit": False, **kafka_logging.client_config()})
        self.tps = [TopicPartition(names.input_topic, p) for p in range(partitions)]
        self.total, self.ui, self.samples, self.t0 = total, ui, [], time.time()
        self.done = 0
        self.committed: dict | None = None     # partition -> committed offset, at the last good sample
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, name="progress", daemon=True)
        self._thread.start()

    def _take_sample(self) -> None:
        try:
            got = self.c.committed(self.tps, timeout=5)
        except Exception:  # noqa: BLE001 - progress is best effort
            return
        if any(tp.error for tp in got):
            return
        self.committed = {tp.partition: max(0, tp.offset) for tp in got}
        self.done = sum(self.committed.values())
        self.samples.append([round(time.time() - self.t0, 3), self.done])

    def _sample(self) -> None:
        while not self._stop.wait(self.SAMPLE_EVERY_S):
            self._take_sample()

    def __call__(self, info: dict) -> None:
        if self.ui:
            self.ui(self.done, self.total, info.get("crashes", 0), info.get("restarts", 0))

    def close(self) -> None:
        """Stop sampling and take a final sample; `committed` is None if it could not be read."""
        self._stop.set()
        self._thread.join(timeout=10)
        self.committed = None
        self._take_sample()
        self.c.close()


class _NoProgress:
    """Stands in for Progress when the run stopped before it started."""
    samples: list = []
    committed = None
    t0 = time.time()

    def __call__(self, info: dict) -> None:
        pass

    def close(self) -> None:
        pass


@contextmanager
def signals_deferred():
    """Hold SIGINT and SIGTERM while the evidence is audited and written: a second Ctrl-C, or the
    suite's SIGTERM after the terminal's SIGINT, must not cost the run its report. They take effect
    (as KeyboardInterrupt) once the report is on disk."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    got: list = []
    old = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    for s in old:
        signal.signal(s, lambda signum, _frame: got.append(signum))
    try:
        yield
    finally:
        for s, h in old.items():
            signal.signal(s, h)
    if got:
        raise KeyboardInterrupt


def run(params: RunParams, stack: Stack, out: Path | None = None, log=print, ui=None,
        run_id: str | None = None) -> tuple[RunReport, Path]:
    params.validate()
    exp = experiments.get(params.experiment).resolve(params)
    faults = params.check_faults(exp)
    if params.fresh_transactional_id and not params.transaction_timeout_ms:
        params.transaction_timeout_ms = FRESH_ID_TRANSACTION_TIMEOUT_MS
    run_id = run_id or new_run_id(exp.name)
    names = RunNames(run_id)
    run_dir = claim_run_dir(Path(out) if out else reports_dir() / run_id)
    kafka_logging.configure(run_dir / kafka_logging.FILE_NAME)

    payments = make_payments(params.messages, params.amount, params.payload_bytes)
    amounts = {p.id: p.amount for p in payments}
    r = Run(params, exp, names, stack, run_dir, amounts=amounts, log=log)
    CrashPlan.make(r.sent_ids, 0.0, params.seed).save(r.crash_plan)    # faults that plan crashes replace it
    for f in faults:
        f.setup(r)

    watcher, launch, positions = None, None, {}
    launcher = exp.launcher or PythonWorkers()
    try:
        log(f"[{run_id}] creating topic {names.input_topic} ({params.partitions} partitions) and tables")
        create_topic(stack.bootstrap_servers, names.input_topic, params.partitions)
        if exp.stores.output:
            create_topic(stack.bootstrap_servers, names.output_topic, params.partitions)
        if exp.stores.ledger:
            tables.create(stack.postgres_dsn, names.ledger_table, names.dedupe_table if exp.stores.dedupe else None)
        t_prod = time.time()
        produce(stack.bootstrap_servers, names.input_topic, payments, positions=positions)
        log(f"[{run_id}] produced {len(payments)} payments in {time.time() - t_prod:.1f} s; faults: "
            + "; ".join(_fault_line(f) for f in faults) + f" (seed {params.seed})")
        r.progress = Progress(stack, names, params.partitions, params.messages, ui)
        launch = launcher.prepare(r)
        watcher = OutputWatcher(stack.bootstrap_servers, names.output_topic) if exp.stores.output else None
        sup = Supervisor(run_dir, len(launch.slots), launch.command, launch.env, params.time_limit, r.crash_log,
                         r.events, faults=faults, progress=r.progress, group_done=launch.group_done,
                         standby=launch.standby)
        result = sup.run()
    except KeyboardInterrupt:
        # Stopped before the supervisor ran (it handles its own interrupts): still an honest report.
        result = SupervisorResult(status="interrupted", reason="interrupted before the workers ran")
    except BaseException:
        if watcher:
            watcher.stop()
        if r.progress:
            r.progress.close()
        raise
    if r.progress is None:
        r.progress = _NoProgress()
    with signals_deferred():
        launcher.finish(r, result)
        r.progress({"crashes": len(crashlog.read(r.crash_log)), "restarts": result.restarts})
        r.progress.close()
        crashes = crashlog.read(r.crash_log)
        if params.fresh_transactional_id and crashes and result.status == "complete":
            # Nobody fenced the dead producers: their transactions end only when the broker times them out.
            wait = crashes[-1]["time"] + params.transaction_timeout_ms / 1000 + TXN_ABORT_MARGIN_S - time.time()
            if wait > 0:
                log(f"[{run_id}] waiting {wait:.0f} s for the broker to abort the dead transactions "
                    f"(fresh transactional.id: nothing fenced them)")
                time.sleep(wait)
        if watcher:
            watcher.stop()
        audit = audit_run(exp, stack, names, amounts, positions, r.progress.committed,
                          finished=result.status == "complete")
        report = assemble(r, faults, launch.reports_deliveries if launch else False, result, crashes, audit,
                          stalls=watcher.stalls(crashes) if watcher else None)
        write_all(report, run_dir)
    return report, run_dir


def _fault_line(f) -> str:
    d = f.describe()
    return d["fault"] + "".join(f" {k}={v}" for k, v in d.items() if k not in ("fault", "points") and v is not None)


def assemble(r: Run, faults: list, reports_deliveries: bool, result, crashes: list, audit, stalls) -> RunReport:
    """The report's data, from the run's declaration, its faults, the crash log and the audit."""
    params, exp, names, stack = r.params, r.exp, r.names, r.stack
    pred = predict(exp, crashes, params.commit_every)
    fault_details = {f.name: f.story(result.events) for f in faults}
    observed = dict(audit.metrics)
    for f in faults:
        observed.update(f.observed(fault_details[f.name]))
    v = judge(pred, observed, audit.evidence)
    verdict = {"incomplete": "incomplete", "interrupted": "interrupted"}.get(result.status, v.verdict)

    head = audit.headline()
    prefix = "ledger." if exp.stores.ledger else "kafka.read_committed."
    delivered = [c.get("delivered") for c in crashes if c.get("by") != "supervisor"] + \
        [e.get("delivered") for e in result.events if e.get("event") in ("done", "fenced")]
    # Known only when every process reported its count: a supervisor's kill leaves no record, and
    # some workers (Streams) report deliveries only in their crash lines.
    described = all(c.get("by") != "supervisor" for c in crashes)
    deliveries = (sum(x for x in delivered if isinstance(x, int))
                  if reports_deliveries and described and result.status == "complete" else None)
    counts = build.Counts(sent=len(r.sent_ids), deliveries=deliveries, effects=head.effects,
                          duplicates=head.duplicates, lost=head.lost, unprocessed=head.unprocessed,
                          dedupe_hits=audit.dedupe_hits if exp.stores.dedupe else None)
    predicted = build.Predicted(
        duplicates=pred.value(prefix + "duplicates"), lost=pred.value(prefix + "lost"),
        dedupe_hits=pred.value("ledger.dedupe_hits"), exact=pred.exact, note=pred.note,
        expectations=[e.text() for e in pred.expectations],
        kafka_output=({iso: {"duplicates": pred.value(f"kafka.{iso}.duplicates"), "lost": pred.value(f"kafka.{iso}.lost")}
                       for iso in ("read_committed", "read_uncommitted")} if exp.stores.output else None))
    crash_rows = build.crash_entries(crashes, restart_seconds(crashes, result.events), stalls)
    fault_rows = sorted((e for f in faults for e in f.entries(crashes, result.events)), key=lambda e: e.get("time") or 0)
    ko = None
    if audit.output:
        ko = {iso: {"records": audit.output[iso].effects, "duplicates": audit.output[iso].duplicates,
                    "lost": audit.output[iso].lost, "unprocessed": audit.output[iso].unprocessed}
              for iso in ("read_committed", "read_uncommitted")}
        ko["aborted_records"] = audit.output["aborted_records"]
    data = {
        "schema_version": build.SCHEMA_VERSION,
        "run_id": names.run_id,
        "experiment": exp.name,
        "status": result.status,
        "proves": exp.proves,
        "steps": exp.steps_text(),
        "kill_points": [p.describe() for p in exp.kill_points],
        "params": {**asdict(params)},
        "environment": describe(stack),
        "stack": {"kind": stack.kind, "bootstrap_servers": stack.bootstrap_servers,
                  "postgres_dsn": redact(stack.postgres_dsn), "input_topic": names.input_topic,
                  "output_topic": names.output_topic if exp.stores.output else None,
                  "consumer_group": names.group,
                  "ledger_table": names.ledger_table if exp.stores.ledger else None,
                  "dedupe_table": names.dedupe_table if exp.stores.dedupe else None},
        "faults_configured": [f.describe() for f in faults],
        "faults": fault_rows,
        "fault_details": {k: v for k, v in fault_details.items() if v is not None},
        "crashes": crash_rows,
        "counts": asdict(counts),
        "predicted": asdict(predicted),
        "kafka_output": ko,
        "ledger": {"expected_total": sum(r.amounts.values()),
                   "actual_total": audit.ledger_total if exp.stores.ledger else None},
        "anomalies": asdict(build.Anomalies(
            lost_ids=build.capped(head.lost_ids), lost_total=head.lost,
            duplicate_ids=build.capped(head.duplicate_ids), duplicates_total=head.duplicates,
            unexpected_ids=build.capped(head.unexpected_ids),
            unprocessed_ids=build.capped(head.unprocessed_ids), unprocessed_total=head.unprocessed)),
        "verdict": verdict,
        "verdict_detail": asdict(build.VerdictDetail(
            failed=v.failed, differing_ids=v.differing_ids, differing_totals=v.differing_totals,
            reason=result.reason, audit_errors=list(audit.evidence.errors),
            unplanned_deaths=list(result.unplanned_deaths))),
        "timings": build.timings(result.wall_seconds, len(r.sent_ids), crash_rows),
        "restarts": result.restarts,
        "timeline": build.timeline(r.progress.samples, crashes, result.events, r.progress.t0, fault_rows),
    }
    data["summary"] = summarize(data, [f.sentence(fault_details[f.name]) for f in faults])
    return RunReport(data)


def _n(v) -> str:
    return "unknown" if v is None else f"{v:,}"


def summarize(d: dict, fault_sentences: list[str] | None = None) -> str:
    """One sentence that says what happened, for the terminal, Markdown and HTML alike."""
    c, led, exp = d["counts"], d["ledger"], d["experiment"]
    n = len(d["crashes"])
    how = {"as-predicted": ("exactly as predicted from the crash log" if n else "exactly as predicted")
           if d["predicted"]["exact"] else "within the predicted bounds",
           "unexpected": "NOT as predicted", "incomplete": "but the run did not finish",
           "interrupted": "but the run was interrupted",
           "audit-failed": "but the audit could not measure everything"}[d["verdict"]]
    parts = []
    if led.get("actual_total") is not None or d["stack"].get("ledger_table"):
        parts.append(f"{_n(c['lost'])} lost and {_n(c['duplicates'])} duplicated effects of {c['sent']:,} payments "
                     f"(ledger {_n(led.get('actual_total'))} of {led['expected_total']:,})")
    ko = d.get("kafka_output")
    if ko:
        rc, ru = ko["read_committed"], ko["read_uncommitted"]
        parts.append(f"read_committed output {_n(rc['records'])} records with {_n(rc['duplicates'])} duplicates and "
                     f"{_n(rc['lost'])} lost; read_uncommitted {_n(ru['records'])} records")
    if c.get("unprocessed"):
        parts.append(f"{c['unprocessed']:,} payments not yet processed when the run stopped (not counted as lost)")
    faults = f"after {n:,} crashes" if n else "with no planned crash"
    text = f"{exp}: " + "; ".join(parts) + f" {faults}, {how}."
    if ko and led.get("actual_total") is not None and c["duplicates"] and ko["read_committed"]["duplicates"] == 0:
        text += (f" Kafka EOS covered the topic (0 duplicates) and not the database "
                 f"({c['duplicates']:,} duplicate charges).")
    text += "".join(s for s in (fault_sentences or []) if s)
    med = d["timings"].get("read_committed_stall_median_seconds")
    if med is not None:
        text += f" read_committed readers of the crashed worker's output stalled {med:.2f} s (median) after each crash."
    deaths = d["verdict_detail"].get("unplanned_deaths") or []
    if deaths:
        text += f" {len(deaths)} worker death(s) no fault caused (see verdict_detail.unplanned_deaths)."
    errs = d["verdict_detail"].get("audit_errors") or []
    if errs:
        text += f" Audit error: {errs[0]}."
    return text
