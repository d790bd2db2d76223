"""scale.json, scale.md and scale.html of `harness bench scale`, from one dict (so they agree)."""

import json
from html import escape
from pathlib import Path

from ..reporting import html as h
from ..reporting.shared import fmt

COLUMNS = ("experiment", "messages", "partitions x workers", "verdict", "seconds", "messages/s (workers' time)",
           "crashes", "restart median s", "worker peak RSS MB", "broker RSS MB (peak)")
SIZE_COLORS = ("#00798c", "#edae49", "#d1495b", "#8d6cab", "#6e7781")


def cell_rows(d: dict) -> list[tuple]:
    rows = []
    for c in d["cells"]:
        mem = c.get("broker_memory_mb") or {}
        rows.append((c["experiment"], fmt(c["messages"]), f"{c['partitions']}x{c['workers']}", c.get("verdict", ""),
                     fmt(c["seconds"]), fmt(c.get("messages_per_second")), fmt(c.get("crashes")),
                     fmt(c.get("restart_median_seconds")), fmt(c.get("worker_peak_rss_mb")),
                     f"{fmt(mem.get('VmRSS'))} ({fmt(mem.get('VmHWM'))})" if mem else "unknown"))
    return rows


def growth_rows(d: dict) -> tuple[list[str], list[tuple]]:
    sizes = d["parameters"]["messages"]
    head = ["experiment", "shape", *(f"s per 1,000 at {n:,}" for n in sizes), "fixed s", "marginal s per 1,000",
            "growth"]
    rows = [(g["experiment"], g["shape"], *(fmt(g["seconds_per_1000"].get(n, g["seconds_per_1000"].get(str(n))))
                                            for n in sizes), fmt(g.get("fixed_seconds")),
             fmt(g.get("marginal_seconds_per_1000")),
             g["note"] or ("linear (every size within 30% of the line)" if len(g["seconds_per_1000"]) > 2
                           else "two sizes: a line, nothing to check"))
            for g in d["growth"]]
    return head, rows


def how_measured(d: dict) -> list[str]:
    p, env = d["parameters"], d["environment"]
    return [f"Each cell is one `harness run` (a child process) on this machine's {env.get('cpus')} CPUs, one at a time, "
            f"crash rate {p['crash_rate']} (seed {p['seed']}): crashes grow with messages. Seconds are the cell's "
            f"wall time including starting the process, creating its topic and tables and auditing; messages/s "
            f"divide the messages by the workers' time only.",
            "Worker peak RSS is the largest ru_maxrss a finished worker reported (a killed worker reports nothing); "
            "the broker's RSS is read from /proc after the cell (local stack only; VmHWM is its peak since it started).",
            "The machine's 1-minute load average after each cell is in scale.json (`load_average_1m`): above the "
            "core count, something else was running and the cell's time includes waiting for it.",
            "Extra arguments per experiment: " + "; ".join(f"{e}: {' '.join(a) or 'none'}"
                                                           for e, a in p["experiment_args"].items()) + "."]


def render_md(d: dict) -> str:
    out = [f"# Scale bench {d['bench_id']}", "", *[f"> {line}  " for line in how_measured(d)], "",
           "## Growth (seconds per 1,000 messages)", ""]
    head, rows = growth_rows(d)
    out += ["| " + " | ".join(head) + " |", "| " + " | ".join("---" for _ in head) + " |"]
    out += ["| " + " | ".join(str(x) for x in r) + " |" for r in rows]
    out += ["", "## Every cell", "", "| " + " | ".join(COLUMNS) + " |", "| " + " | ".join("---" for _ in COLUMNS) + " |"]
    out += ["| " + " | ".join(str(x) for x in r) + " |" for r in cell_rows(d)]
    out += ["", f"Status: {d['status']}; wall time {fmt(d['wall_seconds'])} s.", ""]
    return "\n".join(out)


def render_html(d: dict) -> str:
    sizes = d["parameters"]["messages"]
    groups = [(f"{g['experiment']} {g['shape']}",
               [(f"n{n}", int(round(1000 * (g["seconds_per_1000"].get(n) or g["seconds_per_1000"].get(str(n)) or 0))),
                 SIZE_COLORS[i % len(SIZE_COLORS)]) for i, n in enumerate(sizes)]) for g in d["growth"]]
    legend = [(f"{n:,} messages", SIZE_COLORS[i % len(SIZE_COLORS)]) for i, n in enumerate(sizes)]
    head, rows = growth_rows(d)
    body = [f"<h1>Scale bench {escape(d['bench_id'])}</h1>",
            *[f"<p class=muted>{escape(line)}</p>" for line in how_measured(d)],
            "<h2>Milliseconds per 1,000 messages, by size (flat bars: linear growth)</h2>",
            h.grouped_bars(groups, legend=legend, width=900, chart_id="chart-scale"),
            "<h2>Growth</h2>", h.table(rows, head),
            "<h2>Every cell</h2>", "<div class=wide>", h.table(cell_rows(d), COLUMNS, numeric=(1, 4, 5, 6, 7, 8)), "</div>",
            f"<p class=muted>Status: {escape(d['status'])}; wall time {fmt(d['wall_seconds'])} s.</p>"]
    return h.page(f"scale bench {d['bench_id']}", "".join(body))


def write_all(d: dict, folder: Path) -> None:
    texts = (("scale.json", json.dumps(d, indent=2) + "\n"), ("scale.md", render_md(d)), ("scale.html", render_html(d)))
    from ..core.safefile import write_text
    for name, text in texts:
        write_text(folder / name, text)
