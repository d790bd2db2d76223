"""A comparison as a person or a program reads it: an aligned text table, a Markdown table, or JSON.

Apart from compare.py, which computes the rows once, so that every rendering
shows the same numbers. Labels and experiment names come from files someone
else may have written, so every cell is escaped for where it lands (escape.term
for a terminal, escape.md for Markdown); the JSON is strict (never Infinity or
NaN).
"""

from __future__ import annotations

import json

from .compare import Comparison
from ..escape import md, term
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
    """Header and formatted cells shared by text and Markdown; `-` = experiment not in that target."""
    two = len(c.labels) > 1
    head = ["experiment", "metric", *c.labels] + (["delta", "delta %"] if two else [])
    body, prev = [], None
    for r in c.rows:
        cells = [r.experiment if r.experiment != prev else "", r.metric]
        cells += [fmt(v) if here else "-" for v, here in zip(r.values, r.present)]
        if two:
            if r.delta is not None:
                pct = "n/a" if r.delta_pct is None else ("0.0%" if r.delta_pct == 0 else f"{r.delta_pct:+.1f}%")
                cells += [signed(r.delta), pct]
            else:
                strings = all(isinstance(v, str) for v in r.values)
                cells += ["changed" if strings and r.changed else "", ""]
        body.append(cells)
        prev = r.experiment
    return head, body


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
    if len(c.labels) > 1:
        out.append(f"(delta: {term(c.labels[-1])} minus {term(c.labels[0])})")
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
    if len(c.labels) > 1:
        out += ["", f"Delta: {md(c.labels[-1])} minus {md(c.labels[0])}."]
    return "\n".join(out) + "\n"


def to_json(c: Comparison, failures: list[str] | None = None) -> str:
    data = {"targets": c.labels, "warnings": c.warnings,
            "rows": [{"experiment": r.experiment, "metric": r.metric,
                      "values": [v if here else None for v, here in zip(r.values, r.present)],
                      "present": r.present, "delta": r.delta, "delta_pct": r.delta_pct, "changed": r.changed}
                     for r in c.rows]}
    if failures is not None:
        data["failures"] = failures
    return json.dumps(data, indent=2, allow_nan=False) + "\n"   # strict JSON: never Infinity or NaN
