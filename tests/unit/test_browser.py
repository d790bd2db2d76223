"""The HTML reports in a real browser: headless Chromium loads them, we read its DOM and keep a screenshot.

Screenshots land in test-artifacts/ (git-ignored) for a person to look at.
"""

import json
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

from harness.reporting import html
from harness.reporting.run_report import RunReport
from harness.reporting.suite_report import render_html
from tests.unit.sample_report import sample

ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts"
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
# Flags for a closed network and a root user (see the machine notes in the README).
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync"]

pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="Debian's chromium is not installed (scripts/setup.sh installs it)")


def chromium(page: Path, *extra: str) -> subprocess.CompletedProcess:
    with tempfile.TemporaryDirectory() as profile:
        return subprocess.run([CHROMIUM, *FLAGS, f"--user-data-dir={profile}", *extra, page.as_uri()],
                              capture_output=True, text=True, timeout=120)


def load(page: Path, shot: str) -> str:
    ARTIFACTS.mkdir(exist_ok=True)
    png = ARTIFACTS / shot
    png.unlink(missing_ok=True)
    chromium(page, "--window-size=1200,1600", f"--screenshot={png}")
    assert png.exists() and png.stat().st_size > 10_000, "no screenshot"
    dom = chromium(page, "--dump-dom").stdout
    assert "<svg" in dom, "the browser produced no DOM with charts"
    return dom


def test_run_report_renders_charts_in_chromium(tmp_path):
    d = sample(dups=7)
    page = tmp_path / "report.html"
    page.write_text(html.render(RunReport(d)))
    dom = load(page, "run-report.png")
    assert 'id="chart-anomalies"' in dom and 'id="chart-timeline"' in dom
    values = dict(re.findall(r'class="bar-([a-z_-]+)" data-value="(\d+)"', dom))
    assert values["duplicates"] == "7" and values["predicted-duplicates"] == "7" and values["lost"] == "0"
    assert len(re.findall(r'class="crash"', dom)) == len(d["crashes"])
    assert 'id="verdict" class="verdict as-predicted"' in dom


def test_suite_report_renders_one_bar_pair_per_experiment(tmp_path):
    rows = []
    for name, lost, dups in (("offset-before", 97, 0), ("offset-after", 0, 107), ("dedupe", 0, 0)):
        d = sample(name, lost=lost, dups=dups)
        rows.append({"experiment": name, "report": f"{name}/report.json", "verdict": "as-predicted", "seconds": 30,
                     "counts": d["counts"], "ledger": d["ledger"], "crashes": 1, "kafka_output": None,
                     "summary": d["summary"]})
    summary = {"suite_id": "20261129T190000-suite", "conclusion": "Exactly-once held in dedupe.", "experiments": rows,
               "timings": {"wall_seconds": 90}, "environment": {"kafka_version": "4.1.1"}, "command_args": []}
    page = tmp_path / "suite.html"
    page.write_text(render_html(summary))
    dom = load(page, "suite-report.png")
    lost = re.findall(r'class="bar-lost" data-value="(\d+)"', dom)
    dup = re.findall(r'class="bar-duplicates" data-value="(\d+)"', dom)
    assert lost == ["97", "0", "0"] and dup == ["0", "107", "0"]
    runs = re.findall(r'<a href="([^"]*)">', dom)          # the docs links of the headings carry a title
    assert runs == [f"{n}/report.html" for n in ("offset-before", "offset-after", "dedupe")], runs
    assert "Exactly-once held in dedupe." in dom
    json.dumps(summary)


MEASURE = """<script>
const svg = document.getElementById('chart-anomalies');
const boxes = [...svg.querySelectorAll('text.group-label')].map(t => { const b = t.getBBox(); return [t.textContent, b.x, b.x + b.width]; });
const legend = Object.fromEntries([...svg.querySelectorAll('rect.legend')].map(r => [r.dataset.label, r.getAttribute('fill')]));
const bars = [...svg.querySelectorAll('rect[data-group]')].filter(r => !r.getAttribute('class').startsWith('bar-predicted'))
  .map(r => [r.dataset.group, r.getAttribute('fill')]);
const pre = document.createElement('pre'); pre.id = 'measured';
pre.textContent = JSON.stringify({boxes, legend, bars}); document.body.appendChild(pre);
</script>"""


def test_eos_chart_legend_matches_the_bars_and_labels_do_not_touch(tmp_path):
    """An eos-dedupe report: lost, duplicated, dedupe hits and aborted copies, each beside its prediction."""
    d = sample("eos-dedupe", dups=0)
    d["stack"]["dedupe_table"] = "harness.dedupe_x"
    d["counts"]["dedupe_hits"] = d["predicted"]["dedupe_hits"] = 12
    d["kafka_output"] = {"read_committed": {"records": 10, "duplicates": 0, "lost": 0, "unprocessed": 0},
                         "read_uncommitted": {"records": 22, "duplicates": 12, "lost": 0, "unprocessed": 0},
                         "aborted_records": 12}
    d["predicted"]["kafka_output"] = {"read_committed": {"duplicates": 0, "lost": 0},
                                      "read_uncommitted": {"duplicates": 12, "lost": 0}}
    page = tmp_path / "report.html"
    page.write_text(html.render(RunReport(d)).replace("</body>", MEASURE + "</body>"))
    dom = load(page, "eos-report.png")
    m = json.loads(re.search(r'<pre id="measured">(.*?)</pre>', dom, re.S).group(1).replace("&quot;", '"'))
    groups = [b[0] for b in m["boxes"]]
    assert groups == ["lost", "duplicated", "dedupe hits", "aborted copies"]
    for (_, _, right), (_, left, _) in zip(m["boxes"], m["boxes"][1:]):
        assert right < left, f"group labels touch: {m['boxes']}"
    for group, fill in m["bars"]:
        assert m["legend"][group] == fill, f"legend swatch of {group} is {m['legend'][group]}, its bar {fill}"
    assert "predicted" in m["legend"]
