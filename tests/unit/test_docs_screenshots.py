"""The screenshots of "Reading a report" are taken here, by headless Chromium, from reports these tests render.

The reports are rendered now, by today's renderers, from the committed reference reports (real runs:
reports/reference/suite, made by the command in its COMMANDS.md): a run report (offset-before), an eos
run report, the suite's page, and `harness compare`'s Markdown of two of those runs as a pull request
shows it. Each is loaded at 1,280 px wide; the test asserts it rendered (its headings and tables are in
the browser's DOM), that the console stayed silent, and that neither the page nor its main tables scroll
sideways. Pixels are never compared: every run takes the screenshots into a temporary folder and checks
they are 1,280 px wide PNGs; with HARNESS_UPDATE_SCREENSHOTS=1 they replace the ones in docs/images/
(scripts/docs-screenshots.sh does that).
"""

import html as html_module
import json
import os
import re
import shutil
import struct
from pathlib import Path

import pytest

from harness.reporting import comparison as compare, compare_render, html, suite_report
from harness.reporting.compare_targets import load_target
from harness.reporting.run_report import RunReport
from tests.unit.test_browser import CHROMIUM, chromium

ROOT = Path(__file__).resolve().parents[2]
SUITE = ROOT / "reports" / "reference" / "suite"
IMAGES = ROOT / "docs" / "images"
WIDTH, HEIGHT = 1280, 1500          # the window; each screenshot is as high as REPORTS says
UPDATE = os.environ.get("HARNESS_UPDATE_SCREENSHOTS") == "1"

pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="Debian's chromium is not installed (scripts/setup.sh installs it)")

# Measures the layout once the page has rendered, into a hidden element --dump-dom prints: the page's own
# width against the window's, and each table's right edge and whether its box scrolls sideways.
PROBE = """<script>
const tables = [...document.querySelectorAll('table')].map(t => {
  const box = t.parentElement;
  let h = (t.closest('div.wide') || t).previousElementSibling;
  while (h && !/^H[12]$/.test(h.tagName)) h = h.previousElementSibling;
  return {heading: h ? h.textContent : '', right: Math.ceil(t.getBoundingClientRect().right),
          scrolls: box.scrollWidth > box.clientWidth, width: Math.ceil(t.scrollWidth)};
});
const pre = document.createElement('pre'); pre.id = 'layout-probe'; pre.hidden = true;
pre.textContent = JSON.stringify({window: window.innerWidth, page: document.documentElement.scrollWidth, tables});
document.body.appendChild(pre);
</script>"""


def markdown_page(title: str, text: str) -> str:
    """Markdown as a pull request comment shows it: rendered to HTML, in the reports' own style."""
    markdown = pytest.importorskip("markdown", reason="the docs extra is not installed (pip install -e '.[docs]')")
    return html.page(title, markdown.markdown(text, extensions=["tables"]))


def run_page(name: str) -> str:
    return html.render(RunReport.load(SUITE / name))


def suite_page() -> str:
    return suite_report.render_html(json.loads((SUITE / "suite.json").read_text()), SUITE)


def compare_page() -> str:
    targets = [load_target(str(SUITE / name)) for name in ("offset-before", "offset-after")]
    return markdown_page("harness compare", compare_render.to_markdown(compare.compare(targets)))


# image -> (the page, the headings it must show, the tables that must not scroll sideways, the shot's height)
REPORTS = {
    "run-report.png": (lambda: run_page("offset-before"), ["Scoreboard", "Timeline", "Parameters"], ["Scoreboard"],
                       1500),
    "run-report-eos.png": (lambda: run_page("eos"), ["Scoreboard", "Timeline"], ["Scoreboard"], 1500),
    "suite-report.png": (suite_page, ["Scoreboard", "Where the time went"], ["Scoreboard"], 1300),
    "compare-report.png": (compare_page, [], [""], 440),
}


def png_size(path: Path) -> tuple[int, int]:
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", f"{path} is not a PNG"
    return struct.unpack(">II", data[16:24])


def console(done) -> list[str]:
    return [line for line in done.stderr.splitlines() if ":CONSOLE" in line]


LOGGING = ["--enable-logging=stderr", "--v=0"]


@pytest.fixture(scope="module")
def rendered(tmp_path_factory):
    """image -> (the page as rendered, Chromium's DOM of it with the probe's layout, its console lines);
    each page is loaded once for the tests below."""
    seen = {}

    def load(image: str):
        if image not in seen:
            text = REPORTS[image][0]()
            page = tmp_path_factory.mktemp("probe") / "report.html"
            page.write_text(text.replace("</body>", PROBE + "</body>"))
            done = chromium(page, *LOGGING, f"--window-size={WIDTH},{HEIGHT}", "--virtual-time-budget=2000",
                            "--dump-dom")
            probe = re.search(r'<pre id="layout-probe" hidden="">(.*?)</pre>', done.stdout, re.S)
            assert probe, f"the page did not render (no probe in its DOM): {done.stdout[-1000:]}"
            layout = json.loads(html_module.unescape(probe.group(1)))
            seen[image] = text, done.stdout, layout, console(done)
        return seen[image]
    return load


@pytest.mark.parametrize("image", list(REPORTS))
def test_the_report_renders_at_1280_px_and_its_screenshot_is_taken(tmp_path, rendered, image):
    headings, height = REPORTS[image][1], REPORTS[image][3]
    text, dom, layout, said = rendered(image)
    assert not said, f"the browser's console: {said}"
    assert layout["window"] == WIDTH, layout
    shown = [t["heading"] for t in layout["tables"]]
    for h in headings:
        assert any(s.startswith(h) for s in shown) or f">{h}<" in dom, f"no {h!r} in the rendered page: {shown}"

    page = tmp_path / "report.html"
    page.write_text(text)
    png = tmp_path / image
    done = chromium(page, *LOGGING, "--hide-scrollbars", f"--window-size={WIDTH},{height}", f"--screenshot={png}")
    assert not console(done), f"the browser's console: {console(done)}"
    assert png.exists() and png.stat().st_size > 10_000, "no screenshot"
    assert png_size(png) == (WIDTH, height)
    if UPDATE:
        IMAGES.mkdir(exist_ok=True)
        shutil.copy(png, IMAGES / image)


# Every page (the suite's, once wider, included) must fit 1,280 px.
EACH = REPORTS


@pytest.mark.parametrize("image", EACH)
def test_the_page_does_not_scroll_sideways_at_1280_px(rendered, image):
    layout = rendered(image)[2]
    assert layout["page"] <= WIDTH, f"the page scrolls sideways at {WIDTH} px: {layout['page']} px wide"


@pytest.mark.parametrize("image", EACH)
def test_its_main_tables_do_not_scroll_sideways_at_1280_px(rendered, image):
    layout, wanted = rendered(image)[2], REPORTS[image][2]
    shown = [t["heading"] for t in layout["tables"]]
    for want in wanted:
        mine = [t for t in layout["tables"] if t["heading"].startswith(want)]
        assert mine, f"no table under {want!r}: {shown}"
        bad = [t for t in mine if t["scrolls"] or t["right"] > WIDTH]
        assert not bad, f"tables that scroll sideways at {WIDTH} px: {bad}"


def test_reading_a_report_shows_every_screenshot_the_tests_take():
    text = (ROOT / "docs" / "reading-a-report.md").read_text()
    shown = set(re.findall(r"!\[[^\]]*\]\(images/([^)]+)\)", text))
    assert shown == set(REPORTS), f"shown {sorted(shown)}, taken {sorted(REPORTS)}"
    assert all((IMAGES / name).stat().st_size > 10_000 for name in shown)
