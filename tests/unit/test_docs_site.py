"""The documentation site builds strictly, and its generated pages name everything the code declares.

`mkdocs build --strict` fails on a broken link, an unknown page or anchor, and on an unknown
generated part (docs/hooks/generated.py); the checks below fail when a declared experiment, kill
point, fault, fault option, run option or command is missing from the built HTML, which is how the
pages would drift from the declarations if they were typed by hand.
"""

import functools
import html
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from harness.cli import docs_pages
from harness.cli.entry import cli
from harness.experiments import REGISTRY
from harness.faults import FAULTS
from harness.run.params import declared

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    pytest.importorskip("mkdocs", reason="mkdocs is not installed (pip install -e '.[docs]'; setup.sh does)")
    pytest.importorskip("material", reason="mkdocs-material is not installed (pip install -e '.[docs]')")
    out = tmp_path_factory.mktemp("site")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
           "NO_MKDOCS_2_WARNING": "1"}
    # A strict build takes about 3 s; a minute means something hangs.
    done = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--quiet", "-d", str(out)],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, f"mkdocs build --strict failed:\n{done.stdout}\n{done.stderr}"
    return out


def page(site: Path, name: str) -> str:
    return html.unescape((site / name / "index.html").read_text())


def test_every_experiment_and_kill_point_is_on_the_experiments_page(site):
    text = page(site, "experiments")
    missing = [e.name for e in REGISTRY.values() if f'id="{e.name}"' not in text]
    assert not missing, f"experiments without their section: {missing}"
    points = [f"{e.name}:{p.name}" for e in REGISTRY.values() for p in e.kill_points if p.name not in text]
    assert not points, f"kill points missing: {points}"


def test_every_fault_and_its_options_are_on_the_faults_page(site):
    text = page(site, "faults")
    missing = [n for n in FAULTS if f'id="{n}"' not in text]
    assert not missing, f"faults without their section: {missing}"
    options = [f"{n}:{k}" for n, cls in FAULTS.items() for k in cls.options
               if not re.search(rf'id="{re.escape(n)}".*?<code>{re.escape(k)}</code>', text, re.S)]
    assert not options, f"fault options missing: {options}"


def test_every_run_option_is_on_the_options_page(site):
    text = page(site, "options")
    missing = [d.option.flag for d in declared().values() if f"<code>{d.option.flag}</code>" not in text]
    assert not missing, f"run options missing: {missing}"


def test_every_command_has_its_help_on_the_commands_page(site):
    text = page(site, "commands")
    words = [w for w, _ in docs_pages._helps(cli, ["harness"], None)]
    assert len(words) > len(cli.commands), "the subcommands' groups were not walked"
    missing = [w for w in words if f"<code>{w}</code>" not in text]
    assert not missing, f"commands without their --help: {missing}"
    assert "harness run [OPTIONS]" in text and "--messages" in text


def test_every_section_link_of_the_html_report_has_its_entry(site):
    from harness.reporting import html as report_html, suite_report
    text = (site / report_html.DOCS_PAGE / "index.html").read_text()
    anchors = {*report_html.SECTION_ANCHORS.values(), *suite_report.SECTION_ANCHORS.values()}
    missing = sorted({a for a in anchors if f'id="{a}"' not in text})
    assert not missing, f"report sections the reading-a-report page does not explain: {missing}"


def test_every_reference_figure_is_on_the_numbers_page_with_its_command(site):
    from harness.cli import docs_numbers
    text = page(site, "numbers")
    missing = [f.figure for f in docs_numbers.figures()
               if not all(x in text for x in (f.value, f.date, f.command, f.source))]
    assert not missing, f"figures not on the numbers page with their value, date, command and report: {missing}"


def test_each_figure_measured_by_hand_has_its_date_and_command():
    hand = (ROOT / "docs" / "numbers.md").read_text().split("## Measured by hand", 1)[1]
    rows = [r for r in hand.splitlines() if r.startswith("| ") and not r.startswith(("| figure", "| ---"))]
    assert rows and all(re.search(r"\| 20\d\d-\d\d-\d\d \| `[^`]+`", r) for r in rows), rows


ELSEWHERE = re.compile(r"(?i)\blessons? \d+|teaching texts?|reference page|the lab's")


def test_the_readme_stays_short_and_every_page_stands_alone():
    """The README is the front page (at most 15,000 bytes); neither it nor a docs page points the reader
    to a text they do not have."""
    readme = (ROOT / "README.md").read_bytes()
    assert len(readme) <= 15_000, f"README.md is {len(readme):,} bytes; move detail to a page under docs/"
    for path in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        found = ELSEWHERE.findall(path.read_text())
        assert not found, f"{path.name} refers to texts the reader does not have: {found}"


FIRST_SCREEN = 40     # lines of the README a newcomer sees before scrolling


def test_the_readmes_first_screen_has_what_a_newcomer_looks_for():
    """The two commands, what the output means, the command that shows where Kafka's exactly-once stops,
    and where the own-consumer and CI instructions are, all before the first scroll."""
    first = "\n".join((ROOT / "README.md").read_text().splitlines()[:FIRST_SCREEN])
    wanted = {"the run command": "./scripts/setup.sh && .venv/bin/harness run offset-before",
              "the test command": "./scripts/setup.sh && .venv/bin/python -m pytest -q",
              "what the output means": "`as-predicted` (exit 0)",
              "where the output is explained": "(#what-a-run-prints)",
              "the EOS-limits command": "`harness suite --experiments eos,eos-boundary,eos-dedupe`",
              "your own consumer": "(#crash-test-your-own-consumer)", "CI": "(#use-it-in-ci)"}
    missing = [what for what, text in wanted.items() if text not in first]
    assert not missing, f"not on the README's first {FIRST_SCREEN} lines: {missing}"


def test_the_readmes_links_reach_their_pages_and_sections(site):
    readme = (ROOT / "README.md").read_text()
    links = re.findall(r"\]\((docs/[a-z-]+)\.md(?:#([a-z0-9-]+))?\)", readme)
    assert len(links) >= 10, links
    broken = [f"{p}#{a}" for p, a in links
              if not (ROOT / f"{p}.md").exists() or (a and f'id="{a}"' not in page(site, p.split("/")[1]))]
    assert not broken, f"README links to nothing: {broken}"
    own = set(re.findall(r"\]\(#([a-z0-9-]+)\)", readme))
    heads = {re.sub(r"[^a-z0-9 -]", "", h.lower()).replace(" ", "-") for h in re.findall(r"^## (.+)$", readme, re.M)}
    assert own and own <= heads, f"README links to sections it does not have: {own - heads}"


def test_the_generated_pages_stand_alone_too():
    """What the declarations say (an experiment's `proves`, a fault's docstring) lands on the site as is."""
    for name, writer in docs_pages.PAGES.items():
        found = ELSEWHERE.findall(writer())
        assert not found, f"the generated {name} part refers to texts the reader does not have: {found}"


CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


@pytest.mark.skipif(CHROMIUM is None, reason="Debian's chromium is not installed (scripts/setup.sh installs it)")
@pytest.mark.parametrize("path, expect", [("", "Where to go from here"), ("reading-a-report/", "Scoreboard"),
                                          ("numbers/", "Measured by hand")])
def test_the_site_renders_in_chromium_without_console_messages(site, path, expect):
    """Served over HTTP as `mkdocs serve` would (the theme's search loads its index with fetch, which a
    file:// page may not): the page's DOM holds its text, and the browser's console
    stayed silent (any message, an uncaught error included, is logged as CONSOLE on stderr)."""
    handler = functools.partial(SimpleHTTPRequestHandler, directory=str(site))
    handler.log_message = lambda *a: None
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        with tempfile.TemporaryDirectory() as profile:
            # Chromium starts and renders a page in a few seconds; two minutes means it hangs.
            done = subprocess.run([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                                   "--disable-background-networking", "--disable-component-update", "--disable-sync",
                                   f"--user-data-dir={profile}", "--enable-logging=stderr", "--v=0",
                                   "--virtual-time-budget=3000", "--dump-dom",
                                   f"http://127.0.0.1:{server.server_port}/{path}"],
                                  capture_output=True, text=True, timeout=120)
    finally:
        server.shutdown()
    assert expect in done.stdout and 'class="md-content"' in done.stdout, done.stdout[-2000:]
    console = [line for line in done.stderr.splitlines() if ":CONSOLE" in line]
    assert not console, f"the browser's console: {console}"


def test_the_screenshots_the_pages_show_exist():
    text = (ROOT / "docs" / "reading-a-report.md").read_text()
    images = re.findall(r"!\[[^\]]*\]\(([^)]+)\)", text)
    assert len(images) >= 3 and all((ROOT / "docs" / i).stat().st_size > 10_000 for i in images), images


def test_an_unknown_generated_part_fails_the_page():
    sys.path.insert(0, str(ROOT / "docs" / "hooks"))
    try:
        import generated
    finally:
        sys.path.remove(str(ROOT / "docs" / "hooks"))
    fake = type("Page", (), {"file": type("File", (), {"src_uri": "x.md"})()})()
    assert "offset-before" in generated.on_page_markdown("<!-- generated: experiments -->", fake, None, None)
    with pytest.raises(ValueError, match="unknown generated part 'nope'"):
        generated.on_page_markdown("a\n<!-- generated: nope -->\n", fake, None, None)


def test_the_committed_reference_reports_link_to_the_docs_page_that_exists():
    """Their pages are opened in the repository: each heading's link there reaches docs/reading-a-report.md
    and an anchor it has."""
    anchors = set(re.findall(r"^#+ (.+?)(?: \{#([a-z-]+)\})?$", (ROOT / "docs" / "reading-a-report.md").read_text(),
                             re.M))
    ids = {a or re.sub(r"[^a-z0-9 -]", "", t.lower()).replace(" ", "-") for t, a in anchors}
    pages = sorted((ROOT / "reports" / "reference").rglob("*.html"))
    broken = [(p.relative_to(ROOT), href) for p in pages
              for href in re.findall(r"href='([^']*reading-a-report[^']*)'", p.read_text())
              if not ((p.parent / href.partition("#")[0]).resolve() == ROOT / "docs" / "reading-a-report.md"
                      and href.partition("#")[2] in ids)]
    assert pages and not broken, broken[:5]
