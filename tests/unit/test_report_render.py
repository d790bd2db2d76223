"""JSON, Markdown and HTML come from one RunReport and agree on every number."""

import json
import re
from pathlib import Path
from html.parser import HTMLParser

from harness.reporting import html, markdown
from harness.reporting.run_report import RunReport
from harness.reporting.writer import write_all
from tests.unit.sample_report import sample


def test_every_scoreboard_number_is_in_markdown_and_html():
    r = RunReport(sample(dups=7))
    md, page = markdown.render(r), html.render(r)
    for metric, store, observed, predicted in r.scoreboard():
        assert f"| {metric} | {store} | {observed} | {predicted} |" in md
        assert f"<td>{metric}</td><td>{store}</td><td class=n>{observed}</td>" in page.replace("&#x27;", "'")
    assert "| ledger total | database: ledger table | 1,700 |  |" in md
    assert "| expected ledger total | payments sent (sum of amounts) | 1,000 |  |" in md


def _eos(experiment="eos", ledger=False):
    """An eos-family report: no ledger (eos) or a ledger beside the output topic (eos-boundary)."""
    d = sample(experiment, dups=0 if not ledger else 100)
    d["counts"].update(sent=1000, deliveries=1100, effects=1100 if ledger else 1000)
    d["stack"]["output_topic"] = "harness.x.output"
    if not ledger:
        d["stack"]["ledger_table"] = None
        d["ledger"] = {"expected_total": 100000, "actual_total": None}
    else:
        d["ledger"] = {"expected_total": 100000, "actual_total": 110000}
    d["kafka_output"] = {"read_committed": {"records": 1000, "duplicates": 0, "lost": 0, "unprocessed": 0},
                         "read_uncommitted": {"records": 1100, "duplicates": 100, "lost": 0, "unprocessed": 0},
                         "aborted_records": 100}
    d["predicted"].update(kafka_output={"read_committed": {"duplicates": 0, "lost": 0},
                                        "read_uncommitted": {"duplicates": 100, "lost": 0}},
                          expectations=["kafka.read_committed.duplicates == 0", "kafka.read_uncommitted.duplicates == 100"])
    return d


def test_each_number_names_its_store_and_predicted_holds_only_predictions():
    rows = RunReport(_eos("eos-boundary", ledger=True)).scoreboard()
    by = {(m, store): (obs, pred) for m, store, obs, pred in rows}
    assert by[("duplicates", "database: ledger table")] == ("100", "100")
    assert by[("duplicates", "Kafka output topic, read_committed")] == ("0", "0")
    assert by[("duplicates", "Kafka output topic, read_uncommitted")] == ("100", "100")
    assert by[("ledger total", "database: ledger table")] == ("110,000", "")
    assert by[("expected ledger total", "payments sent (sum of amounts)")] == ("100,000", "")
    # the predicted column never holds an observation or a description
    assert all(pred == "" or pred.replace(",", "").lstrip("<= ").split(" to ")[0].isdigit() for *_x, pred in rows)


def test_a_run_without_a_ledger_shows_no_ledger_rows_and_no_effects():
    rows = RunReport(_eos()).scoreboard()
    metrics = [m for m, *_r in rows]
    assert "effects" not in metrics and "ledger total" not in metrics and "expected ledger total" not in metrics
    stores = {m: s for m, s, *_r in rows if m == "records"}
    assert stores == {"records": "Kafka output topic, read_uncommitted"} or \
        ("records", "Kafka output topic, read_committed", "1,000", "") in rows
    assert not any(obs == "unknown" for _m, _s, obs, _p in rows if _m != "deliveries")


def test_the_legend_defines_every_count_shown_in_markdown_and_html_and_the_glossary():
    from harness.cli.docs_pages import counts_page
    from harness.reporting.legend import definition
    for d in (sample(), _eos(), _eos("eos-boundary", ledger=True)):
        r = RunReport(d)
        md, page, glossary = markdown.render(r), html.render(r), counts_page()
        shown = {m.strip() for m, *_r in r.scoreboard()}
        assert shown == {m for m, _t in r.legend()}, shown ^ {m for m, _t in r.legend()}
        for m in shown:
            assert definition(m), m
            assert f"- **{m}**: {definition(m)}" in md
            assert f"<dt>{m}</dt><dd>{definition(m)}</dd>" in page.replace("&#x27;", "'")
            assert f"| {m} | {definition(m)} |" in glossary


def test_html_is_self_contained_and_has_charts():
    page = html.render(RunReport(sample()))
    assert "<script" not in page and "http://" not in page and "https://" not in page
    assert 'id="chart-anomalies"' in page and 'id="chart-timeline"' in page
    bars = re.findall(r'class="bar-([a-z_-]+)" data-value="(\d+)"', page)
    assert bars == [("lost", "0"), ("predicted-lost", "0"), ("duplicates", "3"), ("predicted-duplicates", "3")]

    class P(HTMLParser):
        pass
    P().feed(page)   # parses without error


def test_write_all_round_trips_json(tmp_path):
    r = RunReport(sample(lost=2, dups=0))
    write_all(r, tmp_path)
    again = RunReport.load(tmp_path)
    assert again.data == r.data
    assert json.loads((tmp_path / "report.json").read_text())["counts"]["lost"] == 2
    assert not list(tmp_path.glob(".*.tmp"))


def test_html_escapes_report_text():
    d = sample()
    d["summary"] = "<script>alert(1)</script>"
    assert "<script>alert" not in html.render(RunReport(d))


def test_the_sample_follows_the_schema_and_a_broken_report_does_not():
    import jsonschema
    import pytest
    from tests.unit.sample_report import validate
    validate(sample())
    bad = sample()
    bad["counts"]["lost"] = -1
    with pytest.raises(jsonschema.ValidationError):
        validate(bad)


def test_an_unmeasured_number_shows_as_unknown_everywhere():
    d = sample(verdict="audit-failed")
    d["counts"].update(effects=None, duplicates=None, lost=None)
    d["ledger"]["actual_total"] = None
    d["verdict_detail"]["audit_errors"] = ["ledger: connection refused"]
    d["verdict_detail"]["failed"] = ["ledger.lost: not measured"]
    from harness.reporting.summary import compose, whole
    d["summary"], d["summary_detail"] = compose(d)
    assert "unknown lost and unknown duplicated" in d["summary"] and "Audit error: ledger: connection refused" in whole(d)
    r = RunReport(d)
    md, page = markdown.render(r), html.render(r)
    assert "| lost | database: ledger table | unknown |" in md and "Audit error:** ledger: connection refused" in md
    assert "| ledger total | database: ledger table | unknown |" in md
    assert "<td>lost</td><td>database: ledger table</td><td class=n>unknown</td>" in page and "audit error: ledger: connection refused" in page
    assert 'class="bar-lost"' not in page            # no bar drawn for a number nobody measured


def test_schema_1_reports_still_render():
    from tests.unit.sample_report import sample_v1
    r = RunReport(sample_v1())
    assert "| duplicates | database: ledger table | 3 | 3 |" in markdown.render(r) and "<h1>offset-after" in html.render(r)


def test_a_faults_facts_are_not_headed_as_times_after_a_pause():
    """planned-crash's story is {"planned": 100}: it read "planned | 100" under "event (seconds after the
    fault)". Only a pause's times are times."""
    d = sample()
    d["fault_details"] = {"planned-crash": {"planned": 100},
                          "zombie-pause": {"times_since_pause": {"fenced": 1.25}, "paused": 1}}
    page = html.render(RunReport(d))
    crash = page[page.index("Fault: planned-crash"):page.index("Fault: zombie-pause")]
    assert "seconds after the fault" not in crash and "<th>what</th>" in crash.replace(" ", "")
    assert "seconds after the fault" in page[page.index("Fault: zombie-pause"):]


def test_a_timed_faults_facts_are_not_under_its_times_heading():
    """A zombie's story is times after its pause and plain facts (its state, the pause asked for): the facts
    were rows under "event (seconds after the fault)", as if "state | done" were a time. The times keep
    that heading in a table of their own; the facts, as planned-crash's and broker-kill's, are 'what | value'."""
    import re
    d = sample()
    d["fault_details"] = {
        "planned-crash": {"planned": 100},
        "broker-kill": {"planned": 1, "struck": 1, "skipped": [], "kind": "local"},
        "zombie-pause": {"state": "done", "pause_seconds": 3.0, "zombie_exit_code": 0, "fenced": True,
                         "fenced_error": "fenced", "times_since_pause": {"paused": 0.0, "resumed": 3.01,
                                                                         "zombie_fenced": 3.2}}}
    page = html.render(RunReport(d))

    def tables(name):
        section = page[page.index(f"Fault: {name}"):]
        section = section[:section.index("<h2>", 1)] if "<h2>" in section[1:] else section
        return [(re.findall(r"<th>(.*?)</th>", t), re.findall(r"<tr><td>(.*?)</td>", t))
                for t in re.findall(r"<table>.*?</table>", section)]
    assert tables("planned-crash") == [(["what", "value"], ["planned"])]
    assert tables("broker-kill") == [(["what", "value"], ["planned", "struck", "skipped", "kind"])]
    assert tables("zombie-pause") == [
        (["event (seconds after the fault)", "value"], ["paused", "resumed", "zombie fenced"]),
        (["what", "value"], ["state", "pause seconds", "zombie exit code", "fenced", "fenced error"])]


def reaches(folder, href: str, anchor: str) -> bool:
    """The link `href`, followed from a page in `folder`, opens the docs page's file at `anchor`."""
    path, _, fragment = href.partition("#")
    target = folder / path
    return fragment == anchor and target.resolve() == (html.DOCS_DIR / f"{html.DOCS_PAGE}.md").resolve()


def test_each_section_heading_links_to_the_docs_entry_on_it(monkeypatch, tmp_path):
    """Every <h2> of report.html is followed by its link into docs/reading-a-report.md, which a click
    reaches from the folder the report is written in (a served site's page with HARNESS_DOCS_URL); the
    anchors exist there (test_docs_site.py)."""
    d = sample()
    d["fault_details"] = {"planned-crash": {"planned": 100}}
    monkeypatch.delenv("HARNESS_DOCS_URL", raising=False)
    for folder in (tmp_path / "reports" / "run-1", tmp_path.parent):
        page = html.render(RunReport(d), folder)
        heads = re.findall(r"<h2[^>]*>(.*?)</h2>(<p class=doc><a href='([^']*)'[^>]*>([^<]*)</a>)?", page)
        assert len(heads) >= 10 and "Fault: planned-crash" in [h for h, *_ in heads]
        assert [h for h, link, *_ in heads if not link] == [], "headings without their docs link"
        links = {href: shown for _, _, href, shown in heads}
        for anchor in ("scoreboard", "faults", "audit-it-yourself"):
            href = next(x for x in links if x.endswith(f"#{anchor}"))
            assert reaches(folder, href, anchor), f"{href} from {folder} does not reach the docs page"
            assert links[href] == f"docs/reading-a-report.md#{anchor}"
    monkeypatch.setenv("HARNESS_DOCS_URL", "http://127.0.0.1:8000/")
    assert "href='http://127.0.0.1:8000/reading-a-report/#timeline'" in html.render(RunReport(d))


def test_without_the_docs_pages_or_a_folder_a_heading_names_the_page_and_links_nowhere(monkeypatch, tmp_path):
    """A page with no folder cannot say where the docs are from it, and an installed package carries no docs
    pages: no link that would lead nowhere, the page's path as text."""
    monkeypatch.delenv("HARNESS_DOCS_URL", raising=False)
    text = "<p class=doc>explained in the harness repository's <code>docs/reading-a-report.md#scoreboard</code>"
    pages = [html.render(RunReport(sample()))]
    monkeypatch.setattr(html, "DOCS_DIR", tmp_path / "no-docs")
    pages.append(html.render(RunReport(sample()), tmp_path))
    assert all(text in page and "class=doc><a" not in page for page in pages)


def test_each_heading_of_the_suite_page_links_to_the_docs_entry_on_it(monkeypatch, tmp_path):
    """suite.html too: every <h2> is followed by its link into docs/reading-a-report.md, one per section."""
    from harness.reporting.suite_report import SECTION_ANCHORS, render_html
    d = sample()
    run = {"experiment": "dedupe", "report": "dedupe/report.json", "verdict": "as-predicted", "seconds": 3,
           "counts": d["counts"], "ledger": d["ledger"], "crashes": 1, "kafka_output": None, "summary": "x"}
    summary = {"suite_id": "s", "conclusion": "c", "experiments": [run], "timings": {"wall_seconds": 3},
               "environment": {}, "command_args": []}
    monkeypatch.delenv("HARNESS_DOCS_URL", raising=False)
    heads = re.findall(r"<h2[^>]*>(.*?)</h2>(<p class=doc><a href='([^']*)')?", render_html(summary, tmp_path))
    assert [h for h, link, _ in heads if not link] == [], "headings without their docs link"
    assert [h for h, _, _ in heads] == list(SECTION_ANCHORS)
    assert all(reaches(tmp_path, href, a) for (_, _, href), a in zip(heads, SECTION_ANCHORS.values())), heads
    monkeypatch.setenv("HARNESS_DOCS_URL", "http://127.0.0.1:8000")
    assert "href='http://127.0.0.1:8000/reading-a-report/#suite-time'" in render_html(summary)
