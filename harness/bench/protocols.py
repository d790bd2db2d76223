"""`harness bench protocols`: what a crash costs a group under each group protocol, a row per protocol.

A team that switches `group.protocol` wants two numbers per protocol: how long a
killed member's replacement takes to process again, and how long the dead
member's partition goes unprocessed by anyone (the group's stall). Each cell is
one real `harness run` (a child process, as in the suite) with two workers on
two partitions, so a death can move partitions; the rows take turns within each
repetition, so a busy moment of the machine does not fall on one row alone:

    classic          offset-after --assignment group --group-protocol classic (librdkafka)
    consumer         offset-after --assignment group --group-protocol consumer (KIP-848)
    streams-classic  eos-streams --streams-protocol classic (Kafka Streams, static members)
    streams          eos-streams --streams-protocol streams (KIP-1071, dynamic members)

Per cell, from the run's own records:

    restart      a planned death to the replacement's first record (the report's restarts)
    group stall  a planned death to the first record processed on the dead member's partition by
                 any member: the Python workers' histories (every poll, its time and partitions).
                 The Kafka Streams workers keep none, and their output records carry the input's
                 timestamps (so the report's read_committed stall cannot place them after a death):
                 for them it is unknown, and their restart is the number to compare

Each row names its client settings, and the broker's settings that rule the
protocol (its session and heartbeat for the consumer and streams groups). A
protocol the cluster lacks fails its cells with the run's own one-line refusal.
Numbers it cannot measure are unknown, never 0.
"""

from __future__ import annotations

import json
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from ..core.errors import HarnessError
from ..stack.stack import Stack
from .common import ChildRuns, seconds

CELL_TIME_LIMIT_S = 900
NO_HISTORY = "unknown: the workers keep no history of their polls"


@dataclass(frozen=True)
class Row:
    name: str
    experiment: str
    args: tuple
    settings: str                  # the client's settings, in words
    broker_keys: tuple = ()        # the broker settings that rule this protocol's membership


ROWS = (
    Row("classic", "offset-after", ("--assignment", "group", "--group-protocol", "classic"),
        "Python (librdkafka): group.protocol=classic, session.timeout.ms=1000, heartbeat.interval.ms=250, "
        "partition.assignment.strategy=range", ("group.min.session.timeout.ms",)),
    Row("consumer", "offset-after", ("--assignment", "group", "--group-protocol", "consumer"),
        "Python (librdkafka): group.protocol=consumer; session and heartbeat are the broker's",
        ("group.consumer.session.timeout.ms", "group.consumer.heartbeat.interval.ms")),
    Row("streams-classic", "eos-streams", ("--streams-protocol", "classic"),
        "Kafka Streams: group.protocol=classic, static members (group.instance.id per worker), "
        "session.timeout.ms=6000, heartbeat.interval.ms=1000, exactly_once_v2"),
    Row("streams", "eos-streams", ("--streams-protocol", "streams"),
        "Kafka Streams: group.protocol=streams (KIP-1071), dynamic members; session and heartbeat are the "
        "broker's; exactly_once_v2", ("group.streams.session.timeout.ms", "group.streams.heartbeat.interval.ms")),
)
ROW_NAMES = tuple(r.name for r in ROWS)


@dataclass
class ProtocolBenchOptions(ChildRuns):
    messages: int = 400
    rows: list = field(default_factory=lambda: list(ROW_NAMES))
    crash_rate: float = 0.01

    def validate(self) -> None:
        from .common import check_runs
        check_runs("--protocols", self.rows, ROW_NAMES, self.repetitions, self.messages, 20)
        if not 0 < self.crash_rate <= 0.2:
            raise HarnessError("--crash-rate must be above 0 and at most 0.2")


def parse_rows(text: str | None) -> list[str]:
    return list(ROW_NAMES) if text is None else [x.strip() for x in text.split(",") if x.strip()]


def polls(lines) -> list[tuple[float, int]]:
    """(time, partition) of every poll in a worker's history lines (JSON arrays; others are skipped)."""
    out = []
    for line in lines:
        try:
            op = json.loads(line)
        except ValueError:
            continue          # a line a SIGKILL cut short
        if isinstance(op, list) and len(op) >= 4 and op[1] == "poll" and isinstance(op[3], dict):
            out += [(float(op[0]), int(p)) for p, ranges in op[3].items() if ranges]
    return out


def group_stalls(crashes: list[dict], seen: list[tuple[float, int]]) -> list[float | None]:
    """Per crash, seconds from its death to the first poll after it that returned a record of its partition,
    by any member; None (unknown) when no such poll was seen or the crash names no time or partition."""
    out = []
    for c in crashes:
        t, p = c.get("time"), c.get("partition")
        after = [s for s, q in seen if q == p and isinstance(t, (int, float)) and s > t]
        out.append(round(min(after) - t, 3) if after and p is not None else None)
    return out


def _median(values) -> float | None:
    import statistics
    got = [v for v in values if v is not None]
    return round(statistics.median(got), 3) if got else None


def run_cell(stack: Stack, row: Row, rep: int, opts: ProtocolBenchOptions, folder: Path) -> dict:
    out = folder / f"{row.name}-{rep}"
    cmd = [sys.executable, "-m", "harness.cli", "run", row.experiment, *row.args, "--workers", "2",
           "--partitions", "2", "--messages", str(opts.messages), "--crash-rate", str(opts.crash_rate),
           "--seed", str(opts.seed), "--quiet", "--out", str(out), "--time-limit", str(CELL_TIME_LIMIT_S)]
    from ..run.suite_runner import run_env
    from .common import child_report, clean_run, run_child
    t0 = time.time()
    code, err = run_child(cmd, run_env(stack))
    cell = {"row": row.name, "repetition": rep, "folder": out.name, "exit_code": code,
            "seconds": round(time.time() - t0, 2)}
    d = child_report(out, err, cell)
    if d is None:
        return cell
    crashes = d.get("crashes") or []
    histories = sorted((out / "history").glob("*.jsonl"))
    if histories:
        seen = [x for f in histories for x in polls(f.read_text(errors="replace").splitlines())]
        stalls, source = group_stalls(crashes, seen), "workers' histories"
    else:
        stalls, source = [None] * len(crashes), NO_HISTORY
    restarts = [r for r in (d.get("timings", {}).get("restart_seconds") or []) if r is not None]
    cell.update(verdict=d.get("verdict"), crashes=len(crashes), restarts=restarts, stalls=stalls,
                stall_source=source, restart_median_seconds=_median(restarts), stall_median_seconds=_median(stalls))
    if not opts.keep_data:
        clean_run(stack, d["run_id"])
    return cell


def summary(cells: list[dict], rows: list[str], broker: dict) -> list[dict]:
    """Per row, over its as-predicted cells: the medians of all their restarts and group stalls pooled."""
    out = []
    for row in (r for r in ROWS if r.name in rows):
        ok = [c for c in cells if c["row"] == row.name and c.get("verdict") == "as-predicted"]
        restarts = [r for c in ok for r in c.get("restarts") or []]
        stalls = [s for c in ok for s in c.get("stalls") or []]
        said = ", ".join(f"{k}={broker.get(k, 'unknown')}" for k in row.broker_keys)
        out.append({"row": row.name, "run": " ".join([row.experiment, *row.args]), "runs": len(ok),
                    "client_settings": row.settings + (f"; broker: {said}" if said else ""),
                    "restarts": len(restarts), "restart_median_seconds": _median(restarts),
                    "stalls_known": sum(1 for s in stalls if s is not None), "stall_median_seconds": _median(stalls),
                    "stall_source": next((c["stall_source"] for c in ok), None),
                    "refused": next((c["error"] for c in cells if c["row"] == row.name and c.get("error")), None)})
    return out


def run_protocol_bench(stack: Stack, opts: ProtocolBenchOptions, folder: Path, bench_id: str,
                       log=print) -> tuple[dict, Path]:
    from ..stack.broker_version import broker_settings
    from ..stack.environment import describe
    from .protocols_report import write_all
    folder.mkdir(parents=True, exist_ok=True)
    keys = tuple(k for r in ROWS for k in r.broker_keys)
    broker = broker_settings(stack.bootstrap_servers, keys)
    rows = [r for r in ROWS if r.name in opts.rows]
    cells, status, t0 = [], "complete", time.time()
    total = opts.repetitions * len(rows)
    try:
        for rep in range(1, opts.repetitions + 1):
            for row in rows:
                log(f"bench protocols [{len(cells) + 1}/{total}] {row.name}, repetition {rep} ...")
                cells.append(run_cell(stack, row, rep, opts, folder))
                c = cells[-1]
                log(f"  {c.get('verdict')}: restart median {seconds(c.get('restart_median_seconds'))}, group stall "
                    f"median {seconds(c.get('stall_median_seconds'))}" + (f" ({c['error']})" if c.get("error") else ""))
    except KeyboardInterrupt:
        status = "interrupted"
        raise
    finally:
        data = {"bench_id": bench_id, "kind": "protocols", "status": status, "environment": describe(stack),
                "parameters": {"rows": [r.name for r in rows], "repetitions": opts.repetitions,
                               "messages": opts.messages, "crash_rate": opts.crash_rate, "seed": opts.seed},
                "broker_settings": broker, "cells": cells, "summary": summary(cells, opts.rows, broker),
                "wall_seconds": round(time.time() - t0, 1)}
        write_all(data, folder)
    return data, folder
