"""`harness bench streams`: what a Kafka Streams restart costs, with each start-up lever on and off.

eos-streams pays a new JVM per planned crash, so its restarts set the suite's
pace. Each cell is one real `harness run eos-streams` (a child process, as in
the suite) with one `--streams-jvm` lever: `plain` (no class cache), `cds` (a
class-data archive, any JDK) or `aot` (a JDK 25's ahead-of-time cache: classes
loaded, linked and profiled before the run). Levers take turns within each
repetition, so a busy moment of the machine does not fall on one lever alone.
Every cell starts each restart cold (`--streams-spare off`): the levers are
about a JVM's start, which a warm spare (`--streams-spare on`) starts before
the kill, so the phases below could not be placed.

Per cell: the restart median and 90th percentile (SIGKILL or Runtime.halt to
the replacement's first record, from the run's report), the CPU-seconds of
the whole run per crash (the run's process tree, all its work included: an
upper bound on a restart's CPU), and where each restart's time went, from the
timestamps the worker prints and the kernel's start time of its process:

    kill -> process start      fork and exec of the JVM
    process start -> main      the JVM's own start-up (class loading and linking: the caches' work)
    main -> Streams start      the worker's own set-up (crash plan, logging, topology, its clients)
    Streams start -> running   Kafka Streams: group join and assignment, producer id, task set-up
    running -> first record    the first fetch and the record's processing

and the set-up step by step (the worker's SETUP line): crash plan read,
logging started, Kafka Streams built (topology, configuration, its clients).
The runs have no ledger (eos-streams' default), so no ledger connection.

A phase the logs cannot place is unknown, never 0.
"""

from __future__ import annotations

import math
import re
import resource
import statistics
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from ..stack.stack import Stack
from .common import ChildRuns, seconds
from .streams_report import ALL_PHASES, write_all

LEVERS = ("plain", "cds", "aot")
CELL_TIME_LIMIT_S = 900
LINE = re.compile(r"^eos-streams (MAIN|SETUP|STARTING|RUNNING|FIRST-RECORD) worker=(\S+) attempt=(\d{1,9})(.*)$", re.M)
FIELD = re.compile(r"(process-start|main|time|logging|crash-plan|built)=(\d{1,12}\.\d{1,9})(?!\S)")
# A planned death's line, with the CPU-seconds its JVM used from its start to the halt (the kernel's count).
CRASH_CPU = re.compile(r"^eos-streams CRASH .* cpu=(\d{1,6}\.\d{1,3})$", re.M)
# Per line kind: its fields and the names they take in start_times.
FIELDS = {"MAIN": {"process-start": "process_start", "main": "main"},
          "SETUP": {"crash-plan": "crash_plan", "logging": "logging", "built": "built"},
          "STARTING": {"time": "starting"}, "RUNNING": {"time": "running"}, "FIRST-RECORD": {"time": "first_record"}}
# The process's start is the kernel's, in 10 ms ticks: a phase this little below 0 is 0 within that resolution.
RESOLUTION_S = 0.011


@dataclass
class StreamsBenchOptions(ChildRuns):
    levers: list = field(default_factory=lambda: list(LEVERS))

    def validate(self) -> None:
        from .common import check_runs
        check_runs("--levers", self.levers, LEVERS, self.repetitions, self.messages, 10)


def start_times(log_text: str) -> dict:
    """(worker, attempt) -> {process_start, main, crash_plan, logging, built, starting, running, first_record}:
    the epoch seconds the worker's log gives for each (absent when it does not)."""
    out: dict = {}
    for kind, worker, attempt, rest in LINE.findall(log_text):
        got = out.setdefault((worker, int(attempt)), {})
        fields = dict(FIELD.findall(rest))
        for name, key in FIELDS[kind].items():
            if name in fields:
                got[key] = float(fields[name])
    return out


def crash_cpu(log_text: str) -> list[float]:
    """The CPU-seconds of each JVM that died a planned death, from its CRASH line."""
    return [float(v) for v in CRASH_CPU.findall(log_text)]


def restart_phases(crashes: list[dict], starts: dict) -> list[dict]:
    """Per crash, the seconds of each phase of its slot's next attempt (None where a timestamp is missing
    or out of order: unknown)."""
    out = []
    for c in crashes:
        nxt = starts.get((c.get("worker"), (c.get("attempt") or 0) + 1))
        if nxt is None or not isinstance(c.get("time"), (int, float)):
            continue
        times = {"kill": c["time"], **nxt}
        row = {}
        for a, b, _ in ALL_PHASES:
            d = times[b] - times[a] if a in times and b in times else None
            row[f"{a}->{b}"] = None if d is None or d < -RESOLUTION_S else round(max(0.0, d), 4)
        out.append(row)
    return out


def _median(values) -> float | None:
    got = [v for v in values if v is not None]
    return round(statistics.median(got), 3) if got else None


def _p90(values) -> float | None:
    """The 90th percentile by nearest rank."""
    got = sorted(v for v in values if v is not None)
    return round(got[max(0, math.ceil(len(got) * 0.9) - 1)], 3) if got else None


def run_cell(stack: Stack, lever: str, rep: int, opts: StreamsBenchOptions, folder: Path) -> dict:
    out = folder / f"{lever}-{rep}"
    cmd = [sys.executable, "-m", "harness.cli", "run", "eos-streams", "--streams-jvm", lever, "--streams-spare", "off",
           "--messages", str(opts.messages), "--seed", str(opts.seed), "--quiet", "--out", str(out),
           "--time-limit", str(CELL_TIME_LIMIT_S)]
    from ..run.suite_runner import run_env
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.time()
    from .common import child_report, run_child
    code, err = run_child(cmd, run_env(stack))
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    cell = {"lever": lever, "repetition": rep, "folder": out.name, "exit_code": code,
            "seconds": round(time.time() - t0, 2), "cpu_seconds": round(cpu, 2)}
    d = child_report(out, err, cell)
    if d is None:
        return cell
    crashes = d.get("crashes") or []
    restarts = [r for r in (d["timings"].get("restart_seconds") or []) if r is not None]
    starts: dict = {}
    jvm_cpu: list[float] = []
    for log in sorted((out / "workers").glob("*.log")):
        text = log.read_text(errors="replace")
        starts.update(start_times(text))
        jvm_cpu += crash_cpu(text)
    phases = restart_phases(crashes, starts)
    cell.update(verdict=d["verdict"], crashes=len(crashes), restart_median_seconds=_median(restarts),
                restart_p90_seconds=_p90(restarts), restarts=restarts, phases=phases,
                cpu_seconds_per_crash=round(cpu / len(crashes), 3) if crashes else None,
                jvm_cpu=jvm_cpu, jvm_cpu_median=_median(jvm_cpu),
                phase_medians={f"{a}->{b}": _median(p[f"{a}->{b}"] for p in phases) for a, b, _ in ALL_PHASES},
                restarts_timed=len(phases), jvm=d.get("streams_jvm"))
    if not opts.keep_data:
        from .common import clean_run
        clean_run(stack, d["run_id"])
    return cell


def warm_up(levers: list, log) -> None:
    """Build the worker's jar and train each lever's cache before any cell is timed: a cell pays no
    one-off cost (a stale jar, a missing cache) the others do not."""
    from ..experiments import streams_jvm
    jar = streams_jvm.build(log)
    for lever in levers:
        streams_jvm.worker_start(jar, lever, log)


def summary(cells: list[dict], levers: list) -> list[dict]:
    """Per lever, over its as-predicted cells: the median and 90th percentile of all their restarts pooled,
    the median of each phase over all their timed restarts, and the median run's CPU per crash and time."""
    out = []
    for lever in levers:
        ok = [c for c in cells if c["lever"] == lever and c.get("verdict") == "as-predicted"]
        restarts = [r for c in ok for r in c.get("restarts") or []]
        phases = [p for c in ok for p in c.get("phases") or []]
        out.append({"lever": lever, "runs": len(ok), "restarts": len(restarts),
                    "restart_median_seconds": _median(restarts), "restart_p90_seconds": _p90(restarts),
                    "cpu_seconds_per_crash": _median(c.get("cpu_seconds_per_crash") for c in ok),
                    "jvm_cpu_median": _median(v for c in ok for v in c.get("jvm_cpu") or []),
                    "run_seconds": _median(c.get("seconds") for c in ok),
                    "phases": {f"{a}->{b}": _median(p.get(f"{a}->{b}") for p in phases) for a, b, _ in ALL_PHASES},
                    "jvm": next((c.get("jvm") for c in ok if c.get("jvm")), None)})
    return out


def run_streams_bench(stack: Stack, opts: StreamsBenchOptions, folder: Path, bench_id: str,
                      log=print) -> tuple[dict, Path]:
    from ..stack.environment import describe
    folder.mkdir(parents=True, exist_ok=True)
    cells, status, t0 = [], "complete", time.time()
    total = opts.repetitions * len(opts.levers)
    warm_up(opts.levers, log)
    try:
        for rep in range(1, opts.repetitions + 1):
            for lever in opts.levers:
                log(f"bench streams [{len(cells) + 1}/{total}] --streams-jvm {lever}, repetition {rep} ...")
                cells.append(run_cell(stack, lever, rep, opts, folder))
                c = cells[-1]
                cpu = c.get("cpu_seconds_per_crash")
                log(f"  {c.get('verdict')}: restart median {seconds(c.get('restart_median_seconds'))}, "
                    f"{'unknown' if cpu is None else cpu} CPU-s per crash")
    except KeyboardInterrupt:
        status = "interrupted"
        raise
    finally:
        data = {"bench_id": bench_id, "kind": "streams", "status": status, "environment": describe(stack),
                "parameters": {"levers": opts.levers, "repetitions": opts.repetitions, "messages": opts.messages,
                               "seed": opts.seed},
                "cells": cells, "summary": summary(cells, opts.levers), "wall_seconds": round(time.time() - t0, 1)}
        write_all(data, folder)
    return data, folder
