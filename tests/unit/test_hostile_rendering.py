"""Every rendering shows what the harness did not write as text: a report.json, suite.json, folder name
or ledger id holding HTML, Markdown or terminal escapes changes no element, line, cell, link or colour.

Each renderer gets the same report twice, once with every string "x" and once with every string
HOSTILE (tests/unit/hostile.py), and the two renderings must have the same shape: the same HTML
elements, the same Markdown lines and table cells (also as a CommonMark parser with raw HTML on and
every link allowed reads them), and for a terminal no control character at all.
"""

import copy
import json
import re
from html.parser import HTMLParser
from pathlib import Path

import pytest
from markdown_it import MarkdownIt

from harness.core.errors import HarnessError
from harness.reporting import comparison
from harness.reporting.compare_render import to_markdown, to_text
from harness.reporting.compare_targets import Target
from harness.reporting import html, markdown, validate
from harness.reporting.run_report import RunReport
from harness.reporting.suite_report import render_html, render_md, write_suite
from tests.conftest import harness
from tests.unit.hostile import (HOSTILE, full_report, number_paths, put, replace_strings, suite_summary,
                                valid_hostile)
from tests.unit.sample_report import validate as schema_validate

RENDER_ERRORS = (TypeError, ValueError, KeyError, AttributeError)


# -- what "safe" means, per medium ---------------------------------------------------------------

class Elements(HTMLParser):
    def __init__(self, text: str):
        super().__init__(convert_charrefs=True)
        self.tags, self.attrs = [], []
        self.feed(text)

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)
        self.attrs += [(tag, k, v or "") for k, v in attrs]


def assert_html_safe(page: str, benign: str, links_may_go=False):
    """The page has exactly the benign page's elements and attributes: nothing a value could add
    (a script, an event handler, an image), and no link to anything but http(s) or a relative path."""
    assert "<script" not in page.lower()
    got, want = Elements(page), Elements(benign)
    counts = lambda tags: {t: tags.count(t) for t in set(tags) if not (links_may_go and t == "a")}  # noqa: E731
    assert counts(got.tags) == counts(want.tags)
    assert {(t, k) for t, k, _ in got.attrs} <= {(t, k) for t, k, _ in want.attrs}
    assert not [k for _, k, _ in got.attrs if k.startswith("on")]
    for _, k, v in got.attrs:
        if k in ("href", "src", "xlink:href", "action"):
            assert re.match(r"^(https?://|[^:]*$)", v.strip(), re.I), v


def pipes(line: str) -> int:
    """Unescaped `|` in a Markdown line (a backslash escapes the next character)."""
    n, i = 0, 0
    while i < len(line):
        if line[i] == "\\":
            i += 2
            continue
        n += line[i] == "|"
        i += 1
    return n


def commonmark(text: str) -> str:
    """HTML as a CommonMark reader with tables, raw HTML on and no link filter makes it: the worst case."""
    md = MarkdownIt("commonmark", {"html": True}).enable("table")
    md.validateLink = lambda url: True
    return md.render(text)


def assert_markdown_safe(text: str, benign: str):
    """Line for line the benign Markdown's shape: no added line (a heading, a list item), no added table
    cell, and read as CommonMark no element the benign text does not make, no link, no image."""
    lines, want = text.splitlines(), benign.splitlines()
    assert len(lines) == len(want)
    for got, exp in zip(lines, want):
        if exp.startswith("|"):                 # a table row (a code block may hold pipes)
            assert pipes(got) == pipes(exp), got
        assert got[:2] == exp[:2], got          # a line keeps its kind: heading, list item, quote, cell
    page, page_benign = commonmark(text), commonmark(benign)
    assert "<a " not in page and "<img" not in page
    assert_html_safe(page, page_benign)
    assert not re.search(r"^#+ *INJECTED", text, re.M)


def assert_terminal_safe(text: str, benign: str | None = None):
    """No control character but the line breaks (no ESC, no CSI, no bidi override), and the benign
    text's number of lines."""
    bad = sorted({repr(c) for c in text if not (c.isprintable() or c == "\n")})
    assert not bad, bad
    if benign is not None:
        assert len(text.splitlines()) == len(benign.splitlines())


def renders(data: dict, folder=None) -> tuple[str, str]:
    return markdown.render(RunReport(data)), html.render(RunReport(data), folder)


# -- report.md and report.html -------------------------------------------------------------------

def test_every_string_of_a_report_shows_as_text_in_markdown_and_html():
    d = full_report()
    schema_validate(d)
    md_x, html_x = renders(replace_strings(d, "x"))
    md_h, html_h = renders(replace_strings(d, HOSTILE))
    assert "INJECTED" in md_h and "INJECTED" in html_h     # shown, as text
    assert_markdown_safe(md_h, md_x)
    assert_html_safe(html_h, html_x)


def test_the_cases_found_by_hand_stay_text():
    """differing_totals, unplanned_deaths[].attempt / exit_code (a script ran in Chromium), a ledger id
    that forged a Markdown section."""
    d = full_report()
    d["verdict_detail"]["differing_totals"]["duplicated"] = "<script>alert(1)</script>"
    d["verdict_detail"]["unplanned_deaths"][0].update(attempt="<img src=x onerror=alert(2)>",
                                                       exit_code="<script>alert(3)</script>")
    d["anomalies"]["duplicate_ids"] = ["a\n# INJECTED HEADING\n<script>alert(4)</script>"]
    md_text, page = renders(d)
    assert "<script" not in page and "<img" not in page and "&lt;script&gt;alert(1)" in page
    assert "\n# INJECTED" not in md_text and "\\<script>alert(4)" in md_text


def _render(fn, data):
    try:
        return fn(RunReport(data))
    except RENDER_ERRORS:
        return None


@pytest.mark.parametrize("path", list(number_paths(full_report())), ids=lambda p: ".".join(map(str, p)))
def test_a_hostile_value_in_a_number_field_is_refused_or_shown_as_text(path):
    """A string where a number belongs: validation refuses it (so `report`, `compare` and `audit` never
    use it), or, where the schema lets a field be anything, both renderings show it as text. Rendered
    anyway, a refused value is text too, or an error, never markup."""
    d, twin = full_report(), full_report()
    put(d, path, HOSTILE)
    put(twin, path, "x")              # the same shape: a plain string where the number was
    try:
        validate.check(d, "report", Path("report.json"))
        accepted = True
    except HarnessError:
        accepted = False
    for fn, safe in ((markdown.render, assert_markdown_safe), (html.render, assert_html_safe)):
        got, want = _render(fn, d), _render(fn, twin)
        assert got is not None or not accepted, f"a valid report that {fn.__module__} cannot render"
        if got is not None and want is not None:
            safe(got, want)
        elif got is not None:
            assert "<script" not in got and "\n# INJECTED" not in got


def test_harness_report_on_a_valid_but_hostile_report_writes_safe_pages(tmp_path):
    d = valid_hostile(full_report(), schema_validate)
    folder = tmp_path / "run"
    folder.mkdir()
    (folder / "report.json").write_text(json.dumps(d))
    proc = harness("report", str(folder))
    assert proc.returncode == 0, proc.stderr
    twin = json.loads(json.dumps(d).replace(json.dumps(HOSTILE)[1:-1], "x"))   # the same with "x" for HOSTILE
    md_x, html_x = renders(twin, folder)
    md_h, html_h = (folder / "report.md").read_text(), (folder / "report.html").read_text()
    assert "INJECTED" in md_h and "INJECTED" in html_h
    assert_markdown_safe(md_h, md_x)
    assert_html_safe(html_h, html_x)


def test_a_run_report_in_chromium_runs_no_script(tmp_path):
    """The page of a report whose every string is hostile, loaded in a real browser: the DOM it ends with
    has no element the hostile text tried to add (an onerror handler would have run)."""
    from tests.unit.test_browser import CHROMIUM, chromium
    if CHROMIUM is None:
        pytest.skip("Debian's chromium is not installed")
    d = replace_strings(full_report(), HOSTILE.replace("alert(3)", "document.body.dataset.pwned=1"))
    page = tmp_path / "report.html"
    page.write_text(html.render(RunReport(d)))
    dom = chromium(page, "--dump-dom").stdout
    assert "<svg" in dom and "data-pwned" not in dom and "<img" not in dom and "INJECTED" in dom


# -- suite.md and suite.html ---------------------------------------------------------------------

SUITE_MAPS = (("environment",),)


def test_every_string_of_a_suite_shows_as_text_in_markdown_and_html():
    s = suite_summary()
    benign, hostile = replace_strings(s, "x", SUITE_MAPS), replace_strings(s, HOSTILE, SUITE_MAPS)
    assert_markdown_safe(render_md(hostile), render_md(benign))
    assert_html_safe(render_html(hostile), render_html(benign), links_may_go=True)


def without_doc_links(page: str) -> str:
    """The page without the links its own headings make to the docs (html.doc_link), which no report sets."""
    return re.sub(r"<p class=doc><a href='[^']*' title='what this section shows'>[^<]*</a></p>", "", page)


@pytest.mark.parametrize("link", ["javascript:alert(1)//report.json", " javascript:alert(1)//report.json",
                                  "JaVaScRiPt:alert(1)//report.json", "data:text/html,x/report.json",
                                  "//evil.example/report.json", "/etc/report.json", "../../etc/report.json",
                                  "a/../../report.json", "a\\..\\..\\report.json", "java\nscript:x/report.json"])
def test_a_suite_links_no_run_outside_its_folder(tmp_path, link):
    page = without_doc_links(render_html(suite_summary(link), tmp_path))
    assert "<a " not in page and "href" not in page


def test_a_suite_links_its_own_runs(tmp_path):
    (tmp_path / "offset-after").mkdir()
    assert '<a href="offset-after/report.html">' in render_html(suite_summary(), tmp_path)


def test_harness_report_on_a_suite_links_no_javascript(tmp_path):
    s = suite_summary("javascript:alert(1)//report.json")
    (tmp_path / "suite.json").write_text(json.dumps(s))
    write_suite(tmp_path)
    page = (tmp_path / "suite.html").read_text()
    assert 'href="javascript' not in page.lower() and "<a " not in without_doc_links(page)


# -- compare: text, Markdown, and the command ----------------------------------------------------

def targets(text: str) -> list:
    out = []
    for i, dups in enumerate((2, 5)):
        d = replace_strings(full_report(), text)
        d["counts"]["duplicates"] = dups
        d["environment"]["kafka_version"] = f"{text}{i}"      # a warning that quotes a value
        out.append(Target({d["experiment"]: d}, f"{text}{i}", Path(f"{i}/report.json"), "run",
                          notes=[f"note {text}"]))
    return out


def test_compare_text_and_markdown_show_hostile_names_as_text():
    benign, hostile = comparison.compare(targets("x")), comparison.compare(targets(HOSTILE))
    assert hostile.warnings and any("INJECTED" in w for w in hostile.warnings)
    assert_terminal_safe(to_text(hostile), to_text(benign))
    assert_markdown_safe(to_markdown(hostile), to_markdown(benign))


def test_harness_compare_prints_hostile_folder_names_and_values_as_text(tmp_path):
    folders = []
    for i, dups in enumerate((2, 5)):
        d = valid_hostile(full_report(), schema_validate)
        d["counts"]["duplicates"], d["environment"]["kafka_version"] = dups, f"{HOSTILE}{i}"
        f = tmp_path / f"r{i}\n# INJECTED\x1b[31m|x|"
        f.mkdir()
        (f / "report.json").write_text(json.dumps(d))
        folders.append(str(f))
    text = harness("compare", *folders, "--fail-on", "duplicates>0")
    assert text.returncode == 1, text.stderr
    assert "INJECTED" in text.stderr and "fail:" in text.stderr
    assert_terminal_safe(text.stdout)
    assert_terminal_safe(text.stderr)
    md = harness("compare", *folders, "--format", "markdown")
    assert md.returncode == 0, md.stderr
    assert not re.search(r"^#+ *INJECTED", md.stdout, re.M) and "<a " not in commonmark(md.stdout)
    assert "<script" not in commonmark(md.stdout) and "\x1b" not in md.stdout
    header = md.stdout.splitlines()[[l.startswith("| experiment") for l in md.stdout.splitlines()].index(True)]
    assert all(pipes(l) == pipes(header) for l in md.stdout.splitlines() if l.startswith("|"))


# -- audit's printing, the progress log, error lines ---------------------------------------------

def test_audit_prints_hostile_stores_metrics_and_ids_as_text(capsys):
    from harness.checker.crosscheck import Row
    from harness.cli.commands.audit import print_rows
    rows = [Row(store=HOSTILE, metric=HOSTILE, reported=3, recounted=4, ids=[HOSTILE, "pay-1"])]
    print_rows(HOSTILE, rows)
    out = capsys.readouterr().out
    assert "INJECTED" in out and "DIFFERS" in out
    assert_terminal_safe(out)
    assert "[bold red]rich" in out          # rich markup in a name is shown, not applied


def test_audit_refuses_a_hostile_report_in_one_escaped_line(tmp_path):
    d = full_report()
    d["run_id"] = 7
    d["experiment"] = HOSTILE
    (tmp_path / "report.json").write_text(json.dumps(d))
    proc = harness("audit", str(tmp_path), env={"HARNESS_HOME": str(tmp_path / "state"),
                                               "HARNESS_BOOTSTRAP_SERVERS": "", "HARNESS_POSTGRES_DSN": ""})
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "is not a valid report.json" in lines[0] and "/run_id" in lines[0]
    assert_terminal_safe(proc.stderr)


def test_the_progress_log_and_error_lines_show_escapes_as_text(capsys, tmp_path):
    from harness.cli.ui import ProgressUI, log_fn
    log_fn(False)(HOSTILE)
    with ProgressUI(HOSTILE) as ui:
        ui.log(HOSTILE)
        ui(1, 2, 0, 0)
    err = capsys.readouterr().err
    assert "INJECTED" in err
    assert_terminal_safe(err)
    folder = tmp_path / "a\x1b[31m\n# INJECTED"
    folder.mkdir()
    proc = harness("report", str(folder))
    assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert_terminal_safe(proc.stderr)


def test_every_escape_function_leaves_no_control_character():
    from harness.core import escape
    for f in (escape.term, escape.md, escape.md_code, escape.html):
        assert_terminal_safe(f(HOSTILE).replace("\n", "!"))
        assert "\n" not in f(HOSTILE) and "\r" not in f(HOSTILE)
    assert copy.copy(escape.term_lines("a\x1b[31m\nb")) == "a\\x1b[31m\nb"


def test_the_scoreboard_a_run_prints_shows_hostile_values_as_text(capsys):
    from harness.cli.commands.run import _print_scoreboard
    _print_scoreboard(RunReport(replace_strings(full_report(), HOSTILE)))
    err = capsys.readouterr().err
    assert "INJECTED" in err and "[bold red]rich" in err
    assert_terminal_safe(err)
