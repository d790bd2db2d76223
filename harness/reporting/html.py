"""report.html: one self-contained page (inline CSS and SVG, no network).

A bar chart of lost and duplicated effects, a timeline of crashes and
restarts against progress, the scoreboard, the parameters and the
environment. Every number comes from the same RunReport as report.json.
Every value read from report.json is escaped (escape.html) wherever it lands,
numbers too: a report.json edited by someone else shows as text, never runs.
"""

import os
from pathlib import Path

from ..core.escape import html as escape

from .recount_by_hand import commands
from .shared import dead_letter_lines, fault_table, fmt, plain

CSS = """
body{font:15px/1.45 system-ui,-apple-system,Segoe UI,sans-serif;margin:2rem auto;max-width:1180px;color:#1d1d1f;padding:0 1rem}
.wide{overflow-x:auto}
h1{font-size:1.6rem;margin-bottom:.2rem} h2{font-size:1.15rem;margin-top:2rem;border-bottom:1px solid #ddd}
.verdict{display:inline-block;padding:.15rem .6rem;border-radius:1rem;font-weight:600;font-size:.9rem}
.as-predicted{background:#dff5e1;color:#146c2e}.unexpected{background:#fde2e1;color:#a4161a}
.incomplete,.interrupted,.audit-failed{background:#fff3cd;color:#7a5b00}
.summary{font-size:1.05rem;background:#f6f8fa;padding:.7rem 1rem;border-left:4px solid #6e7781}
table{border-collapse:collapse;margin:.5rem 0;font-size:.92rem} td,th{border:1px solid #ddd;padding:.25rem .6rem;text-align:left}
td.n{text-align:right;font-variant-numeric:tabular-nums} th{background:#f6f8fa}
svg text{font:12px system-ui,sans-serif} .muted{color:#6e7781;font-size:.85rem}
p.doc{margin:-.3rem 0 .4rem;font-size:.8rem} p.doc a{color:#6e7781}
dl.legend{display:grid;grid-template-columns:max-content 1fr;gap:.1rem .8rem;font-size:.85rem;margin:.3rem 0}
dl.legend dt{font-weight:600} dl.legend dd{margin:0}
table.compact{font-size:.8rem} table.compact td,table.compact th{padding:.2rem .35rem}
table.compact .verdict{font-size:.72rem;padding:.05rem .35rem;white-space:nowrap}
details.long>summary{cursor:pointer;color:#0b5cad;margin:.4rem 0}
pre.commands{background:#f6f8fa;padding:.7rem 1rem;overflow-x:auto;font-size:.85rem;line-height:1.5}
"""

# Each section heading links to the docs entry that explains it. The docs are Markdown in the harness
# repository (docs/, also a MkDocs site). HARNESS_DOCS_URL names a served copy (`mkdocs serve`:
# http://127.0.0.1:8000), where each page is a folder. Otherwise, where the harness runs from its checkout
# and the page's folder is known, the link is the path from that folder to the docs page's file (a report
# kept in the checkout keeps a working link). An installed package carries no docs pages, and a page printed
# to stdout (`harness compare --html`) has no folder: the heading then names the page's path in the
# repository as text, not as a link that would lead nowhere (nor a file:// one).
# The anchors are the headings of docs/reading-a-report.md (a test checks).
DOCS_PATH = "docs/"
DOCS_PAGE = "reading-a-report"
DOCS_DIR = Path(__file__).resolve().parents[2] / "docs"
SECTION_ANCHORS = {
    "Scoreboard": "scoreboard", "Your predictions": "your-predictions", "Balances": "balances", "What differed": "what-differed", "Faults": "faults",
    "Fault": "faults", "Your consumer": "your-consumer", "What each kill cost": "what-each-kill-cost",
    "Anomalies, observed and predicted": "anomalies-observed-and-predicted", "Each store": "each-stores-count", "Anomaly classes": "anomaly-classes",
    "Timeline": "timeline", "Timings": "timings", "Kill points": "kill-points", "Parameters": "parameters",
    "Stack and environment": "stack-and-environment", "Crashes": "crashes", "Audit it yourself": "audit-it-yourself",
    "Compare runs": "compare-runs",     # the page `harness compare --html` prints
}


def docs_href(anchor: str, page: str = DOCS_PAGE, folder=None) -> str | None:
    """Where the heading's link goes (see above), or None when no copy of the docs page can be reached."""
    base = os.environ.get("HARNESS_DOCS_URL", "").strip()
    if base:
        return f"{base.rstrip('/')}/{page}/#{anchor}"
    source = DOCS_DIR / f"{page}.md"
    if folder is None or not source.is_file():
        return None
    return f"{Path(os.path.relpath(source, Path(folder).resolve())).as_posix()}#{anchor}"


def doc_link(anchor: str, folder=None) -> str:
    """The line under a section heading that links to the docs entry explaining that section (`folder`: where
    the page is written, when known)."""
    where = f"{DOCS_PATH}{DOCS_PAGE}.md#{anchor}"
    href = docs_href(anchor, folder=folder)
    if href is None:
        return f"<p class=doc>explained in the harness repository's <code>{escape(where)}</code></p>"
    shown = href if os.environ.get("HARNESS_DOCS_URL", "").strip() else where
    return f"<p class=doc><a href='{escape(href)}' title='what this section shows'>{escape(shown)}</a></p>"


def section(title: str, key: str | None = None, attrs: str = "", folder=None) -> str:
    """A section heading (already escaped `title`) and, under it, the link to the docs entry on it."""
    return f"<h2{attrs}>{title}</h2>" + doc_link(SECTION_ANCHORS[key or title], folder)


from .bars import ABORTED, DUP, LOST, OK, PRED, axis_top, bar_chart, grouped_bars  # noqa: F401 - used by other pages
FAULT = "#f18f01"          # broker faults and freezes on the timeline


def collapsed(table_html: str, rows: int, what: str) -> str:
    """A long table (more than LONG_TABLE rows) folded under one summary line; a short one as it is."""
    if rows <= LONG_TABLE:
        return table_html
    return f"<details class=long><summary>{escape(what)}: {rows:,} rows (click to show)</summary>{table_html}</details>"


LONG_TABLE = 20


def run_chart(d: dict) -> str:
    """One run: each anomaly observed next to its prediction. Unmeasured numbers get no bar."""
    c, p = d["counts"], d["predicted"]
    ko = d.get("kafka_output")
    pk = ((p.get("kafka_output") or {}).get("read_uncommitted") or {}).get("duplicates")
    candidates = [("lost", "lost", c["lost"], p.get("lost"), LOST),
                  ("duplicated", "duplicates", c["duplicates"], p.get("duplicates"), DUP)]
    if "dead_lettered" in c:
        candidates.append(("dead-lettered", "dead_lettered", c["dead_lettered"], p.get("dead_lettered"), ABORTED))
    if d["stack"].get("dedupe_table"):
        candidates.append(("dedupe hits", "dedupe_hits", c.get("dedupe_hits"), p.get("dedupe_hits"), OK))
    if ko:
        candidates.append(("aborted copies", "aborted", ko["read_uncommitted"]["duplicates"], pk, ABORTED))
    groups = [(label, [(name, obs, color)] + ([(f"predicted-{name}", pred, PRED)] if pred is not None else []))
              for label, name, obs, pred, color in candidates if obs is not None]
    if not groups:
        return "<p class=muted>No chart: the audit could not measure these numbers.</p>"
    # The legend shows what the bars look like: each observed colour, then the grey of predictions.
    legend = [(label, color) for label, _n, obs, _p, color in candidates if obs is not None] + [("predicted", PRED)]
    return grouped_bars(groups, legend=legend)


def timeline(tl: dict, total: int, width: int = 900) -> str:
    """Progress (committed messages) over time, crashes as red ticks, restarts as teal ones, other faults
    (broker faults, a zombie's freeze) as amber bands from the fault until the node answered again."""
    prog = tl.get("progress") or []
    crashes, restarts = tl.get("crashes") or [], tl.get("restarts") or []
    faults = tl.get("faults") or []
    end = max([1.0] + [p[0] for p in prog] + crashes + restarts + [f.get("until", f["t"]) for f in faults])
    # Committed records can outnumber the payments (requests produced again under a used key): the top of
    # the chart is whichever is more.
    total = max([total] + [p[1] for p in prog if isinstance(p[1], (int, float))])
    h, top, left = 160, 15, 50
    x = lambda t: left + (width - left - 10) * t / end  # noqa: E731
    y = lambda v: top + h - h * v / max(1, total)  # noqa: E731
    parts = [f'<svg id="chart-timeline" role="img" aria-label="timeline" width="{width}" height="{h + 60}" '
             f'viewBox="0 0 {width} {h + 60}">',
             f'<line x1="{left}" y1="{top + h}" x2="{width - 10}" y2="{top + h}" stroke="#999"/>',
             f'<text x="{left - 6}" y="{top + 4}" text-anchor="end">{escape(total)}</text>',
             f'<text x="{left - 6}" y="{top + h}" text-anchor="end">0</text>',
             f'<text x="{width - 10}" y="{top + h + 24}" text-anchor="end">{end:.1f} s</text>']
    for f in faults:
        x0, x1 = x(f["t"]), x(f.get("until", f["t"]))
        parts.append(f'<rect class="fault" x="{x0:.1f}" y="{top}" width="{max(2.0, x1 - x0):.1f}" height="{h}" '
                     f'fill="{FAULT}" fill-opacity=".25"><title>{escape(f["fault"])} at {f["t"]:.1f} s</title></rect>')
    for t in crashes:
        parts.append(f'<line class="crash" x1="{x(t):.1f}" x2="{x(t):.1f}" y1="{top}" y2="{top + h}" stroke="{LOST}" stroke-opacity=".45"/>')
    for t in restarts:
        parts.append(f'<line class="restart" x1="{x(t):.1f}" x2="{x(t):.1f}" y1="{top + h}" y2="{top + h + 8}" stroke="{OK}"/>')
    if prog:
        pts = " ".join(f"{x(t):.1f},{y(v):.1f}" for t, v in prog)
        parts.append(f'<polyline id="progress" points="{pts}" fill="none" stroke="#1d1d1f" stroke-width="2"/>')
    parts.append(f'<text x="{left}" y="{top + h + 42}">committed messages over time; '
                 f'<tspan fill="{LOST}">crashes</tspan>, <tspan fill="{OK}">restarts</tspan>'
                 + (f', <tspan fill="{FAULT}">faults</tspan>' if faults else "") + '</text></svg>')
    return "".join(parts)


def table(rows, head=None, numeric=()) -> str:
    out = ["<table>"]
    if head:
        out.append("<tr>" + "".join(f"<th>{escape(str(h))}</th>" for h in head) + "</tr>")
    for row in rows:
        out.append("<tr>" + "".join(f'<td{" class=n" if i in numeric else ""}>{escape(plain(c))}</td>'
                                    for i, c in enumerate(row)) + "</tr>")
    out.append("</table>")
    return "".join(out)


def story_tables(story: dict) -> list[str]:
    """A fault's story: a pause's times (seconds after it) in a table of their own under that heading, the
    plain facts (planned-crash: how many crashes were planned; a zombie's state) under 'what | value'.
    Facts under the times' heading read as seconds after the fault."""
    times = story.get("times_since_pause") or {}
    facts = [(k.replace("_", " "), v) for k, v in story.items() if k != "times_since_pause"]
    out = [table([(k.replace("_", " "), f"{v:.3f} s") for k, v in times.items()],
                 ("event (seconds after the fault)", "value"))] if times else []
    return out + ([table(facts, ("what", "value"))] if facts else [])


def legend_block(r) -> str:
    """The scoreboard's legend: a one-line definition of each count it shows, and what the predicted column holds."""
    from .legend import PREDICTED_NOTE
    items = "".join(f"<dt>{escape(m)}</dt><dd>{escape(text)}</dd>" for m, text in r.legend())
    return (f"<details id=legend><summary>What each count means</summary><dl class=legend>{items}</dl>"
            f"<p class=muted>{escape(PREDICTED_NOTE)}</p></details>")


def when(run_id, sep: str = " (") -> str:
    """The date a run or suite id starts with (`20261207T...`: ' (2026-12-07)'), or '' for an id without one."""
    import re
    m = re.match(r"(\d{4})(\d{2})(\d{2})T", str(run_id or ""))
    if not m:
        return ""
    date = "-".join(m.groups())
    return f"{sep}{date})" if sep == " (" else f"{sep}{date}"


def page(title: str, body: str) -> str:
    return (f"<!doctype html><html lang=en><head><meta charset=utf-8><title>{escape(title)}</title>"
            f"<meta name=viewport content='width=device-width,initial-scale=1'><style>{CSS}</style></head>"
            f"<body>{body}</body></html>\n")


def render(r, folder=None) -> str:
    """report.html of `r`, a model.RunReport (the class is not imported: see writer.py), to be written in
    `folder` (when known: the audit command it suggests then finds it)."""
    d = r.data
    c = d["counts"]

    def _section(title: str, key: str | None = None, attrs: str = "") -> str:
        return section(title, key, attrs, folder)

    body = [f"<h1>{escape(d['experiment'])} <span id=verdict class='verdict {escape(d['verdict'])}'>"
            f"{escape(d['verdict'])}</span></h1>",
            f"<p class=muted>run {escape(d['run_id'])}{escape(when(d.get('run_id'), ', '))}</p>",
            f"<p id=summary class=summary>{escape(r.summary())}</p>"]
    if r.summary_detail():
        body.append("<ul id=summary-detail>" + "".join(f"<li>{escape(x)}</li>" for x in r.summary_detail()) + "</ul>")
    if d.get("proves"):
        body.append(f"<p><b>What it proves:</b> {escape(d['proves'])}<br><b>Order of steps:</b> {escape(d.get('steps', ''))}</p>")
    if d.get("lesson"):
        body.append(f'<p class="lesson"><b>Lesson:</b> {escape(d["lesson"])}</p>')
    if isinstance(d.get("source"), dict):
        src = d["source"]
        over = ", ".join(map(str, src.get("overridden") or [])) or "none"
        body.append(f"<p><b>From the experiment file</b> <code>{escape(str(src.get('file')))}</code> "
                    f"({escape(str(src.get('purpose')))}); flags that overrode it: {escape(over)}</p>")
    body += [_section("Scoreboard"), table(r.scoreboard(), r.SCOREBOARD_COLUMNS, numeric=(2, 3)), legend_block(r)]
    if d.get("dead_letter"):
        body.append("<ul id=dead-letters>" + "".join(f"<li>{escape(x)}</li>" for x in dead_letter_lines(
            d["dead_letter"], d["counts"].get("dead_lettered"))) + "</ul>")
    if isinstance(d.get("guesses"), dict):
        from .guesses import COLUMNS, board, score_line
        rows = board(d["guesses"].get("guesses") or {}, d)
        body += [_section("Your predictions"), f"<p>Recorded before the run started "
                 f"({escape(plain(d['guesses'].get('recorded_at')))}). {escape(score_line(rows))}</p>",
                 table(rows, COLUMNS, numeric=(1, 2))]
    if r.balance_rows():
        body += [_section("Balances"), table(r.balance_rows(), r.BALANCE_COLUMNS, numeric=(1, 2, 3, 4, 5, 6))]
    vd = d.get("verdict_detail") or {}
    if vd.get("failed") or vd.get("audit_errors") or vd.get("unplanned_deaths") or vd.get("killed_at_stop") \
            or vd.get("left_behind"):
        totals = vd.get("differing_totals") or {}
        body += [_section("What differed"), "<ul id=differed>"
                 + "".join(f"<li>{escape(str(f))}</li>" for f in vd.get("failed") or [])
                 + "".join(f"<li>{escape(k)} ids ({escape(totals.get(k, len(v)))}): {escape(', '.join(map(str, v)))}</li>"
                           for k, v in (vd.get("differing_ids") or {}).items())
                 + "".join(f"<li>audit error: {escape(e)} (the affected numbers are unknown)</li>"
                           for e in vd.get("audit_errors") or [])
                 + "".join(f"<li>unplanned death: {escape(x['worker'])} attempt {escape(x['attempt'])} "
                           f"(exit {escape(x['exit_code'])})</li>"
                           for x in (vd.get("unplanned_deaths") or [])[:10])
                 + "".join(f"<li>SIGKILLed by the stop: {escape(str(x['worker']))} attempt {escape(str(x['attempt']))} "
                           f"(pid {escape(str(x['pid']))})</li>" for x in (vd.get("killed_at_stop") or [])[:10])
                 + "".join(f"<li>crashed at its point just before the stop, no successor started: "
                           f"{escape(str(x['worker']))} attempt {escape(str(x['attempt']))}; its transaction "
                           f"{escape(str(x['transaction']))}</li>"
                           for x in (vd.get("unrestarted_at_stop") or [])[:10] if x.get("transaction"))
                 + "".join(f"<li>left behind by the consumer, ended: pid {escape(str(x['pid']))} "
                           f"<code>{escape(str(x['command']))}</code></li>" for x in (vd.get("left_behind") or [])[:10])
                 + "</ul>"]
    heads, rows, left_out = fault_table(d.get("faults") or [])
    if rows:
        body += [_section("Faults"), collapsed(table(rows, heads), len(rows), "faults")]
        if left_out:
            body.append(f"<p>({left_out:,} more in report.json)</p>")
    if d.get("consumer"):
        from . import consumer
        cs = d["consumer"]
        body += [_section("Your consumer"), table(consumer.facts(cs))]
        body += [f"<p><b>Warning:</b> {escape(w)}.</p>" for w in cs.get("warnings") or []]
        if cs.get("witnesses"):
            body += ["<h3>Witnesses (times since the workers started)</h3>", table(
                consumer.witness_rows(cs), ("id", "what", "slot / partition", "effects applied at", "kills"))]
        if cs.get("kills"):
            kills = consumer.kill_rows(cs)[:200]
            body += ["<h3>Kills</h3>", collapsed(table(kills, consumer.KILL_HEADS, numeric=(0, 2, 3, 4, 7, 8, 9)),
                                                 len(kills), "kills")]
    for name, story in (d.get("fault_details") or {}).items():
        body += [_section(f"Fault: {escape(name)}", "Fault"), *story_tables(story)]
    if d["predicted"].get("note"):
        body.append(f"<p class=muted>{escape(d['predicted']['note'])}</p>")
    if d["predicted"].get("evidence"):
        offs = lambda m: ", ".join(f"{p}: {o}" for p, o in m.items()) or "none"   # noqa: E731
        ev = d["predicted"]["evidence"][:200]
        body += [_section("What each kill cost (from the evidence)", "What each kill cost"), collapsed(table(
            [(e["worker"], e["attempt"], offs(e["last_applied"]), offs(e["resumed_from"]), e["redelivered"],
              e["skipped"]) for e in ev],
            ("worker", "attempt", "last applied (partition: offset)", "successor resumed from", "redelivered",
             "skipped"), numeric=(1, 4, 5)), len(ev), "what each kill cost")]
    body += [_section("Anomalies, observed and predicted"), run_chart(d)]
    from .store_chart import run_store_chart
    if run_store_chart(d):
        body += [_section("Each store's count", "Each store"), run_store_chart(d)]
    classes = r.anomaly_class_rows()
    if classes:
        body += [_section("Anomaly classes (Jepsen's names)", "Anomaly classes"), f"<p>{escape(r.history_line())}</p>",
                 table(classes, r.ANOMALY_COLUMNS, numeric=(2,))]
    body += [_section("Timeline"), timeline(d.get("timeline") or {}, c["sent"] or 0)]
    t = d["timings"]
    body += [_section("Timings"), table([
        ("wall seconds", fmt(t["wall_seconds"])), ("messages per second", fmt(t.get("messages_per_second"))),
        ("restart median (s)", fmt(t.get("restart_median_seconds"))), ("restart max (s)", fmt(t.get("restart_max_seconds")))]
        + [(f"{k.replace('_', ' ')} (s)", fmt(v)) for k, v in (t.get("phases") or {}).items()],
        numeric=(1,))]
    if d.get("kill_points"):
        body += [_section("Kill points of this experiment", "Kill points"), table(
            [(k["name"], k["after"], k["before"] or "(last step)", k["says"]) for k in d["kill_points"]],
            ("point", "after", "before", "a crash here"))]
    body += [_section("Parameters"), table(r.parameter_rows())]
    body += [_section("Stack and environment"), table(list(d["stack"].items()) + list(d["environment"].items())
                                                          + r.client_rows())]
    if d["crashes"]:
        body += [_section(f"Crashes ({len(d['crashes'])})", "Crashes"), collapsed(table(
            [(i, cr["point"], cr.get("message_id") or "", cr.get("worker") or "", fmt(cr.get("partition")),
              fmt(cr.get("offset")), len(cr.get("unacked") or []), len(cr.get("acked_unapplied") or []),
              len(cr.get("produced") or []), fmt(cr.get("restart_seconds")),
              "" if cr.get("read_committed_stall_seconds") is None else fmt(cr["read_committed_stall_seconds"]))
             for i, cr in enumerate(d["crashes"][:200], 1)],
            ("#", "point", "message", "worker", "partition", "offset", "unacked", "acked, unapplied", "produced",
             "restart s", "stall s"), numeric=(0, 4, 5, 6, 7, 8, 9, 10)), min(len(d["crashes"]), 200), "crashes")]
    body += [_section("Audit it yourself", attrs=" id=audit"),
             f"<p>The run's topics and tables stay until <code>harness clean {escape(d['run_id'])}</code>. "
             "With the stack up:</p>",
             "<pre class=commands>" + "".join(f"<span class=muted># {escape(what)}</span>\n{escape(cmd)}\n"
                                                for what, cmd in commands(d, folder)) + "</pre>"]
    return page(f"{d['experiment']} {d['verdict']}{when(d.get('run_id'))}", "".join(body))
