"""Run one experiment end to end: workload -> workers and faults -> audit -> verdict -> report.

The flow is one way, as in Jepsen: create this run's topics and tables,
produce the seeded payments, set up the faults (the crash plan is written
here), let the supervisor run, restart and break the workers until the input
is consumed and committed, then audit Postgres and Kafka, predict from the
crash log, judge, and write the report. What each experiment does comes from
its declaration (harness/experiments/); this module branches on no name.
Whatever happens (time limit, Ctrl-C, SIGTERM), the workers are gone and a
report is written before this returns. When the launcher says its workers could
never run (a user's command that keeps exiting without consuming), the report is
still written and the run ends with that one line as a HarnessError (exit 2).
"""

from __future__ import annotations

import errno
import signal
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from ..clients import kafka_logging, pgconn
from ..checker.histories import read as read_histories
from ..checker.observe import observe_run
from ..checker.deliveries import FILE_NAME as DELIVERIES, read as read_deliveries
from ..checker.run_outcome import decide
from ..checker.output_watcher import OutputWatcher
from ..checker.commit_progress import NoProgress, Progress
from ..core.errors import HarnessError, ReportNotWritten
from ..experiments.common_options import refuse_group_protocol
from ..experiments.launch import PythonWorkers
from ..runtime import crashlog, overlaps
from ..runtime.crashplan import CrashPlan
from ..workers.supervisor import Supervisor, SupervisorResult
from .params import RunParams, resolve
from .stop_fence import fence_stopped
from ..core.paths import refuse_overlap, reports_dir
from ..reporting import guesses
from ..reporting.build import assemble
from ..reporting.run_report import RunReport
from ..reporting.writer import write_or_keep
from ..core.rundir import claim_run_dir
from ..stack.deaths import StackWatch
from ..stack.stack import Stack
from ..workload import reused_payments as reuse, tables
from ..workload import registry, run_kafka_user, run_role, signature
from ..workload.naming import RunNames, new_run_id
from ..workload.payments import TimeLimitReached, make_payments, create_topic, produce

# The broker checks for timed-out transactions every second (our broker setting), then writes the abort markers.
TXN_ABORT_MARGIN_S = 3.0

# How long the workers wait for the output topic's read_committed reader to have read every partition to its
# end once. It starts before the payments are produced; its end-of-partition answer comes from a fetch the
# broker holds for up to consume.FETCH_WAIT_MS, so it is usually ready before the workers are prepared.
WATCHER_READY_S = 15.0

# A write that failed for want of room (a full file system, a quota, a file size limit) or of a writable
# folder: the run stops, and is still audited and reported (the report goes elsewhere if it must).
NO_ROOM = (errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EROFS)
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
    positions: dict = field(default_factory=dict)   # payment id -> (partition, offset), as the broker acknowledged
    log: object = print
    progress: object = None
    accounts: dict = field(default_factory=dict)   # payment id -> account (experiments with balances)
    reused: dict = field(default_factory=dict)     # payment id -> its reused request (workload/reused_payments.py), if any
    phases: dict = field(default_factory=dict)   # seconds per phase (see `phase`), for the time breakdown
    deadline: float | None = None   # time.monotonic() at which the time limit ends the set-up and produce phases
    crash_log: Path = field(init=False)
    events: Path = field(init=False)
    crash_plan: Path = field(init=False)
    history: Path = field(init=False)     # the workers' histories (runtime/history.py), one file per process
    # The DSN every consumer of the run gets: its own role's (workload.run_role); with its password, so no repr.
    worker_dsn: str = field(default="", repr=False)
    db_role: object = None         # the run_role.Grant behind worker_dsn, once made
    # The key the run's producer marks its records with (workload/signature.py); in this process's memory only.
    secret: bytes = field(default_factory=signature.new_secret, repr=False)
    kafka_user: object = None      # the run_kafka_user.KafkaGrant behind kafka_login, once made
    # The Kafka client settings every consumer of the run gets (its own user's), with the password: no repr.
    kafka_login: dict | None = field(default=None, repr=False)

    @property
    def sent_ids(self) -> list:
        return list(self.amounts)

    def __post_init__(self):
        self.crash_log = self.run_dir / "crash-log.jsonl"
        self.events = self.run_dir / "events.jsonl"
        self.crash_plan = self.run_dir / "crash-plan.json"
        self.history = self.run_dir / "history"
        self.worker_dsn = self.worker_dsn or self.stack.postgres_dsn


@contextmanager
def signals_deferred():
    """While the evidence is audited and written, SIGINT, SIGTERM and SIGHUP stop the reads, not the
    run: the first one cancels every query still waiting (pgconn.interrupt: within a fraction of a
    second) and every read after it fails at once, so the audit ends with what it had read and the
    run is `interrupted`. The report is still written: a second Ctrl-C, or the suite's SIGTERM after the
    terminal's SIGINT, must not cost the run its report, and the report says what the run was, with the
    matching exit status."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    sigs = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
    old = {s: signal.getsignal(s) for s in sigs}

    def heard(signum, frame):
        pgconn.interrupt(signal.Signals(signum).name)
    for s in sigs:
        signal.signal(s, heard)
    try:
        yield
    finally:
        for s, h in old.items():
            signal.signal(s, h)


@contextmanager
def phase(r: "Run", name: str):
    """Add the time spent in the block to r.phases[name] (set-up, produce, workers, audit)."""
    t0 = time.monotonic()
    try:
        yield
    finally:
        r.phases[name] = round(r.phases.get(name, 0.0) + time.monotonic() - t0, 3)


def run(params: RunParams, stack: Stack, out: Path | None = None, log=print, ui=None,
        run_id: str | None = None) -> tuple[RunReport, Path]:
    resolved = resolve(params)          # checked once; from here on nobody changes the parameters
    params, exp, faults = resolved.params, resolved.exp, resolved.faults
    for f in faults:
        f.check_stack(stack)          # e.g. a broker fault needs the 3-broker cluster: say so before creating anything
    launcher = exp.launcher or PythonWorkers()
    if hasattr(launcher, "check"):       # bad input a launcher can see (e.g. client settings): before anything
        launcher.check(stack)
    refuse_group_protocol(params, stack)     # a protocol the cluster or the client lacks
    run_id = run_id or new_run_id(exp.name)
    names = RunNames(run_id)
    if hasattr(launcher, "check_run"):   # a run option the stack cannot serve (a dead-letter topic): before anything
        launcher.check_run(params, stack, names)
    refuse_overlap(Path(out) if out else reports_dir() / run_id)     # a library caller's --out too
    run_dir = claim_run_dir(Path(out) if out else reports_dir() / run_id)
    guesses.write_pending(run_dir)      # `--predict`: the guesses are on disk before anything runs
    kafka_logging.configure(run_dir / kafka_logging.FILE_NAME)

    r = Run(params, exp, names, stack, run_dir, amounts={}, log=log)
    pgconn.reset()
    r.deadline = time.monotonic() + params.time_limit      # set-up and produce obey the limit too
    pgconn.set_deadline(r.deadline)
    watcher, launch, positions, result, produced, sup = None, None, r.positions, None, False, None
    try:
        payments = make_payments(params.messages, params.amount, params.payload_bytes,
                                 accounts=exp.stores.accounts, seed=params.seed)
        r.amounts = {p.id: p.amount for p in payments}
        r.accounts = {p.id: p.account for p in payments if p.account is not None}
        CrashPlan.make(r.sent_ids, 0.0, params.seed).save(r.crash_plan)    # each fault that plans amends its part
        with phase(r, "setup"):
            registry.register(stack.postgres_dsn, run_id)     # before its first name: `clean` knows it is ours
            for f in sorted(faults, key=lambda f: f.setup_order):
                f.setup(r)
            if any(f.moves_partitions for f in faults):
                CrashPlan.amend(r.crash_plan, partitions_move=True)
            log(f"[{run_id}] creating topic {names.input_topic} ({params.partitions} partitions) and tables")
            create_topic(stack.bootstrap_servers, names.input_topic, params.partitions)
            if exp.stores.output_topic:
                create_topic(stack.bootstrap_servers, names.output_topic, params.partitions)
            if exp.stores.events:
                create_topic(stack.bootstrap_servers, names.events_topic, params.partitions)
            made = []
            if exp.stores.ledger:
                tables.create(stack.postgres_dsn, names.ledger_table,
                              names.dedupe_table if exp.stores.dedupe else None,
                              names.accounts_table if exp.stores.accounts else None, sorted(set(r.accounts.values())),
                              dedupe_unique=exp.stores.dedupe_unique)
                made += [names.ledger_table] + [t for t, on in ((names.dedupe_table, exp.stores.dedupe),
                                                                (names.accounts_table, exp.stores.accounts)) if on]
            if exp.stores.rejects:
                tables.create_rejects(stack.postgres_dsn, names.rejects_table)
                made.append(names.rejects_table)
            if exp.stores.rows:
                tables.create_service_tables(stack.postgres_dsn, names.rows_table,
                                             names.outbox_table if exp.stores.outbox else None)
                made += [names.rows_table] + ([names.outbox_table] if exp.stores.outbox else [])
            run_role.give(r, made)
            run_kafka_user.give(r)
        # started before the payments are produced, so its first fetches overlap their production
        watcher = OutputWatcher(stack.bootstrap_servers, names.output_topic) if exp.stores.output else None
        t_prod = time.time()
        with phase(r, "produce"):
            produce(stack.bootstrap_servers, names.input_topic, payments, positions=positions,
                    partitions=params.partitions, deadline=r.deadline, secret=r.secret, settings=exp.producer)
            r.reused = _produce_reused(r, payments)
        produced = True
        log(f"[{run_id}] produced {len(payments)} payments in {time.time() - t_prod:.1f} s; faults: "
            + "; ".join(_fault_line(f) for f in faults) + f" (seed {params.seed})")
        r.progress = Progress(stack, names, params.partitions, params.messages + len(r.reused), ui)
        with phase(r, "prepare_workers"):
            r.history.mkdir(exist_ok=True)
            launch = launcher.prepare(r)
            if watcher and not watcher.wait_ready(WATCHER_READY_S):
                log(f"[{run_id}] the read_committed reader of {names.output_topic} has not reached the end of "
                    f"every partition after {WATCHER_READY_S:.0f} s ({watcher.failed or 'still fetching'}); the "
                    "workers start anyway, and the stalls of crashes before it was ready are unknown")
        deaths = _stack_watch(stack, faults)
        log(f"[{run_id}] {deaths.note}")
        sup = Supervisor(run_dir, len(launch.slots), launch.command, launch.env, params.time_limit, r.crash_log,
                         r.events, faults=[*faults, deaths], progress=r.progress, group_done=launch.group_done,
                         standby=launch.standby, names=launch.names, watch=launch.watch,
                         may_exit=launch.may_exit, planned_exits=launch.planned_exits,
                         restart_delay=params.restart_delay or 0.0, own_process_group=launch.own_process_group,
                         forked=launch.forked)
        pgconn.set_deadline(time.monotonic() + params.time_limit)    # the workers' own limit starts now
        with phase(r, "workers"):
            result = sup.run()
        fence_stopped(r, launcher, result, log)
        with phase(r, "wait_for_dead_transactions"):
            _wait_for_unfenced_transactions(r, result, log)
    except TimeLimitReached as e:
        # Only what the broker acknowledged counts as sent (below, `produced` is False).
        result = SupervisorResult(status="incomplete", reason=(
            f"time limit of {params.time_limit:g} s reached while producing the payments: {e.acked} of "
            f"{params.messages} sent (acknowledged by the broker), no worker started"))
        log(f"[{run_id}] {result.reason}")
    except KeyboardInterrupt:
        # The supervisor handles interrupts while workers run; this is before (set-up, produce) or after
        # (the wait for unfenced transactions). Either way the run is interrupted and still reported.
        if result is None:
            result = SupervisorResult(status="interrupted", reason="interrupted before the workers ran")
        else:
            result.status, result.reason = "interrupted", "interrupted while waiting for dead transactions to end"
    except OSError as e:
        if e.errno not in NO_ROOM:
            _let_go(r, watcher, launcher, launch, result)
            raise
        # A folder filled up (a worker flooding the run folder) or went read-only: the workers are stopped (the
        # supervisor kills them on any error); the run ends incomplete and is still audited and reported.
        result = sup.result if sup is not None else SupervisorResult(status="incomplete")
        result.status = "incomplete"
        result.reason = f"a file could not be written ({e.strerror}: {e.filename}); the run stopped there"
        log(f"[{run_id}] {result.reason}")
    except BaseException:
        _let_go(r, watcher, launcher, launch, result)
        raise
    finally:
        for f in faults:        # the supervisor's end did it, unless it never ran (set-up failed, stopped before)
            f.release()
    if not produced:
        # Only what the broker acknowledged was sent.
        r.amounts = {i: a for i, a in r.amounts.items() if i in positions}
    if r.progress is None:
        r.progress = NoProgress()
    with signals_deferred():
        launcher.finish(r, result)
        run_role.let_go(r)           # the workers are gone: nothing the run started writes during the audit
        run_kafka_user.let_go(r)
        r.progress({"crashes": len(crashlog.read(r.crash_log)), "restarts": result.restarts})
        r.progress.close()
        crashes = crashlog.read(r.crash_log)
        if watcher:
            watcher.stop()
        readers = {k: getattr(launch, k) for k in ("ledger_reader", "dead_letter_reader")
                   if launch and getattr(launch, k)}
        with phase(r, "audit"):
            audit = observe_run(exp, stack, names, r.amounts, positions, r.progress.committed,
                              finished=result.status == "complete", accounts=r.accounts,
                              deliveries=read_deliveries(run_dir / DELIVERIES) if exp.stores.deliveries else None,
                              histories=read_histories(r.history) if launch and not params.no_history else None,
                              concurrent=watcher.placed() if watcher else None, reused=r.reused,
                              secret=r.secret, **readers)
        if pgconn.interrupted() and result.status != "interrupted":
            result.status, result.reason = "interrupted", (
                f"interrupted by {pgconn.interrupted()} while the run was audited ({result.reason or result.status} "
                "before it): what was not read by then is not counted")
        outcome = decide(r.exp, r.params, crashes, result, faults, audit, amounts=r.amounts,
                         positions=r.positions, accounts=r.accounts, run_dir=r.run_dir, reused=r.reused,
                         overlaps=overlaps.read(overlaps.path_beside(r.crash_log)))
        report = assemble(r, faults, launch.reports_deliveries if launch else False, result, crashes, audit,
                          outcome, stalls=watcher.stalls(crashes) if watcher else None,
                          stall_of=watcher.stalls if watcher else None)
        if launch and launch.annotate:
            launch.annotate(r, result, report)
        try:
            write_or_keep(report, run_dir)
        except ReportNotWritten:        # written elsewhere or lost: the run still ends in the registry, and
            try:                        # where its report went stays the error to tell
                registry.finish(stack.postgres_dsn, run_id)
            except Exception:  # noqa: BLE001
                pass
            raise
        registry.finish(stack.postgres_dsn, run_id)
    problem = launch.bad_input(result) if launch and launch.bad_input else None
    if problem:
        raise HarnessError(problem)
    return report, run_dir


def _let_go(r: Run, watcher, launcher, launch, result) -> None:
    """What a run that ends on an error holds (the output watcher, the progress, the launcher's sampler and
    connections) is let go, and the run's own PostgreSQL role; the error itself is the caller's to raise."""
    run_role.let_go(r)
    run_kafka_user.let_go(r)
    if watcher:
        watcher.stop()
    if r.progress:
        r.progress.close()
    if launch is not None:
        try:
            launcher.finish(r, result)
        except Exception:  # noqa: BLE001 - the first error is the one to raise
            pass


def _produce_reused(r: Run, payments: list) -> dict:
    """The buggy client's requests (key-reuse, key-fingerprint): a seeded share of the payments again, same
    id, another amount, produced after all of them and logged (reused.json) before any worker starts."""
    rate = getattr(r.params, "reuse_rate", None)
    again = reuse.plan(payments, rate or 0.0, r.params.seed)
    if not again:
        return {}
    where: dict = {}
    produce(r.stack.bootstrap_servers, r.names.input_topic, again, positions=where, partitions=r.params.partitions,
            deadline=r.deadline, secret=r.secret)
    out = [reuse.Reused(p.id, p.amount, *where.get(p.id, (None, None))) for p in again]
    reuse.save(r.run_dir, out)
    r.log(f"[{r.names.run_id}] produced {len(out)} requests again with a reused key and another amount "
          f"(a client bug; {reuse.FILE_NAME})")
    return reuse.by_id(out)


def _stack_watch(stack: Stack, faults: list) -> StackWatch:
    """The stack's own broker and PostgreSQL, watched while the workers run (stack/deaths.py); Kafka's
    nodes are left alone when a fault of the run kills or stops them on purpose."""
    from ..faults.broker import BrokerFault
    breaker = next((f.name for f in faults if isinstance(f, BrokerFault)), None)
    return StackWatch.of(stack, f"--fault {breaker} stops them on purpose" if breaker else None)


def _wait_for_unfenced_transactions(r: Run, result, log) -> None:
    """With a fresh transactional.id nobody fenced the dead producers: their transactions end only when
    the broker times them out. The audit waits for that, or it would count still-open transactions."""
    crashes = crashlog.read(r.crash_log)
    if not (r.params.fresh_transactional_id and crashes and result.status == "complete"):
        return
    wait = crashes[-1]["time"] + r.params.transaction_timeout_ms / 1000 + TXN_ABORT_MARGIN_S - time.time()
    if wait > 0:
        log(f"[{r.names.run_id}] waiting {wait:.0f} s for the broker to abort the dead transactions "
            f"(fresh transactional.id: nothing fenced them)")
        time.sleep(wait)


def _fault_line(f) -> str:
    d = f.describe()
    return d["fault"] + "".join(f" {k}={v}" for k, v in d.items() if k not in ("fault", "points") and v is not None)
