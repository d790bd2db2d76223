"""bench.json, bench.md and bench.html: one dict, three renderings.

The HTML page is self-contained (inline CSS and SVG, no network) and reuses
the run report's page and table helpers; its bar charts use a log scale,
because the numbers span three orders of magnitude (0.1 s to 45 s restarts,
about a hundred to a hundred thousand messages per second).
"""

import json
import math
from html import escape
from pathlib import Path

from ..reporting.html import page, table, OK, DUP

SCHEMA_VERSION = 1

PUBLISHED_CONTEXT = (
    "Why ours differ: Confluent's ~3% compares a transactional producer with an idempotent one, both "
    "producing at full speed from the Java client to dedicated brokers; the transaction's extra requests "
    "(AddPartitionsToTxn, EndTxn, markers) are amortised over the thousands of records of each 100 ms "
    "transaction and overlap with sending. Kafka Streams' 15-30% adds the consumer side (read_committed, "
    "offsets in the transaction) and the flush of every task at each commit. Ours is a "
    "consume-transform-produce loop in Python (confluent-kafka) on one partition, where each commit is a "
    "synchronous send_offsets_to_transaction + commit_transaction that stalls the loop, and the broker, the "
    "worker, the supervisor and PostgreSQL share the same few cores. The cases that write to PostgreSQL "
    "pay a round trip and a WAL flush per record, and the at-least-once cases a synchronous offset commit "
    "per record: these dominate their rate, not Kafka.")


def write_all(data: dict, folder: Path) -> None:
    from ..core.safefile import make_folder, write_text
    make_folder(folder)
    for name, text in (("bench.json", json.dumps(data, indent=2) + "\n"), ("bench.md", render_md(data)),
                       ("bench.html", render_html(data))):
        write_text(folder / name, text)


# -- shared views -----------------------------------------------------------------------------
def _s(v, digits=3) -> str:
    if v is None:
        return "n/a"
    return f"{v:.{digits}f}"


def _rate(v) -> str:
    return "n/a" if v is None else f"{v:,.0f}"


def restart_rows(r: dict) -> list[tuple]:
    rows = []
    for s in r["strategies"]:
        timeouts = f", {s['timeouts']} timed out (> {r['parameters']['wait_cap_seconds']:.0f} s)" if s["timeouts"] else ""
        correct = "yes" if s["correct"] else ("NO: " + ", ".join(
            x for x, ok in (("skipped/repeated records", s["no_skips"]), ("committed offsets", s["progress"]))
            if not ok))
        rows.append((s["strategy"], s["label"], f"{s['measured']}/{s['kills_requested']}{timeouts}",
                     _s(s["median_seconds"]), _s(s["max_seconds"]), _s(s["median_startup_seconds"]),
                     _s(s["median_client_seconds"]), correct))
    return rows


RESTART_HEAD = ("strategy", "settings", "kills measured", "median s", "max s", "startup s", "client s", "correct")


def throughput_rows(t: dict) -> tuple[list[str], list[tuple]]:
    sizes = t["parameters"]["sizes"]
    head = ["case", "what it does", "messages"] + [f"{s} B msg/s median [min-max]" for s in sizes]
    by = {(c["case"], c["size_bytes"]): c for c in t["cases"]}
    rows = []
    for name in t["parameters"]["cases"]:
        cells = []
        msgs = None
        for s in sizes:
            c = by.get((name, s))
            if not c:
                cells.append("n/a")
                continue
            m = c["messages_per_second"]
            msgs = c["parameters"]["messages"]
            flag = "" if c["all_exact"] else " (NOT exact)"
            cells.append(f"{_rate(m['median'])} [{_rate(m['min'])}-{_rate(m['max'])}]{flag}")
        what = next((c["what"] for c in t["cases"] if c["case"] == name), "")
        rows.append((name, what, f"{msgs:,}" if msgs else "n/a", *cells))
    return head, rows


def summary(data: dict) -> list[str]:
    out = []
    r = data.get("restart")
    if r:
        fc = r.get("fastest_correct")
        parts = [f"{s['strategy']} {_s(s['median_seconds'], 2)} s" + (f" ({s['timeouts']} timeouts)" if s["timeouts"] else "")
                 for s in r["strategies"]]
        out.append("Restart (median, SIGKILL to the replacement's first record): " + "; ".join(parts) +
                   (f". Fastest correct: {fc}." if fc else ". No strategy was both correct and free of timeouts."))
    t = data.get("throughput")
    if t:
        sizes = t["parameters"]["sizes"]
        for size in sizes:
            parts = [f"{c['case']} {_rate(c['messages_per_second']['median'])}" for c in t["cases"]
                     if c["size_bytes"] == size]
            out.append(f"Throughput at {size} B (msg/s, median): " + ", ".join(parts) + ".")
        out += t.get("observations", [])
    return out


# -- Markdown ---------------------------------------------------------------------------------
def _md_table(head, rows, right=()) -> list[str]:
    out = ["| " + " | ".join(head) + " |",
           "| " + " | ".join("---:" if i in right else "---" for i in range(len(head))) + " |"]
    out += ["| " + " | ".join(str(c).replace("|", "/") for c in row) + " |" for row in rows]
    return out


def render_md(d: dict) -> str:
    out = [f"# Benchmark {d['bench_id']}", ""]
    out += [f"- {s}" for s in d["summary"]] + [""]
    r = d.get("restart")
    if r:
        out += ["## Restart latency by strategy", "", r["method"], ""]
        out += _md_table(RESTART_HEAD, restart_rows(r), right=(3, 4, 5, 6))
        out += ["", f"Fastest correct strategy: **{r.get('fastest_correct') or 'none'}**. "
                f"startup = spawn to consumer object (interpreter, imports); client = from there to the first record.",
                ""]
        out += ["| strategy | expected | per kill (s) |", "| --- | --- | --- |"]
        for s in r["strategies"]:
            per = ", ".join("timeout" if k["timed_out"] else _s(k["seconds"]) for k in s["kills"])
            out.append(f"| {s['strategy']} | {s['expect']} | {per} |")
        out.append("")
    t = d.get("throughput")
    if t:
        head, rows = throughput_rows(t)
        out += ["## Throughput with no crashes", "", t["method"], ""]
        out += _md_table(head, rows, right=tuple(range(2, len(head))))
        out += ["", "### Ratios (medians)", ""]
        out += _md_table(("ratio", "size", "value"),
                         [(x["what"], f"{x['size_bytes']} B", f"{x['ratio']:.2f}") for x in t["ratios"]], right=(2,))
        out += ["", "### Published numbers beside ours", ""]
        out += [f"- {p['source']}: {p['claim']}." for p in t["published"]]
        out += [f"- Ours: {o}" for o in t.get("observations", []) if "Confluent" in o]
        out += ["", PUBLISHED_CONTEXT, ""]
        other = [o for o in t.get("observations", []) if "Confluent" not in o]
        if other:
            out += ["### Observations", ""] + [f"- {o}" for o in other] + [""]
    out += ["## Caveats", ""] + [f"- {c}" for c in d.get("caveats", [])] + [""]
    out += ["## Parameters", ""] + _md_table(("parameter", "value"), d["parameters"].items())
    out += ["", "## Environment", ""] + _md_table(("", ""), list(d["stack"].items()) + list(d["environment"].items()))
    out += ["", "## Broker settings", ""] + _md_table(("setting", "value"), d["broker_settings"].items())
    out += ["", f"Total wall time: {d['wall_seconds']:.0f} s.", ""]
    return "\n".join(out)


# -- HTML -------------------------------------------------------------------------------------
def hbar_chart(chart_id: str, rows: list[tuple[str, float | None, float | None, float | None, str]],
               unit: str, width: int = 900, color: str = OK) -> str:
    """Horizontal bars on a log scale: (label, median, min, max, note) per row; min-max drawn as a whisker."""
    vals = [v for _, m, lo, hi, _ in rows for v in (m, lo, hi) if v]
    if not vals:
        return "<p class=muted>no data</p>"
    lo_exp = math.floor(math.log10(min(vals)))
    hi_exp = math.ceil(math.log10(max(vals) * 1.05))
    if hi_exp == lo_exp:
        hi_exp += 1
    left, right, bar, gap, top = 190, 150, 18, 8, 24
    plot = width - left - right
    h = top + len(rows) * (bar + gap) + 46

    def x(v):
        return left + plot * (math.log10(v) - lo_exp) / (hi_exp - lo_exp)

    parts = [f'<svg id="{escape(chart_id)}" role="img" aria-label="{escape(unit)}" width="{width}" height="{h}" '
             f'viewBox="0 0 {width} {h}">']
    for e in range(lo_exp, hi_exp + 1):
        xv = x(10 ** e)
        label = f"{10 ** e:g}" if e < 4 else f"{10 ** e:,.0f}"
        parts.append(f'<line x1="{xv:.1f}" x2="{xv:.1f}" y1="{top - 6}" y2="{h - 40}" stroke="#eee"/>'
                     f'<text x="{xv:.1f}" y="{h - 26}" text-anchor="middle">{label}</text>')
    parts.append(f'<text x="{left}" y="{h - 6}" fill="#6e7781">{escape(unit)}, log scale</text>')
    for i, (label, med, lo, hi, note) in enumerate(rows):
        y = top + i * (bar + gap)
        parts.append(f'<text x="{left - 8}" y="{y + bar - 5}" text-anchor="end">{escape(label)}</text>')
        if not med:
            parts.append(f'<text x="{left + 4}" y="{y + bar - 5}" fill="#a4161a">{escape(note or "n/a")}</text>')
            continue
        parts.append(f'<rect class="bar" data-value="{med}" x="{left}" y="{y}" width="{max(1.0, x(med) - left):.1f}" '
                     f'height="{bar}" fill="{color}"><title>{escape(label)}: {med:g} {escape(unit)}</title></rect>')
        if lo and hi and hi > lo:
            yc = y + bar / 2
            parts.append(f'<line x1="{x(lo):.1f}" x2="{x(hi):.1f}" y1="{yc}" y2="{yc}" stroke="#1d1d1f"/>'
                         f'<line x1="{x(lo):.1f}" x2="{x(lo):.1f}" y1="{y + 4}" y2="{y + bar - 4}" stroke="#1d1d1f"/>'
                         f'<line x1="{x(hi):.1f}" x2="{x(hi):.1f}" y1="{y + 4}" y2="{y + bar - 4}" stroke="#1d1d1f"/>')
        text = f"{med:,.3g}" if med < 100 else f"{med:,.0f}"
        parts.append(f'<text x="{max(x(med), x(hi) if hi else 0) + 6:.1f}" y="{y + bar - 5}">{text}'
                     f'{(" " + escape(note)) if note else ""}</text>')
    parts.append("</svg>")
    return "".join(parts)


def render_html(d: dict) -> str:
    body = [f"<h1>Benchmark {escape(d['bench_id'])}</h1>",
            "<div id=summary class=summary>" + "".join(f"<p>{escape(s)}</p>" for s in d["summary"]) + "</div>"]
    r = d.get("restart")
    if r:
        rows = []
        for s in r["strategies"]:
            note = "correct" if s["correct"] else "NOT correct"
            if s["timeouts"]:
                note += f", {s['timeouts']} timeouts"
            rows.append((s["strategy"], s["median_seconds"], s["min_seconds"], s["max_seconds"], note))
        body += ["<h2>Restart latency by strategy</h2>", f"<p class=muted>{escape(r['method'])}</p>",
                 hbar_chart("chart-restart", rows, "seconds, median (whisker: min-max)", color=DUP),
                 table(restart_rows(r), RESTART_HEAD, numeric=(3, 4, 5, 6)),
                 f"<p>Fastest correct strategy: <b id=fastest>{escape(r.get('fastest_correct') or 'none')}</b></p>"]
    t = d.get("throughput")
    if t:
        body += ["<h2>Throughput with no crashes</h2>", f"<p class=muted>{escape(t['method'])}</p>"]
        for size in t["parameters"]["sizes"]:
            rows = [(c["case"], c["messages_per_second"]["median"], c["messages_per_second"]["min"],
                     c["messages_per_second"]["max"], "" if c["all_exact"] else "NOT exact")
                    for c in t["cases"] if c["size_bytes"] == size]
            body += [f"<h3>{size} B messages</h3>",
                     hbar_chart(f"chart-throughput-{size}", rows, "messages/s, median (whisker: min-max)")]
        head, rows = throughput_rows(t)
        body += [table(rows, head, numeric=tuple(range(2, len(head)))),
                 "<h3>Ratios (medians)</h3>",
                 table([(x["what"], f"{x['size_bytes']} B", f"{x['ratio']:.2f}") for x in t["ratios"]],
                       ("ratio", "size", "value"), numeric=(2,)),
                 "<h3>Published numbers beside ours</h3><ul>"
                 + "".join(f"<li>{escape(p['source'])}: {escape(p['claim'])}.</li>" for p in t["published"])
                 + "".join(f"<li>Ours: {escape(o)}</li>" for o in t.get("observations", []) if "Confluent" in o)
                 + f"</ul><p>{escape(PUBLISHED_CONTEXT)}</p>"]
        other = [o for o in t.get("observations", []) if "Confluent" not in o]
        if other:
            body += ["<h3>Observations</h3><ul>" + "".join(f"<li>{escape(o)}</li>" for o in other) + "</ul>"]
    body += ["<h2>Caveats</h2><ul>" + "".join(f"<li>{escape(c)}</li>" for c in d.get("caveats", [])) + "</ul>",
             "<h2>Parameters</h2>", table(d["parameters"].items()),
             "<h2>Stack and environment</h2>", table(list(d["stack"].items()) + list(d["environment"].items())),
             "<h2>Broker settings</h2>", table(d["broker_settings"].items()),
             f"<p class=muted>Total wall time {d['wall_seconds']:.0f} s.</p>"]
    return page(f"benchmark {d['bench_id']}", "".join(body))
