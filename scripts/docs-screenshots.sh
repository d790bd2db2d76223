#!/usr/bin/env bash
# Takes the screenshots the "Reading a report" page shows again: the tests that render a run, an eos run,
# a suite and a compare report from the committed reference reports (reports/reference/, made by the
# commands in its COMMANDS.md) and load them in headless Chromium at 1,280 px, with
# HARNESS_UPDATE_SCREENSHOTS=1 so they copy their screenshots into docs/images/. Run it after a change to
# the HTML reports or to those reports.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-.venv/bin/python}
command -v chromium >/dev/null || command -v chromium-browser >/dev/null \
  || { echo "docs-screenshots: chromium is not installed" >&2; exit 1; }
HARNESS_UPDATE_SCREENSHOTS=1 "$PYTHON" -m pytest -q -p no:cacheprovider tests/unit/test_docs_screenshots.py
git status --short docs/images/
