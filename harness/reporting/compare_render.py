"""A comparison as a person or a program reads it: an aligned text table, a Markdown table, or JSON.

Apart from comparison.py, which computes the rows once, so that every rendering
shows the same numbers. Labels and experiment names come from files someone
else may have written, so every cell is escaped for where it lands (escape.term
for a terminal, escape.md for Markdown); the JSON is strict (never Infinity or
NaN).
"""

from __future__ import annotations

import json

from .comparison import Comparison
from ..core.escape import md, term
from .shared import fmt


def signed(v) -> str:
    """A change as the tables write it: +1,000, -2.50, 0."""
    if v is None:
        return ""
    if v == 0:
        return "0"
    s = fmt(v)
    return s if s.startswith("-") else "+" + s


def _cells(c: Comparison) -> tuple[list[str], list[list[str]]]:
    """Header and formatted cells shared by text, Markdown and HTML: each target after the first followed by
    its delta against the first (signed, and in percent); `-` = experiment not in that target, `n/a` = the
    metric does not apply to that run (no ledger, no output topic), `unknown` = it applies but was not
    measured."""
    head = ["experiment", "metric", c.labels[0]]
    for lab in c.labels[1:]:
        head += [lab, "delta", "delta %"]
    body, prev = [], None
    for r in c.rows:
        shown = [("-" if not here else "n/a" if v is None and not ok else fmt(v))
                 for v, here, ok in zip(r.values, r.present, r.applies or [True] * len(r.values))]
        cells = [r.experiment if r.experiment != prev else "", r.metric, shown[0]]
        for i in range(1, len(c.labels)):
            d = r.deltas[i] if i < len(r.deltas) else None
            if d is not None:
                pct = "from 0" if d[1] is None else ("0.0%" if d[1] == 0 else f"{d[1]:+.1f}%")
                cells += [shown[i], signed(d[0]), pct]
            else:
                pair = [r.values[0], r.values[i]]
                strings = all(isinstance(v, str) for v in pair) and all((r.present[0], r.present[i]))
                cells += [shown[i], "changed" if strings and pair[0] != pair[1] else "", ""]
        body.append(cells)
        prev = r.experiment
    return head, body


def delta_note(c: Comparison) -> str:
    """What the deltas are: each target against the first (never against its neighbour)."""
    if len(c.labels) < 2:
        return ""
    if len(c.labels) == 2:
        return f"delta: {c.labels[1]} minus {c.labels[0]}"
    return f"each delta: its target minus the first target, {c.labels[0]} (not the target before it)"


def legend(c: Comparison) -> list[tuple[str, str]]:
    """(metric, meaning) of every metric the comparison shows, rc. and ru. written out."""
    from .comparison import MEANINGS
    shown = list(dict.fromkeys(r.metric for r in c.rows))
    return [(m, MEANINGS[m]) for m in shown if m in MEANINGS] + \
        [("n/a", "the metric does not apply to that run"), ("unknown", "it applies, but was not measured"),
         ("-", "the experiment is not in that target")]


def to_text(c: Comparison) -> str:
    """An aligned plain table: names left, numbers right. Warnings are not included (print them apart).
    Every cell is shown for a terminal (escape.term): a name holding ESC or a newline prints as text."""
    head, body = _cells(c)
    head, body = [term(x) for x in head], [[term(x) for x in row] for row in body]
    widths = [max(len(row[i]) for row in [head] + body) for i in range(len(head))]

    def line(cells):
        padded = (cell.ljust(w) if i < 2 else cell.rjust(w) for i, (cell, w) in enumerate(zip(cells, widths)))
        return "  ".join(padded).rstrip()
    out = [line(head), "  ".join("-" * w for w in widths)] + [line(row) for row in body]
    if delta_note(c):
        out.append(f"({term(delta_note(c))})")
    out += [f"  {term(m)}: {term(text)}" for m, text in legend(c)]
    return "\n".join(out) + "\n"


def to_markdown(c: Comparison) -> str:
    """A Markdown table (warnings first, for pasting); every cell, label and warning escaped (escape.md)."""
    head, body = _cells(c)
    out = []
    if c.warnings:
        out += [f"> warning: {md(w)}  " for w in c.warnings] + [""]
    out.append("| " + " | ".join(md(x) for x in head) + " |")
    out.append("| " + " | ".join("---" if i < 2 else "---:" for i in range(len(head))) + " |")
    out += ["| " + " | ".join(md(cell) for cell in row) + " |" for row in body]
    if delta_note(c):
        note = delta_note(c)
        out += ["", md(note[0].upper() + note[1:]) + "."]
    out += [""] + [f"- **{md(m)}**: {md(text)}" for m, text in legend(c)]
    return "\n".join(out) + "\n"


def to_html(c: Comparison, when: str = "") -> str:
    """One self-contained page: the warnings, the table (wide tables scroll inside their box), what the
    deltas are, and every metric written out."""
    from . import html as h
    from ..core.escape import html as escape
    head, body = _cells(c)
    title = "compare " + " vs ".join(c.labels) + (f" ({when})" if when else "")
    numeric = tuple(range(2, len(head)))
    parts = [f"<h1>{escape(title)}</h1>", h.doc_link(h.SECTION_ANCHORS["Compare runs"])]
    parts += [f"<p class=muted>warning: {escape(w)}</p>" for w in c.warnings]
    parts += ["<div class=wide>", h.table(body, head, numeric=numeric), "</div>"]
    if delta_note(c):
        parts.append(f"<p>{escape(delta_note(c))}.</p>")
    parts.append("<dl class=legend>" + "".join(f"<dt>{escape(m)}</dt><dd>{escape(t)}</dd>" for m, t in legend(c))
                 + "</dl>")
    return h.page(title, "".join(parts))


def to_json(c: Comparison, failures: list[str] | None = None) -> str:
    data = {"targets": c.labels, "warnings": c.warnings, "deltas_against": c.labels[0],
            "rows": [{"experiment": r.experiment, "metric": r.metric,
                      "values": [v if here else None for v, here in zip(r.values, r.present)],
                      "present": r.present, "applies": r.applies, "delta": r.delta, "delta_pct": r.delta_pct,
                      "deltas": [list(d) if d is not None else None for d in r.deltas], "changed": r.changed}
                     for r in c.rows]}
    if failures is not None:
        data["failures"] = failures
    return json.dumps(data, indent=2, allow_nan=False) + "\n"   # strict JSON: never Infinity or NaN
