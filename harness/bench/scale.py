"""`harness bench scale`: how the time to a verdict grows with messages and with partitions x workers.

Each cell is one real `harness run` (a child process, as in the suite) at a
fixed crash rate, so its crashes grow with its messages: 1k / 10k / 100k
payments, and partitions x workers 1x1 / 4x2 / 12x4, for offset-after,
dedupe and eos. A cell records its wall time, messages per second over the
workers' time, its restart median, the peak RSS of its workers (each worker
that finished reports its own ru_maxrss; a killed one cannot) and the
broker's resident memory after the cell (VmRSS, and VmHWM since the broker
started; local stack only). The growth table divides each size's time by the
smallest one's: linear growth keeps seconds per 1,000 messages flat, and
every row where it is not says by how much. Each row also fits the line
t = fixed + marginal x messages: the fixed part (process start, topic and
table creation, the audit's reads) dominates small runs, so seconds per
1,000 messages fall with size even when the marginal cost is constant.
"""

import json
import os
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from ..core.errors import HarnessError
from ..stack.stack import Stack

# Per experiment, what the bench passes besides the cell's size and shape. eos with a transaction per
# record spends its time on transaction round trips, not on the messages: it commits every 100 ms
# here, as a throughput-minded transactional app would.
EXPERIMENT_ARGS = {"offset-after": [], "dedupe": [], "eos": ["--commit-interval-ms", "100"]}
DEFAULT_MESSAGES = (1000, 10_000, 100_000)
DEFAULT_SHAPES = ((1, 1), (4, 2), (12, 4))
DEFAULT_CRASH_RATE = 0.001
CELL_TIME_LIMIT_S = 1800
# A per-1,000-message cost that moves more than this between sizes is called out as not linear.
LINEAR_TOLERANCE = 0.3


@dataclass
class ScaleOptions:
    messages: list = field(default_factory=lambda: list(DEFAULT_MESSAGES))
    shapes: list = field(default_factory=lambda: list(DEFAULT_SHAPES))
    experiments: list = field(default_factory=lambda: list(EXPERIMENT_ARGS))
    crash_rate: float = DEFAULT_CRASH_RATE
    seed: int = 25
    keep_data: bool = False

    def validate(self) -> None:
        if not self.messages or any(m < 1 for m in self.messages):
            raise HarnessError("--messages must list positive counts, e.g. 1000,10000")
        if not self.shapes or any(p < 1 or w < 1 or w > p for p, w in self.shapes):
            raise HarnessError("--shapes must list PARTITIONSxWORKERS with 1 <= workers <= partitions, e.g. 1x1,4x2")
        unknown = [e for e in self.experiments if e not in EXPERIMENT_ARGS]
        if unknown or not self.experiments:
            raise HarnessError(f"--experiments: choose among {', '.join(EXPERIMENT_ARGS)}")
        if not 0 <= self.crash_rate <= 1:
            raise HarnessError(f"--crash-rate must be between 0 and 1, got {self.crash_rate}")
        from ..run.params import MAX_MESSAGES
        if max(self.messages) > MAX_MESSAGES:
            raise HarnessError(f"--messages must be at most {MAX_MESSAGES:,}")


def parse_list(text: str, what: str) -> list[int]:
    try:
        out = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise HarnessError(f"--{what} must be comma-separated numbers, got {text!r}") from None
    return out


def parse_shapes(text: str) -> list[tuple[int, int]]:
    out = []
    for part in (x.strip() for x in text.split(",") if x.strip()):
        p, _, w = part.lower().partition("x")
        if not p.isdigit() or not w.isdigit():
            raise HarnessError(f"--shapes takes PARTITIONSxWORKERS items such as 4x2, got {part!r}")
        out.append((int(p), int(w)))
    return out


def proc_memory_kb(pid: int | None) -> dict:
    """VmRSS and VmHWM of a process, in kB (empty when it cannot be read)."""
    out = {}
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            key, _, value = line.partition(":")
            if key in ("VmRSS", "VmHWM"):
                out[key] = int(value.split()[0])
    except (OSError, ValueError, TypeError):
        pass
    return out


def worker_peak_rss_kb(run_dir: Path) -> int | None:
    """The largest ru_maxrss any finished worker reported (killed workers report nothing)."""
    peaks = []
    try:
        for line in (run_dir / "events.jsonl").read_text().splitlines():
            e = json.loads(line)
            if e.get("event") == "done" and isinstance(e.get("max_rss_kb"), int):
                peaks.append(e["max_rss_kb"])
    except (OSError, ValueError):
        return None
    return max(peaks) if peaks else None


def run_cell(stack: Stack, exp: str, messages: int, shape: tuple[int, int], opts: ScaleOptions, folder: Path) -> dict:
    partitions, workers = shape
    out = folder / f"{exp}-{messages}-{partitions}x{workers}"
    cmd = [sys.executable, "-m", "harness.cli", "run", exp, "--messages", str(messages), "--partitions",
           str(partitions), "--workers", str(workers), "--crash-rate", str(opts.crash_rate), "--seed",
           str(opts.seed), "--quiet", "--out", str(out), "--time-limit", str(CELL_TIME_LIMIT_S),
           *EXPERIMENT_ARGS[exp]]
    from ..run.suite_runner import run_env
    env = run_env(stack)
    t0 = time.time()
    from .common import run_child
    code, err = run_child(cmd, env)
    cell = {"experiment": exp, "messages": messages, "partitions": partitions, "workers": workers,
            "seconds": round(time.time() - t0, 2), "exit_code": code, "folder": out.name,
            "load_average_1m": round(os.getloadavg()[0], 2)}
    try:
        d = json.loads((out / "report.json").read_text())
    except (OSError, ValueError):
        cell.update(verdict="no report", error=(err or "").strip().splitlines()[-1:] or [""])
        return cell
    t, ph = d["timings"], d["timings"].get("phases") or {}
    busy = ph.get("workers")
    cell.update(verdict=d["verdict"], crashes=len(d["crashes"]), restart_median_seconds=t.get("restart_median_seconds"),
                phases=ph, messages_per_second=round(messages / busy, 1) if busy else None,
                worker_peak_rss_mb=_mb(worker_peak_rss_kb(out)),
                broker_memory_mb={k: _mb(v) for k, v in proc_memory_kb((stack.pids or {}).get("kafka")).items()})
    if not opts.keep_data:
        from .common import clean_run
        clean_run(stack, d["run_id"])
    return cell


def _mb(kb):
    return None if kb is None else round(kb / 1024, 1)


def growth(cells: list[dict]) -> list[dict]:
    """Per experiment and shape, the line t = fixed + marginal x messages through the smallest and the
    largest as-predicted run, seconds per 1,000 messages at each size, and every size whose time is
    more than LINEAR_TOLERANCE off that line (growth that is not linear)."""
    out = []
    keys = sorted({(c["experiment"], c["partitions"], c["workers"]) for c in cells},
                  key=lambda k: (list(EXPERIMENT_ARGS).index(k[0]) if k[0] in EXPERIMENT_ARGS else 99, k[1]))
    for exp, p, w in keys:
        row = sorted((c for c in cells if (c["experiment"], c["partitions"], c["workers"]) == (exp, p, w)
                      and c.get("verdict") == "as-predicted"), key=lambda c: c["messages"])
        g = {"experiment": exp, "shape": f"{p}x{w}",
             "seconds_per_1000": {c["messages"]: round(c["seconds"] / c["messages"] * 1000, 3) for c in row},
             "fixed_seconds": None, "marginal_seconds_per_1000": None, "note": None}
        if len(row) >= 2 and row[-1]["messages"] > row[0]["messages"]:
            lo, hi = row[0], row[-1]
            b = (hi["seconds"] - lo["seconds"]) / (hi["messages"] - lo["messages"])
            a = lo["seconds"] - b * lo["messages"]
            g["fixed_seconds"], g["marginal_seconds_per_1000"] = round(a, 2), round(b * 1000, 3)
            off = [(c["messages"], (c["seconds"] - (a + b * c["messages"])) / c["seconds"]) for c in row[1:-1]]
            bad = [f"{n:,} messages took {d:+.0%} against that line" for n, d in off if abs(d) > LINEAR_TOLERANCE]
            if b < 0:
                g["note"] = "not linear: the larger run was faster than the smaller one (noise, or warm-up)"
            elif bad:
                g["note"] = "not linear: " + "; ".join(bad)
        out.append(g)
    return out


def run_scale(stack: Stack, opts: ScaleOptions, folder: Path, bench_id: str, log=print) -> tuple[dict, Path]:
    from ..stack.environment import describe
    from .scale_report import write_all
    folder.mkdir(parents=True, exist_ok=True)
    cells, status = [], "complete"
    total = len(opts.experiments) * len(opts.shapes) * len(opts.messages)
    t0 = time.time()
    data = {}
    try:
        for exp in opts.experiments:
            for shape in opts.shapes:
                for n in opts.messages:
                    log(f"bench scale [{len(cells) + 1}/{total}] {exp} {n:,} messages, {shape[0]}x{shape[1]} ...")
                    cells.append(run_cell(stack, exp, n, shape, opts, folder))
                    c = cells[-1]
                    log(f"  {c.get('verdict')} in {c['seconds']:.1f} s, {c.get('crashes', '?')} crashes")
    except KeyboardInterrupt:
        status = "interrupted"
        raise
    finally:
        data = {"bench_id": bench_id, "kind": "scale", "status": status, "environment": describe(stack),
                "parameters": {"messages": opts.messages, "shapes": [f"{p}x{w}" for p, w in opts.shapes],
                               "experiments": opts.experiments, "crash_rate": opts.crash_rate, "seed": opts.seed,
                               "experiment_args": {e: EXPERIMENT_ARGS[e] for e in opts.experiments}},
                "cells": cells, "growth": growth(cells), "wall_seconds": round(time.time() - t0, 1)}
        write_all(data, folder)
    return data, folder
