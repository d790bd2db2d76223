"""The suite's terminal table: whole names in a CI log (off a terminal), the terminal's width on one."""

import io

from rich.console import Console

from harness.cli.commands.suite import suite_table
from harness.cli.ui import print_table
from harness.reporting.suite_report import rows
from tests.unit.sample_report import sample

NAMES = ["key-check-then-insert", "eos-boundary", "offset-before"]


def summary() -> dict:
    runs = []
    for name in NAMES:
        d = sample(name, lost=123_456, dups=234_567)
        d["counts"]["sent"] = 1_000_000
        d["ledger"] = {"expected_total": 100_000_000, "actual_total": 111_111_100}
        runs.append({"experiment": name, "verdict": "as-predicted", "seconds": 1234.5, "counts": d["counts"],
                     "ledger": d["ledger"], "crashes": 1_234,
                     "kafka_output": {"read_committed": {"records": 999_001, "duplicates": 0, "lost": 999},
                                      "read_uncommitted": {"records": 1_000_777, "duplicates": 777, "lost": 0}}})
    return {"experiments": runs}


def printed(**console) -> str:
    out = io.StringIO()
    print_table(Console(file=out, **console), suite_table("20261207T101500", summary()))
    return out.getvalue()


def test_off_a_terminal_the_table_is_as_wide_as_its_content():
    text = printed(width=80)                 # what rich assumes for a file or a pipe
    assert "…" not in text
    for row in rows(summary()):
        for cell in (row[0], row[6], row[7], row[10]):
            assert cell in text, (cell, text)
    assert max(map(len, text.splitlines())) > 80, "the content needs more than 80 columns: the test would not tell"


def test_on_a_terminal_the_table_keeps_the_terminals_width():
    text = printed(width=80, force_terminal=True, color_system=None)
    assert max(map(len, text.splitlines())) <= 80 and "…" in text
