#!/usr/bin/env bash
# Installs what the harness needs on a fresh Debian machine, idempotently:
# PostgreSQL's server binaries (Debian's `postgresql`), the Python package with
# its test extra, and (best effort) actionlint and Chromium for the tests that
# use them. Java 17 and Maven must already be there; Kafka's jars are resolved
# by `harness up` itself, with mvn, on first use.
set -euo pipefail
cd "$(dirname "$0")/.."

need_root() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi; }

apt_install() {
  # The harness runs its own cluster: don't let Debian's package create and start a system one.
  need_root mkdir -p /etc/postgresql-common/createcluster.d
  echo "create_main_cluster = false" | need_root tee /etc/postgresql-common/createcluster.d/harness.conf >/dev/null
  [ -n "${APT_UPDATED:-}" ] || { need_root apt-get update -qq; APT_UPDATED=1; }
  need_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$@" >/dev/null
}

if ! ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1; then
  echo "setup: installing Debian's postgresql" >&2
  apt_install postgresql
fi
if [ "${HARNESS_SETUP_BROWSER:-1}" = 1 ] && ! command -v chromium >/dev/null 2>&1; then
  echo "setup: installing Debian's chromium (for the HTML report's browser test)" >&2
  apt_install chromium || echo "setup: chromium not installed; the browser test will skip" >&2
fi
for tool in java mvn; do
  command -v "$tool" >/dev/null || { echo "setup: $tool is missing: install Java 17 and Maven (apt-get install openjdk-17-jdk-headless maven)" >&2; exit 1; }
done

python3 -m pip install -q --disable-pip-version-check -e '.[test]'
bash .ci/install-actionlint.sh >/dev/null 2>&1 || echo "setup: actionlint not installed; the workflow test will skip" >&2
echo "setup: done" >&2
