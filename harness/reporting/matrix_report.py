"""matrix.md and matrix.html: one row per experiment, one column per Kafka release.

Rendered from matrix.json alone (harness/run/matrix_runner.py writes it), so the three
never disagree. Each cell is the run's verdict and its key figures; a row
whose figures differ between releases is marked, and each column names what
the broker of that release said about itself (metadata.version, and the
transaction protocol it finalized: transaction.version 2 is KIP-890's epoch
bump per transaction). Every value is escaped: a matrix.json may come from
someone else.
"""

from __future__ import annotations

from pathlib import Path

from . import html as h
from ..core.escape import href, md
from ..core.escape import html as escape
from .shared import fmt


NOT_APPLICABLE = "n/a (takes no --client)"
NO_PROTOCOL = "n/a (takes no --group-protocol)"
NO_STREAMS_PROTOCOL = "n/a (takes no --streams-protocol)"
FLAGS = ("--client", "--group-protocol", "--streams-protocol")


def keys(summary: dict) -> list[str]:
    """The columns in order: a release (Python workers, classic groups), or `<release> java`, `<release>
    consumer`, `<release> java consumer`, `<release> streams` (matrix_columns.column_key)."""
    return summary.get("keys") or summary["releases"]


def cell_of(e: dict, key: str) -> str:
    if key in (e.get("not_applicable") or ()):
        flag = (e.get("not_applicable_because") or {}).get(key)
        if flag in FLAGS:
            return f"n/a (takes no {flag})"
        words = key.split(" ")           # a matrix.json of before the flag was named
        return NOT_APPLICABLE if "java" in words else NO_STREAMS_PROTOCOL if "streams" in words else NO_PROTOCOL
    return cell_text(e["cells"].get(key))


def cell_text(c: dict | None) -> str:
    """e.g. "as-predicted: dup 0, lost 100" or "as-predicted: rc dup 0, rc lost 0, dup 100"."""
    if not c:
        return "not run"
    parts = []
    if c.get("read_committed_duplicates") is not None:
        parts.append(f"rc dup {fmt(c['read_committed_duplicates'])}, rc lost {fmt(c['read_committed_lost'])}")
    parts.append(f"dup {fmt(c.get('duplicates'))}, lost {fmt(c.get('lost'))}")
    if c.get("restart_median_seconds") is not None:
        parts.append(f"restart {fmt(c['restart_median_seconds'])} s")
    return f"{c.get('verdict', 'failed')}: " + ", ".join(parts)


def differs_note(e: dict) -> str:
    """How a row that differs is marked: when every cell is as-predicted, its runs' numbers depend on timing
    (auto-commit's interval, Streams' commits) and each run predicted its own from its crash log."""
    if not e.get("differs"):
        return ""
    cells = list(e["cells"].values())
    if cells and all(c and c.get("verdict") == "as-predicted" for c in cells):
        return "differs (each as predicted from its own crash log)"
    return "differs"


def suite_line(summary: dict) -> str:
    return "harness suite " + (" ".join(summary.get("suite_args") or []) or "(its defaults)")


def known(c: dict, key: str) -> str:
    """A column's value as text, 'unknown' when it was not read (absent or null: never Python's None)."""
    v = c.get(key)
    return "unknown" if v is None else str(v)


def column_heads(summary: dict) -> list[str]:
    return [f"Kafka {c.get('release')}{client_text(c)} (metadata.version {known(c, 'metadata_version')}, "
            f"transaction.version {known(c, 'transaction_version')})" for c in summary["columns"]]


def client_text(c: dict) -> str:
    return (", Java client" if c.get("client") == "java" else "") + (
        ", consumer group protocol (KIP-848)" if c.get("group_protocol") == "consumer" else "") + (
        ", Kafka Streams' streams group protocol (KIP-1071)" if c.get("streams_protocol") == "streams" else "")


def absent_lines(summary: dict) -> list[str]:
    """The columns the matrix left out because their release lacks the protocol, a sentence each."""
    return [f"{a.get('why')}: no {a.get('key')} column" for a in summary.get("absent_columns") or ()
            if isinstance(a, dict)]


def render_md(summary: dict) -> str:
    releases, cols = summary["releases"], keys(summary)
    heads = column_heads(summary)
    out = [f"# Kafka releases side by side: {md(', '.join(releases))}", "",
           f"The same suite (`{md(suite_line(summary))}`) on each release, one stack after another, with the same "
           f"seed. Rows marked **differs** have other figures in some column (release, client or group protocol); where every cell is "
           f"as-predicted, "
           f"the experiment's numbers depend on timing and each run predicted its own.", "",
           "| experiment | " + " | ".join(md(x) for x in heads) + " |",
           "| --- |" + " --- |" * len(heads)]
    for e in summary["experiments"]:
        name = md(e["experiment"]) + (f" **{differs_note(e)}**" if e.get("differs") else "")
        out.append(f"| {name} | " + " | ".join(md(cell_of(e, k)) for k in cols) + " |")
    out += ["", "rc: the output topic as read_committed readers see it; dup and lost: effects in the ledger "
            "when the experiment has one, else output records; restart: the median from a kill to the "
            "replacement's first record.", ""]
    for c in summary["columns"]:
        what = f"exit {fmt(c.get('exit_code'))}, {fmt(c.get('seconds'))} s"
        out.append(f"- Kafka {md(c.get('release'))}{md(client_text(c))}: {md(what)}"
                   + (f"; {md(c['error'])}" if c.get("error") else ""))
    out += [f"- {md(line)}" for line in absent_lines(summary)]
    out.append(f"\nMatrix wall time {fmt(summary.get('wall_seconds'))} s; exit status {fmt(summary.get('exit_code'))}.")
    return "\n".join(out) + "\n"


def render_html(summary: dict, folder: Path | None = None) -> str:
    releases, cols = summary["releases"], keys(summary)
    rows = ["<table id=matrix><tr><th>experiment</th>" +
            "".join(f"<th>{escape(x)}</th>" for x in column_heads(summary)) + "</tr>"]
    for e in summary["experiments"]:
        mark = f" <b>{escape(differs_note(e))}</b>" if e.get("differs") else ""
        cells = []
        for k in cols:
            c = e["cells"].get(k)
            text = escape(cell_of(e, k))
            link = href(c["report"][:-len("report.json")] + "report.html", folder) \
                if c and isinstance(c.get("report"), str) and c["report"].endswith("report.json") else None
            verdict = "na" if k in (e.get("not_applicable") or ()) else escape((c or {}).get("verdict", "failed"))
            body = f'<a href="{escape(link)}">{text}</a>' if link else text
            cells.append(f"<td class='{verdict}'>{body}</td>")
        style = " style='background:#fff8e1'" if e.get("differs") else ""
        rows.append(f"<tr{style}><td>{escape(e['experiment'])}{mark}</td>" + "".join(cells) + "</tr>")
    rows.append("</table>")
    body = [f"<h1>Kafka releases side by side: {escape(', '.join(releases))}</h1>",
            f"<p class=summary>The same suite ({escape(suite_line(summary))}) on each release, one stack after "
            f"another, with the same seed; highlighted rows have other figures in some column, release, client or group protocol (where "
            f"every cell "
            f"is as-predicted, the numbers depend on timing and each run predicted its own).</p>",
            "<div class=wide>", *rows, "</div>",
            "<p class=muted>rc: the output topic as read_committed readers see it; dup and lost: effects in the "
            "ledger when the experiment has one, else output records; restart: the median from a kill to the "
            "replacement's first record.</p>",
            "<h2>Releases</h2>",
            h.table([(f"{c.get('release')}{client_text(c)}", known(c, "metadata_version"), known(c, "transaction_version"),
                      fmt(c.get("exit_code")), fmt(c.get("seconds")), c.get("error", ""))
                     for c in summary["columns"]],
                    ("release", "metadata.version", "transaction.version", "suite exit", "seconds", "error")),
            *[f"<p class=muted>{escape(line)}</p>" for line in absent_lines(summary)]]
    return h.page(f"matrix {', '.join(releases)}", "".join(body))


def write_matrix(folder: Path, summary: dict) -> Path:
    from ..core.safefile import write_text
    text, page = render_md(summary), render_html(summary, folder)      # render both before writing either
    for name, content in (("matrix.md", text), ("matrix.html", page)):
        write_text(Path(folder) / name, content)
    return Path(folder)
