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

from harness.report import html
from harness.report.model import RunReport
from harness.report.suite import render_html
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
    assert dom.count('<a href="') == 3 and "Exactly-once held in dedupe." in dom
    json.dumps(summary)
