"""Bar charts as inline SVG: bars grouped by label, each labelled with its value, and an axis that breaks
when one value would flatten the rest.

Apart from html.py so that every chart-drawing module (the run page, the store charts, the suite page and
the benches' reports) draws with the same function without importing the pages that use it.
"""

import math

from ..core.escape import html as escape
from .shared import fmt, is_number

LOST, DUP, OK, ABORTED, PRED = "#d1495b", "#edae49", "#00798c", "#8d6cab", "#c9ced6"


def bar_chart(groups: list[tuple[str, int, int]], width: int = 640) -> str:
    """Grouped bars of lost and duplicated effects: (label, lost, duplicates) per experiment."""
    return grouped_bars([(label, [("lost", lost, LOST), ("duplicates", dup, DUP)]) for label, lost, dup in groups],
                        legend=[("lost", LOST), ("duplicated", DUP)], width=width)


def grouped_bars(groups: list[tuple[str, list[tuple[str, int, str]]]], legend: list[tuple[str, str]],
                 width: int = 640, chart_id: str = "chart-anomalies") -> str:
    """Bars grouped by label; each bar is (class name, value, color). Values label their bars; a value that
    is not a number (unknown: not measured) gets a '?' and no bar."""
    h, top, left, bar = 220, 20, 50, 22
    peak, broken = axis_top([v for _, bars in groups for _, v, _ in bars])
    most = max([1] + [len(bars) for _, bars in groups])
    # Wide enough for the longest group label too (about 7 px a character at 12 px), so labels never touch;
    # with many groups the labels are slanted instead, and the chart shrinks to the page (max-width).
    natural, need = max(70, (bar + 2) * most + 30), 7 * max([0] + [len(label) for label, _ in groups]) + 16
    slant = need > natural and len(groups) > 6
    step = natural if slant else max(natural, need)
    below = round(0.6 * need) if slant else 0         # room for the slanted labels
    width = max(width, left + step * len(groups) + 20)
    tall = h + 60 + below + (20 if broken else 0)       # the axis note has a line of its own, under the legend
    parts = [f'<svg id="{chart_id}" role="img" aria-label="lost and duplicated effects" style="max-width:100%;height:auto" '
             f'width="{width}" height="{tall}" viewBox="0 0 {width} {tall}">']
    for frac in ((0, 1) if peak == 1 else (0, 0.5, 1)):
        y = top + h - frac * h
        parts.append(f'<line x1="{left}" x2="{width - 10}" y1="{y}" y2="{y}" stroke="#eee"/>'
                     f'<text x="{left - 6}" y="{y + 4}" text-anchor="end">{round(peak * frac)}</text>')
    for i, (label, bars) in enumerate(groups):
        x = left + i * step + 10
        for j, (name, val, color) in enumerate(bars):
            bx = x + j * (bar + 2)
            if not is_number(val):      # not measured: no bar (a 0 would claim it was), a label that says so
                parts.append(f'<text class="bar-unknown" data-group="{escape(label)}" data-name="{escape(name)}" '
                             f'x="{bx + bar / 2}" y="{top + h - 4}" text-anchor="middle">?<title>{escape(label)} '
                             f'{escape(name)}: unknown (not measured)</title></text>')
                continue
            bh = h * min(val, peak) / peak
            parts.append(f'<rect class="bar-{escape(name)}" data-value="{escape(val)}" data-group="{escape(label)}" '
                         f'x="{bx}" y="{top + h - bh:.1f}" width="{bar}" height="{bh:.1f}" fill="{escape(color)}">'
                         f'<title>{escape(label)} {escape(name)}: {escape(val)}</title></rect>'
                         f'<text x="{bx + bar / 2}" y="{top + h - bh - 4:.1f}" text-anchor="middle">{escape(fmt(val))}</text>')
            if val > peak:      # cut: a white zigzag across the bar says its top is not to scale
                parts.append(f'<path class="axis-break" d="M{bx - 2} {top + 22} l{(bar + 4) / 2} -6 l{(bar + 4) / 2} 6 '
                             f'v6 l-{(bar + 4) / 2} -6 l-{(bar + 4) / 2} 6 z" fill="#fff"/>')
        cx = x + (bar + 2) * len(bars) / 2
        turn = f' transform="rotate(-35 {cx} {top + h + 16})"' if slant else ""
        parts.append(f'<text class="group-label" x="{cx}" y="{top + h + 16}" '
                     f'text-anchor="{"end" if slant else "middle"}"{turn}>{escape(label)}</text>')
    lx = left
    if broken:
        # Under the legend, not above the bars, where it covered the label of a cut bar near the right end.
        parts.append(f'<text class="axis-note" x="{left}" y="{h + 75 + below}">bars above '
                     f'{fmt(peak)} are cut (axis broken); each bar is labelled with its value</text>')
    for name, color in legend:
        parts.append(f'<rect class="legend" data-label="{escape(name)}" x="{lx}" y="{h + 45 + below}" width="12" '
                     f'height="12" fill="{escape(color)}"/>'
                     f'<text x="{lx + 16}" y="{h + 55 + below}">{escape(name)}</text>')
        lx += 30 + 8 * len(name)
    parts.append("</svg>")
    return "".join(parts)


def axis_top(values: list) -> tuple[int, bool]:
    """The top of a bar chart's axis and whether it is broken. Values more than 4 times the typical one (the
    lower median of the positive values) would flatten every other bar: a suite's 2,981 and 835 beside its
    hundred-odd 100s, or one 3,796 beside them. Then the axis stops at 1.5 times the largest value that is not
    (or, with one outlier, its next value) and the taller bars are cut, each labelled. Even, so the ticks at
    0, top/2 and top are whole numbers."""
    positive = sorted(v for v in values if is_number(v) and v > 0)
    top, broken = (positive[-1] if positive else 1), False
    if len(positive) > 1:
        typical = positive[(len(positive) - 1) // 2]
        if positive[-1] > 4 * typical:
            top, broken = math.ceil(1.5 * max(v for v in positive if v <= 4 * typical)), True
    return (top if top % 2 == 0 or top == 1 else top + 1), broken
