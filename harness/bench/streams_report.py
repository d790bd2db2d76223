"""streams.json, streams.md and streams.html of `harness bench streams`, from one dict (so they agree)."""

import json
from html import escape
from pathlib import Path

from ..reporting import html as h
from ..reporting.shared import fmt

# A restart's phases: (from, to, what it is), each from a timestamp of the kill or of the worker's log.
PHASES = (("kill", "process_start", "kill -> worker process start"),
          ("process_start", "main", "process start -> main (the wrapper execs java; JVM start-up)"),
          ("main", "starting", "main -> Streams start (worker set-up)"),
          ("starting", "running", "Streams start -> running (join, assignment, producer id)"),
          ("running", "first_record", "running -> first record (fetch, process)"))
# The worker's set-up (main -> Streams start) step by step. (The bench's runs have no ledger, eos-streams'
# default: the connection that opens beside the set-up with --effect postgres is on the worker's LEDGER line.)
SETUP_PHASES = (("main", "crash_plan", "main -> crash plan and log read"),
                ("crash_plan", "logging", "crash plan -> logging started (SLF4J provider)"),
                ("logging", "built", "logging -> Kafka Streams built (topology, configuration, clients)"),
                ("built", "starting", "built -> Streams start"))
ALL_PHASES = PHASES + SETUP_PHASES

SUMMARY_HEADS = ("lever", "java and cache", "runs", "restarts", "restart median s", "restart p90 s",
                 "harness tree CPU-s per crash", "JVM CPU-s per crashed attempt",
                 *(label for _, _, label in PHASES), "run s")
SETUP_HEADS = ("lever", *(label for _, _, label in SETUP_PHASES))
CELL_HEADS = ("lever", "repetition", "verdict", "crashes", "restart median s", "restart p90 s",
              "harness tree CPU-s per crash",
              "run s", "restarts timed")


def _jvm(j) -> str:
    if not isinstance(j, dict):
        return "unknown"
    return f"{j.get('java')} {j.get('release') or ''} ({j.get('cache') or 'no cache'})".replace("  ", " ")


def summary_rows(d: dict) -> list[tuple]:
    return [(s["lever"], _jvm(s.get("jvm")), fmt(s["runs"]), fmt(s.get("restarts")), fmt(s["restart_median_seconds"]),
             fmt(s["restart_p90_seconds"]), fmt(s["cpu_seconds_per_crash"]), fmt(s.get("jvm_cpu_median")),
             *(fmt((s.get("phases") or {}).get(f"{a}->{b}")) for a, b, _ in PHASES), fmt(s["run_seconds"]))
            for s in d["summary"]]


def setup_rows(d: dict) -> list[tuple]:
    return [(s["lever"], *(fmt((s.get("phases") or {}).get(f"{a}->{b}")) for a, b, _ in SETUP_PHASES))
            for s in d["summary"]]


def cell_rows(d: dict) -> list[tuple]:
    return [(c["lever"], fmt(c.get("repetition")), c.get("verdict", ""), fmt(c.get("crashes")),
             fmt(c.get("restart_median_seconds")), fmt(c.get("restart_p90_seconds")),
             fmt(c.get("cpu_seconds_per_crash")), fmt(c.get("seconds")), fmt(c.get("restarts_timed")))
            for c in d["cells"]]


def how_measured(d: dict) -> list[str]:
    p, env = d["parameters"], d["environment"]
    return [f"Each cell is one `harness run eos-streams --streams-jvm LEVER --messages {p['messages']:,} --seed "
            f"{p['seed']}` (a child process) on this machine's {env.get('cpus')} CPUs; levers take turns within "
            f"each of {p['repetitions']} repetition(s), after an untimed warm-up that built the jar and trained "
            f"each lever's cache. Per lever: the median and 90th percentile of all its runs' restarts pooled.",
            "Restart: a worker's death (Runtime.halt at a planned record) to its replacement's first record, "
            "from each run's report. Harness tree CPU-s per crash: the CPU of the run's process tree (the "
            "harness and its JVMs, all their work, not the broker's or PostgreSQL's) over its crashes; the "
            "median run's. JVM CPU-s per crashed attempt: the median over every worker JVM that died a planned "
            "death of the CPU it used from its start to that death (the kernel's count, on its CRASH line).",
            "Phases: medians over every timed restart of the time between its timestamps: the kill (the crash "
            "log), the worker process's start (the kernel's, 10 ms ticks: about +-0.01 s), main() entered, "
            "Kafka Streams started, RUNNING, the first record, and the set-up's steps (the worker's log); unknown "
            "where a line is missing. The aot lever runs a JDK 25 "
            "(its own java), the others the java on PATH: the java and its release are named per lever."]


def render_md(d: dict) -> str:
    out = [f"# Kafka Streams restart bench {d['bench_id']}", "", *[f"> {line}  " for line in how_measured(d)], "",
           "## Per lever", "", "| " + " | ".join(SUMMARY_HEADS) + " |", "| " + " | ".join("---" for _ in SUMMARY_HEADS) + " |"]
    out += ["| " + " | ".join(str(x) for x in r) + " |" for r in summary_rows(d)]
    out += ["", "## The worker's set-up, step by step (medians, s)", "", "| " + " | ".join(SETUP_HEADS) + " |",
            "| " + " | ".join("---" for _ in SETUP_HEADS) + " |"]
    out += ["| " + " | ".join(str(x) for x in r) + " |" for r in setup_rows(d)]
    out += ["", "## Every run", "", "| " + " | ".join(CELL_HEADS) + " |", "| " + " | ".join("---" for _ in CELL_HEADS) + " |"]
    out += ["| " + " | ".join(str(x) for x in r) + " |" for r in cell_rows(d)]
    out += ["", f"Status: {d['status']}; wall time {fmt(d['wall_seconds'])} s.", ""]
    return "\n".join(out)


def render_html(d: dict) -> str:
    body = [f"<h1>Kafka Streams restart bench {escape(d['bench_id'])}</h1>",
            *[f"<p class=muted>{escape(line)}</p>" for line in how_measured(d)],
            "<h2>Per lever</h2>", "<div class=wide>", h.table(summary_rows(d), SUMMARY_HEADS), "</div>",
            "<h2>The worker's set-up, step by step (medians, s)</h2>", h.table(setup_rows(d), SETUP_HEADS),
            "<h2>Every run</h2>", h.table(cell_rows(d), CELL_HEADS, numeric=(1, 3, 4, 5, 6, 7, 8)),
            f"<p class=muted>Status: {escape(d['status'])}; wall time {fmt(d['wall_seconds'])} s.</p>"]
    return h.page(f"streams bench {d['bench_id']}", "".join(body))


def write_all(d: dict, folder: Path) -> None:
    texts = (("streams.json", json.dumps(d, indent=2) + "\n"), ("streams.md", render_md(d)),
             ("streams.html", render_html(d)))
    from ..core.safefile import write_text
    for name, text in texts:
        write_text(folder / name, text)
