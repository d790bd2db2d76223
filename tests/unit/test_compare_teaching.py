"""`harness compare` as a learner reads it: every target against the first, signed deltas, n/a for what does
not apply, the abbreviations written out, and Markdown and HTML output."""

from harness.reporting.comparison import compare
from harness.reporting.compare_render import to_html, to_markdown, to_text
from harness.reporting.compare_targets import load_target
from tests.unit.test_compare import eos_output, report, run_compare, write_run

REPRS = ("None", "['", "{'", "True", "False")


def three(tmp_path):
    a = write_run(tmp_path / "a", report("offset-after", dups=100))
    b = write_run(tmp_path / "b", report("offset-before", dups=0, lost=5))
    c = write_run(tmp_path / "c", report("dedupe", dups=0))
    return [load_target(str(p)) for p in (a, b, c)]


def test_each_target_is_compared_with_the_first_not_the_last_with_the_first(tmp_path):
    c = compare(three(tmp_path))
    dup = next(r for r in c.rows if r.metric == "duplicates")
    # before: one delta, last minus first; offset-after against itself showed 0 and b had no delta at all
    assert dup.values == [100, 0, 0] and [d and d[0] for d in dup.deltas] == [None, -100, -100]
    text = to_text(c)
    head = text.splitlines()[0].split()
    assert head.count("delta") == 4 and "each delta: its target minus the first target" in text
    line = next(x for x in text.splitlines() if x.split()[:1] == ["duplicates"] or " duplicates " in x)
    assert "-100" in line and "-100.0%" in line
    lost = next(r for r in c.rows if r.metric == "lost")
    assert lost.deltas[1] == (5, None)                 # from 0: a signed delta, no percentage
    assert next(x for x in text.splitlines() if " lost " in f" {x} ").split()[2:5] == ["5", "+5", "from"]


def test_metrics_that_do_not_apply_are_na_and_abbreviations_are_written_out(tmp_path):
    eos = report("eos", dups=0, kafka_output=eos_output())
    eos["stack"]["ledger_table"], eos["ledger"]["actual_total"] = None, None
    a = load_target(str(write_run(tmp_path / "a", report("offset-after"))))
    b = load_target(str(write_run(tmp_path / "b", eos)))
    c = compare([a, b])
    text, md = to_text(c), to_markdown(c)
    ledger = next(x for x in text.splitlines() if "ledger_total" in x)
    rc = next(x for x in text.splitlines() if x.split()[:1] == ["rc.records"])
    assert ledger.split()[1:3] == ["1,300", "n/a"] and "unknown" not in ledger
    assert rc.split()[1:3] == ["n/a", "10"] and "unknown" not in rc
    assert "rc.records: records of the output topic as a read_committed reader sees them" in text
    assert "**ru.duplicates**: duplicates in the output topic, read" in md and "| ledger_total | 1,300 | n/a |" in md
    assert "(delta: b minus a)" in text and "Delta: b minus a." in md


def test_markdown_and_html_output_from_the_command(tmp_path):
    a = write_run(tmp_path / "a", report("offset-after", dups=100))
    b = write_run(tmp_path / "b", report("offset-after", dups=90))
    res = run_compare(a, b, "--html")
    assert res.exit_code == 0, res.output
    page = res.output
    assert page.startswith("<!doctype html>") and "<table>" in page and "class=wide" in page
    assert "<dt>duplicates</dt>" in page and "<td class=n>-10</td>" in page
    assert not [r for r in REPRS if r in page.replace("class=n>False", "")], [r for r in REPRS if r in page]
    md = run_compare(a, b, "--md").output
    assert md.startswith("| experiment | metric |") and "| -10 | -10.0% |" in md
    both = run_compare(a, b, "--md", "--html")
    assert both.exit_code != 0


def test_compare_html_names_the_targets_and_the_date(tmp_path):
    c = compare(three(tmp_path))
    page = to_html(c, "2026-12-07")
    assert "<title>compare a vs b vs c (2026-12-07)</title>" in page


def test_compare_html_names_the_docs_entry_on_comparing(tmp_path, monkeypatch):
    """Printed to stdout, the page has no folder to link from: it names the entry's path in the repository."""
    monkeypatch.delenv("HARNESS_DOCS_URL", raising=False)
    page = to_html(compare(three(tmp_path)), "2026-12-07")
    assert "<code>docs/reading-a-report.md#compare-runs</code>" in page
    monkeypatch.setenv("HARNESS_DOCS_URL", "http://127.0.0.1:8000")
    assert "href='http://127.0.0.1:8000/reading-a-report/#compare-runs'" in to_html(compare(three(tmp_path)))
