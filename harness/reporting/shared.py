"""What the report model and every rendering share: how a value is written, and which faults are crashes.

`fmt` (a number with thousands separators, None as "unknown") and
`CRASH_FAULTS` are read by model.py (the scoreboard), by the renderings
(html.py, markdown.py, consumer.py, suite.py), by the comparison and by the
bench's scale report. They live in this small module below all of them, so a
rendering imports them without importing model.py, and model.py never has to
import a rendering.
"""

# Faults whose occurrences are the report's `crashes`; the others get their own rows and sections.
CRASH_FAULTS = ("planned-crash", "random-kill", "kill-every")


def fmt(v) -> str:
    if v is None:
        return "unknown"
    if isinstance(v, float):
        return f"{v:,.2f}"
    if isinstance(v, int):
        return f"{v:,}"
    return str(v)
