#!/usr/bin/env bash
# Takes the screenshots the "Reading a report" page shows, with headless Chromium, from the committed
# reference reports (real runs: reports/reference/, made by the commands in its COMMANDS.md). Run it
# again after a change to the HTML report or to those reports; the images land in docs/images/.
set -euo pipefail
cd "$(dirname "$0")/.."
CHROMIUM=$(command -v chromium || command -v chromium-browser) || { echo "docs-screenshots: chromium is not installed" >&2; exit 1; }
mkdir -p docs/images
shot() {   # shot REPORT.html IMAGE.png WIDTH,HEIGHT
  local profile; profile=$(mktemp -d)
  "$CHROMIUM" --headless --no-sandbox --disable-gpu --no-first-run --disable-background-networking \
    --disable-component-update --disable-sync --hide-scrollbars --user-data-dir="$profile" \
    --window-size="$3" --screenshot="$PWD/docs/images/$2" "file://$PWD/$1" 2>/dev/null
  rm -rf "$profile"
  echo "docs-screenshots: docs/images/$2 from $1" >&2
}
shot reports/reference/suite/offset-before/report.html run-report.png 1200,1500
shot reports/reference/suite/eos/report.html run-report-eos.png 1200,1500
shot reports/reference/suite/suite.html suite-report.png 1200,1300
