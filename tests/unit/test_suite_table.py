"""The suite's terminal table: whole cells in a CI log (off a terminal) and on an 80-column terminal, each
count under the store it was read from (the ledger's and the output topic's side by side)."""

import io

from rich.console import Console

from harness.cli.commands.suite import suite_table
from harness.cli.ui import print_table
from harness.reporting.suite_report import store_cells
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
    for r in summary()["experiments"]:
        for cell in (r["experiment"], *store_cells(r), r["verdict"]):
            assert cell in text, (cell, text)


def test_on_an_80_column_terminal_no_cell_is_cut():
    """The default suite on an 80-column terminal showed 'as-predic…', '22,000 / 20,…' and a lost column of
    '…' alone: the counts the suite is run for, cut."""
    text = printed(width=80, force_terminal=True, color_system=None)
    assert max(map(len, text.splitlines())) <= 80 and "…" not in text, text
    for r in summary()["experiments"]:
        row = next(line for line in text.splitlines() if line.strip().startswith(r["experiment"]))
        assert row.split()[1:6] == [*store_cells(r), "as-predicted"], row
    assert "ledger: effects in the database's ledger table; topic: records of the output topic" in " ".join(
        text.split())


def test_each_store_has_its_own_column_and_a_run_without_one_says_n_a():
    """eos-boundary's lesson in the terminal: the ledger's 100 duplicates beside the topic's 0; eos writes no
    ledger (n/a there, its counts are the topic's); a run that left no report is unknown, not n/a."""
    eos = {"experiment": "eos", "verdict": "as-predicted", "counts": {"duplicates": 0, "lost": 0},
           "ledger": {"expected_total": 100_000, "actual_total": None},
           "kafka_output": {"read_committed": {"records": 1000, "duplicates": 0, "lost": 0}}}
    boundary = {**eos, "experiment": "eos-boundary", "counts": {"duplicates": 100, "lost": 0},
                "ledger": {"expected_total": 100_000, "actual_total": 110_000}}
    offset = {**boundary, "experiment": "offset-after", "kafka_output": None}
    failed = {"experiment": "dedupe", "verdict": "failed", "report": None}
    assert store_cells(eos) == ("n/a", "n/a", "0", "0")
    assert store_cells(boundary) == ("100", "0", "0", "0")
    assert store_cells(offset) == ("100", "0", "n/a", "n/a")
    assert store_cells(failed) == ("unknown",) * 4


def test_suite_md_and_html_show_no_ledger_effects_for_a_run_that_writes_no_ledger():
    """eos's row said 'effects 1,000' beside 'ledger total n/a': its topic's records under a ledger's name. And
    each run's sentence repeated its name after the name ('**eos**: eos: read_committed ...')."""
    import json
    from pathlib import Path
    from harness.reporting.suite_report import STORES_NOTE, render_html, render_md
    ref = json.loads((Path(__file__).resolve().parents[2] / "reports/reference/suite/suite.json").read_text())
    ref["experiments"] = [r for r in ref["experiments"] if r["experiment"] in ("eos", "eos-boundary")]
    text = render_md(ref)
    eos_row = next(line for line in text.splitlines() if line.startswith("| eos |"))
    assert eos_row.split(" | ")[3:6] == ["n/a", "n/a", "n/a"], eos_row
    boundary = next(line for line in text.splitlines() if line.startswith("| eos-boundary |"))
    assert boundary.split(" | ")[3:6] == ["1,100", "100", "0"], boundary
    import html
    assert STORES_NOTE in text and STORES_NOTE in html.unescape(render_html(ref))
    assert "- **eos**: read_committed output of 1,000 payments" in text and "**eos**: eos:" not in text
    assert "<b>eos</b>: eos:" not in render_html(ref)


def test_a_run_reports_anomaly_ids_name_the_store_they_were_counted_in():
    """eos-boundary's Markdown listed 'duplicated (100)' under 'Anomalies (first ids)' a few lines above the
    Jepsen table's 'duplicate | forbidden | 0', with nothing saying the first is the ledger's."""
    from pathlib import Path
    from harness.reporting import markdown
    from harness.reporting.run_report import RunReport
    ref = Path(__file__).resolve().parents[2] / "reports" / "reference" / "suite"
    for name, store in (("eos-boundary", "database: ledger table"), ("eos", "Kafka output topic, read_committed")):
        text = markdown.render(RunReport.load(ref / name))
        part = text[text.index("## Anomalies (first ids)"):]
        assert part.split("\n")[2] == f"counted in the {store}", part[:200]
