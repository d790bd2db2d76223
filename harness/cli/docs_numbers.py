"""The figures of the docs' Numbers page, read from the reference reports so they cannot drift from them.

`reports/reference/` keeps the outputs of `harness suite`, `harness bench`, `harness bench scale`,
`harness bench streams` and `harness bench protocols` that the project stands behind (reports/reference/COMMANDS.md says how each was
made). The Numbers page's table is written from them at docs build time: each figure with its value, the
machine and date the report records, the exact command that made it, and the file it comes from. A figure
a report does not hold is `unknown`, never 0; a reference report missing or unreadable fails the build
with one line naming it, so the page never shows a figure nobody can reproduce. Nothing here imports the
rest of the harness: the reports are read as plain JSON.
"""

from __future__ import annotations

import json
import re
import statistics
from dataclasses import dataclass
from pathlib import Path

REFERENCE = Path(__file__).resolve().parents[2] / "reports" / "reference"
UNKNOWN = "unknown"


@dataclass(frozen=True)
class Figure:
    figure: str
    value: str
    machine: str
    date: str
    command: str
    source: str          # the report it comes from, relative to the repository (reports/reference/...)


class ReferenceError(ValueError):
    """A reference report is missing or is not the JSON its reader expects."""


def num(value, unit: str = "", digits: int | None = None) -> str:
    """A measured number as the page prints it (1,234.5 s), or `unknown` when the report has none."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return UNKNOWN
    text = f"{value:,}" if digits is None else f"{value:,.{digits}f}"
    return f"{text} {unit}".strip() if unit else text


def _load(root: Path, rel: str) -> tuple[dict, str]:
    path = root / rel
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError) as e:
        raise ReferenceError(f"reference report {path}: {e.__class__.__name__}: {e}") from None
    if not isinstance(data, dict) or not isinstance(data.get("environment"), dict):
        raise ReferenceError(f"reference report {path}: not a harness report (no environment)")
    return data, f"reports/reference/{rel}"


def machine(env: dict) -> str:
    pg = str(env.get("postgres_version") or UNKNOWN).split(" ")[0]
    return (f"{env.get('cpus', UNKNOWN)} cores, {env.get('platform', UNKNOWN)}, Kafka {env.get('kafka_version', UNKNOWN)}, "
            f"PostgreSQL {pg}, git {env.get('git_sha', UNKNOWN)}")


def date(*ids) -> str:
    """The day a report was made: its `created` time or the timestamp its id starts with (20261130T...)."""
    for text in ids:
        m = re.match(r"(\d{4})-?(\d{2})-?(\d{2})", str(text or ""))
        if m:
            return "-".join(m.groups())
    return UNKNOWN


def _command(env: dict) -> str:
    return str(env.get("command_line") or UNKNOWN)


def suite_figures(root: Path) -> list[Figure]:
    d, src = _load(root, "suite/suite.json")
    env, runs = d["environment"], d.get("experiments") or []
    args = " ".join(map(str, d.get("command_args") or []))
    common = dict(machine=machine(env), date=date(d.get("suite_id")), command=f"harness suite {args}".strip(),
                  source=src)
    agreed = sum(1 for r in runs if r.get("verdict") == "as-predicted")
    slowest = max(runs, key=lambda r: r.get("seconds") or 0, default={})
    out = [Figure(f"default suite: {len(runs)} experiments, {d.get('parallel', UNKNOWN)} at a time",
                  f"{num((d.get('timings') or {}).get('wall_seconds'), 's')} wall; {agreed} of {len(runs)} "
                  f"as-predicted; slowest {slowest.get('experiment', UNKNOWN)} {num(slowest.get('seconds'), 's')}",
                  **common)]
    known = sorted(((v, str(r.get("experiment"))) for r in runs
                    if isinstance(v := (r.get("timings") or {}).get("restart_median_seconds"), (int, float))), reverse=True)
    if known:
        slow, rest = known[:3], known[3:]
        value = ", ".join(f"{name} {num(v, 's')}" for v, name in slow)
        if rest:
            value += (f"; the other {len(rest)} {num(rest[-1][0], 's')} to {num(rest[0][0], 's')} "
                      f"(middle {num(statistics.median(v for v, _ in rest), 's', 3)})")
        out.append(Figure("worker restart inside the suite, SIGKILL to the successor's first record "
                          f"(median per run: {len(known)} of {len(runs)} runs measured one; slowest first)", value, **common))
    return out


def bench_figures(root: Path) -> list[Figure]:
    d, src = _load(root, "bench/bench.json")
    env = d["environment"]
    common = dict(machine=machine(env), date=date(d.get("created"), d.get("bench_id")), command=_command(env),
                  source=src)
    out = []
    restart = d.get("restart") or {}
    if restart.get("strategies"):
        ranked = sorted(restart["strategies"], key=lambda s: s.get("median_seconds") or float("inf"))
        out.append(Figure("consumer restart by group strategy, SIGKILL to the replacement's first record (median)",
                          "; ".join(f"{s.get('strategy')} {num(s.get('median_seconds'), 's', 2)}" for s in ranked)
                          + f" (fastest correct: {restart.get('fastest_correct') or UNKNOWN})", **common))
    tp = d.get("throughput") or {}
    ratios = {(r.get("numerator"), r.get("size_bytes")): r for r in tp.get("ratios") or []}
    cases: dict[str, list[dict]] = {}
    for c in tp.get("cases") or []:
        cases.setdefault(c.get("case"), []).append(c)
    for case, sizes in cases.items():
        parts = []
        for c in sorted(sizes, key=lambda c: c.get("size_bytes") or 0):
            ratio = ratios.get((case, c.get("size_bytes")))
            of = f" ({num(ratio.get('ratio'))} of {ratio.get('denominator')})" if ratio else ""
            parts.append(f"{num(c.get('size_bytes'), 'B')}: {num((c.get('messages_per_second') or {}).get('median'), 'msg/s', 0)}{of}")
        out.append(Figure(f"throughput without crashes, `{case}`: {sizes[0].get('what') or UNKNOWN}",
                          "; ".join(parts), **common))
    return out


def scale_figures(root: Path) -> list[Figure]:
    d, src = _load(root, "bench-scale/scale.json")
    env, cells = d["environment"], d.get("cells") or []
    common = dict(machine=machine(env), date=date(d.get("bench_id")), command=_command(env), source=src)
    restarts = [c["restart_median_seconds"] for c in cells if isinstance(c.get("restart_median_seconds"), (int, float))]
    agreed = sum(1 for c in cells if c.get("verdict") == "as-predicted")
    spread = f"{num(min(restarts), 's', 2)} to {num(max(restarts), 's', 2)}" if restarts else UNKNOWN
    out = [Figure("scale: every experiment x payments x partitions-by-workers cell",
                  f"{agreed} of {len(cells)} cells as-predicted; restart medians {spread}; "
                  f"{num(d.get('wall_seconds'), 's')} in all", **common)]
    most = max((c.get("messages") or 0 for c in cells), default=0)
    for exp in dict.fromkeys(c.get("experiment") for c in cells):
        top = [c for c in cells if c.get("experiment") == exp and c.get("messages") == most]
        out.append(Figure(f"scale: `{exp}` at {most:,} payments, msg/s by partitions x workers",
                          "; ".join(f"{c.get('partitions')}x{c.get('workers')} {num(c.get('messages_per_second'), digits=0)}"
                                    for c in top) or UNKNOWN, **common))
    return out


def streams_figures(root: Path) -> list[Figure]:
    d, src = _load(root, "bench-streams/streams.json")
    env = d["environment"]
    common = dict(machine=machine(env), date=date(d.get("bench_id")), command=_command(env), source=src)
    return [Figure(f"Kafka Streams restart, lever `{s.get('lever')}` ({s.get('restarts', UNKNOWN)} restarts, "
                   f"Java {(s.get('jvm') or {}).get('release') or UNKNOWN})",
                   f"median {num(s.get('restart_median_seconds'), 's')} (p90 {num(s.get('restart_p90_seconds'), 's')}); "
                   f"{num(s.get('jvm_cpu_median'), 'CPU-s')} per JVM start", **common)
            for s in d.get("summary") or []]


def protocols_figures(root: Path) -> list[Figure]:
    d, src = _load(root, "bench-protocols/protocols.json")
    env = d["environment"]
    common = dict(machine=machine(env), date=date(d.get("bench_id")), command=_command(env), source=src)
    return [Figure(f"group protocol `{s.get('row')}`: restart and group stall, median ({s.get('runs', UNKNOWN)} runs, "
                   f"{s.get('restarts', UNKNOWN)} restarts)",
                   f"restart {num(s.get('restart_median_seconds'), 's', 2)}; group stall "
                   f"{num(s.get('stall_median_seconds'), 's', 2)} ({s.get('client_settings') or UNKNOWN})", **common)
            for s in d.get("summary") or []]


READERS = (suite_figures, bench_figures, scale_figures, streams_figures, protocols_figures)


def figures(root: Path = REFERENCE) -> list[Figure]:
    """Every figure of the Numbers page, in the page's order, from the reference reports under `root`."""
    return [f for read in READERS for f in read(Path(root))]
