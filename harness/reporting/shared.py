"""What the report model and every rendering share: how a value is written, and which faults are crashes.

`fmt` (a number with thousands separators, None as "unknown"), `is_number`
(a JSON number, never a bool), `CRASH_FAULTS` and the fault table are read by
the report model (run_report.py, build.py), by the renderings of runs, suites
and matrices, by the comparison, by the suite runner and by the benches'
reports. They live in this small module below all of them, so a rendering
imports them without importing the model, and the model never has to import a
rendering.
"""

# Faults whose occurrences are the report's `crashes`; the others get their own rows and sections.
CRASH_FAULTS = ("planned-crash", "random-kill", "kill-every")


def is_number(v) -> bool:
    """A JSON number (a bool is not one)."""
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def fmt(v) -> str:
    if v is None:
        return "unknown"
    if isinstance(v, float):
        return f"{v:,.2f}"
    if isinstance(v, int):
        return f"{v:,}"
    return str(v)


def plain(v) -> str:
    """A value as a person reads it in a table cell, never a Python repr: None as "none", a bool as yes/no,
    a list as its items joined by commas, a dict as `key: value` pairs, a number with separators."""
    if v is None:
        return "none"
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, (list, tuple)):
        return ", ".join(plain(x) for x in v) or "none"
    if isinstance(v, dict):
        return "; ".join(f"{k}: {plain(x)}" for k, x in v.items()) or "none"
    return fmt(v)


# The Faults table's columns after fault, time and target: (a key of a fault's entry, its heading), each shown
# when any row has it. A row without the key leaves its cell empty; a key present with no value is "unknown".
FAULT_COLUMNS = (("step", "step"), ("message_id", "payment"), ("paused_seconds", "paused s"),
                 ("records_held", "records held"), ("next_abort", "after waking"), ("aborted_transactions", "aborted transactions"),
                 ("records", "records"), ("exact", "exact"),
                 ("out_seconds", "out s"), ("until_answering_seconds", "answering after s"),
                 ("unknown_outcome_transactions", "outcome unknown"),
                 ("aborted_records_at_most", "aborted records at most"),
                 ("read_committed_stall_seconds", "read_committed stall s"),
                 ("state", "state"), ("frozen_seconds", "frozen s"), ("replaced_by", "its replacement"),
                 ("late_write", "late write done"))
FAULT_ROWS_SHOWN = 50


def fault_table(faults: list[dict]) -> tuple[list[str], list[list[str]], int]:
    """(headings, rows of text cells, rows left out) of the faults that are not crashes, for md and html alike."""
    others = [f for f in faults if f.get("fault") not in CRASH_FAULTS]
    cols = [(k, h) for k, h in FAULT_COLUMNS if any(k in f for f in others)]

    def cell(f: dict, key: str) -> str:
        if key not in f:
            return ""
        v = f[key]
        if key == "next_abort" and v is None:
            return "none"                # the worker met no abort or fencing after waking
        if isinstance(v, dict):          # what a woken worker met next: its event and why
            return f"{v.get('event')}: {str(v.get('reason') or '')[:80]}"
        if isinstance(v, bool):
            return "yes" if v else "no"
        return fmt(v)
    rows = [[str(f.get("fault")), fmt(f.get("time")) if not isinstance(f.get("time"), float) else f"{f['time']:.3f}",
             str(f.get("target")), *[cell(f, k) for k, _h in cols]] for f in others[:FAULT_ROWS_SHOWN]]
    return ["fault", "time", "target", *[h for _k, h in cols]], rows, max(0, len(others) - FAULT_ROWS_SHOWN)


def dead_letter_lines(dl: dict, total) -> list[str]:
    """A queues run's dead letters, in plain words (each renderer escapes them): each payment the broker wrote to the
    run's dead-letter topic instead of losing it, where it went and the delivery count it reached (its headers)."""
    out = [f"dead-lettered ({fmt(total)}), in {dl['topic']} ({fmt(dl['records'])} record(s) there): "
           + (", ".join(f"{x['message_id']} (input {x['partition']}/{x['offset']} -> dead-letter offset "
                        f"{x['dead_letter_offset']}, delivery count {fmt(x['delivery_count'])}: {x['reason'] or 'no reason'})"
                        for x in dl["dead_lettered"]) or "none")]
    if dl.get("error"):
        out.append(f"dead-letter topic unreadable: {dl['error']}")
    if dl.get("awaited_missing"):
        out.append("archived or REJECTed with no dead letter after the audit's wait (lost): "
                   + ", ".join(f"{p}/{o}" for p, o in dl["awaited_missing"]))
    return out
