"""protocols.json, protocols.md and protocols.html of `harness bench protocols`, from one dict (so they agree)."""

import json
from html import escape
from pathlib import Path

from ..reporting import html as h
from ..reporting.shared import fmt

SUMMARY_HEADS = ("protocol", "run", "client settings", "runs", "restarts", "restart median s", "group stalls known",
                 "group stall median s", "group stall from")
CELL_HEADS = ("protocol", "repetition", "verdict", "crashes", "restart median s", "group stall median s", "run s")


def summary_rows(d: dict) -> list[tuple]:
    return [(s["row"], s["run"], s["client_settings"], fmt(s["runs"]), fmt(s["restarts"]),
             fmt(s["restart_median_seconds"]), fmt(s["stalls_known"]), fmt(s["stall_median_seconds"]),
             s.get("stall_source") or (f"refused: {s['refused']}" if s.get("refused") else "unknown"))
            for s in d["summary"]]


def cell_rows(d: dict) -> list[tuple]:
    return [(c["row"], fmt(c.get("repetition")), c.get("verdict", ""), fmt(c.get("crashes")),
             fmt(c.get("restart_median_seconds")), fmt(c.get("stall_median_seconds")), fmt(c.get("seconds")))
            for c in d["cells"]]


def how_measured(d: dict) -> list[str]:
    p, env = d["parameters"], d["environment"]
    return [f"Each cell is one `harness run` of the row's experiment with --workers 2 --partitions 2 --messages "
            f"{p['messages']:,} --crash-rate {p['crash_rate']} --seed {p['seed']} (a child process) on this "
            f"machine's {env.get('cpus')} CPUs; the rows take turns within each of {p['repetitions']} "
            f"repetition(s). Per row: the medians of all its as-predicted runs' restarts and stalls pooled.",
            "Restart: a planned death to the replacement's first record (the run's report). Group stall: a "
            "planned death to the first record processed on the dead member's partition by any member (the "
            "Python workers' histories); unknown where none was seen, and for Kafka Streams, whose workers keep "
            "no history (their output records carry the input's timestamps, so the output cannot place them "
            "after a death either)."]


def _table_md(heads, rows) -> list[str]:
    return ["| " + " | ".join(heads) + " |", "| " + " | ".join("---" for _ in heads) + " |",
            *("| " + " | ".join(str(x) for x in r) + " |" for r in rows)]


def render_md(d: dict) -> str:
    out = [f"# Group protocol bench {d['bench_id']}", "", *[f"> {line}  " for line in how_measured(d)], "",
           "## Per protocol", "", *_table_md(SUMMARY_HEADS, summary_rows(d)),
           "", "## Every run", "", *_table_md(CELL_HEADS, cell_rows(d)),
           "", f"Status: {d['status']}; wall time {fmt(d['wall_seconds'])} s.", ""]
    return "\n".join(out)


def render_html(d: dict) -> str:
    body = [f"<h1>Group protocol bench {escape(d['bench_id'])}</h1>",
            *[f"<p class=muted>{escape(line)}</p>" for line in how_measured(d)],
            "<h2>Per protocol</h2>", "<div class=wide>", h.table(summary_rows(d), SUMMARY_HEADS), "</div>",
            "<h2>Every run</h2>", h.table(cell_rows(d), CELL_HEADS, numeric=(1, 3, 4, 5, 6)),
            f"<p class=muted>Status: {escape(d['status'])}; wall time {fmt(d['wall_seconds'])} s.</p>"]
    return h.page(f"protocols bench {d['bench_id']}", "".join(body))


def write_all(d: dict, folder: Path) -> None:
    from ..core.safefile import write_text
    for name, text in (("protocols.json", json.dumps(d, indent=2) + "\n"), ("protocols.md", render_md(d)),
                       ("protocols.html", render_html(d))):
        write_text(folder / name, text)
