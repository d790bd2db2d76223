#!/usr/bin/env bash
# Installs what the harness needs on a fresh Debian machine, idempotently:
# PostgreSQL's server binaries (Debian's `postgresql`), the Python package with
# its test and docs extras, and (best effort) actionlint and Chromium for the tests that
# use them. Java 17 and Maven must already be there; Kafka's jars are resolved
# by `harness up` itself, with mvn, on first use.
set -euo pipefail
cd "$(dirname "$0")/.."

# Each step says what it does, system-wide or not, before it starts, and how long it took.
START=$SECONDS
step() { STEP_T=$SECONDS; echo "setup: $*" >&2; }
took() { echo "setup:   done in $((SECONDS - STEP_T)) s" >&2; }

need_root() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi; }

apt_install() {
  # The harness runs its own cluster: don't let Debian's package create and start a system one.
  need_root mkdir -p /etc/postgresql-common/createcluster.d
  echo "create_main_cluster = false" | need_root tee /etc/postgresql-common/createcluster.d/harness.conf >/dev/null
  [ -n "${APT_UPDATED:-}" ] || { need_root apt-get update -qq; APT_UPDATED=1; }
  need_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$@" >/dev/null
}

if ! ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1; then
  step "installing Debian's postgresql system-wide with apt-get (server binaries only; no cluster is created or started)"
  apt_install postgresql
  took
fi
if [ "${HARNESS_SETUP_BROWSER:-1}" = 1 ] && ! command -v chromium >/dev/null 2>&1; then
  step "installing Debian's chromium system-wide with apt-get (for the HTML report's browser test; skip with HARNESS_SETUP_BROWSER=0)"
  apt_install chromium || echo "setup: chromium not installed; the browser test will skip" >&2
  took
fi
for tool in java mvn; do
  command -v "$tool" >/dev/null || { echo "setup: $tool is missing: install Java 17 and Maven (apt-get install openjdk-17-jdk-headless maven)" >&2; exit 1; }
done

# A virtual environment of the checkout's own: a distribution's Python (Debian 12 and later, Ubuntu 24.04)
# refuses `pip install` into itself (PEP 668, externally-managed-environment), and nothing is installed
# beside the system's packages. $HARNESS_VENV names another folder.
VENV="${HARNESS_VENV:-$PWD/.venv}"
if ! python3 -c 'import ensurepip, venv' >/dev/null 2>&1; then
  step "installing Debian's python3-venv system-wide with apt-get (python3 -m venv needs it)"
  apt_install python3-venv
  took
fi
if [ ! -x "$VENV/bin/python" ]; then
  step "making a virtual environment in $VENV (python3 -m venv)"
  python3 -m venv "$VENV"
  took
fi
step "installing the harness into $VENV with pip (editable, with its test and docs extras)"
"$VENV/bin/python" -m pip install -q --disable-pip-version-check -e '.[test,docs]'
took
step "installing actionlint into $(go env GOPATH 2>/dev/null || echo "Go's GOPATH")/bin with go install (for the workflow test; best effort)"
bash .ci/install-actionlint.sh >/dev/null 2>&1 || echo "setup: actionlint not installed; the workflow test will skip" >&2
took
step "installing toxiproxy-server into $(go env GOPATH 2>/dev/null || echo "Go's GOPATH")/bin with go install (for \`harness up --proxies\` and the latency fault)"
bash .ci/install-toxiproxy.sh || echo "setup: toxiproxy-server not installed; \`harness up --proxies\` will say so, and its tests fail in CI" >&2
took
echo "setup: done in $((SECONDS - START)) s; the harness is $VENV/bin/harness" >&2
