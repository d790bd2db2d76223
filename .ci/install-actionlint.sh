#!/usr/bin/env bash
# Installs the pinned actionlint (the linter for .github/workflows/*.yml that
# tests/unit/test_workflow.py runs) with `go install`, unless that version is
# already on PATH or in "$(go env GOPATH)/bin". Safe to run any number of times.
#
#   bash .ci/install-actionlint.sh          # pinned version
#   ACTIONLINT_VERSION=1.7.12 bash .ci/install-actionlint.sh
#
# The binary lands in "$(go env GOBIN)" or "$(go env GOPATH)/bin", where the
# test looks for it; nothing needs to be added to PATH.
set -euo pipefail

ACTIONLINT_VERSION="${ACTIONLINT_VERSION:-1.7.12}"
ACTIONLINT_VERSION="${ACTIONLINT_VERSION#v}"
MODULE="github.com/rhysd/actionlint/cmd/actionlint"

log() { printf 'install-actionlint: %s\n' "$*" >&2; }

# `actionlint -version` prints the version (e.g. "v1.7.12") on its first line.
version_of() { "$1" -version 2>/dev/null | head -n 1 | sed 's/^v//'; }

if ! command -v go >/dev/null 2>&1; then
  if command -v actionlint >/dev/null 2>&1; then
    log "go is not installed; using $(command -v actionlint) ($(version_of actionlint))"
    exit 0
  fi
  log "neither actionlint nor go is installed; install Go to get actionlint ${ACTIONLINT_VERSION}"
  exit 1
fi

# `go` needs a home for its module cache and GOPATH.
if [[ -z "${HOME:-}" ]]; then
  HOME="$(getent passwd "$(id -u)" | cut -d: -f6)"
  export HOME
fi

bindir="$(go env GOBIN)"
if [[ -z "$bindir" ]]; then
  gopath="$(go env GOPATH)"
  bindir="${gopath%%:*}/bin"
fi

for candidate in "$(command -v actionlint 2>/dev/null || true)" "$bindir/actionlint"; do
  if [[ -n "$candidate" && -x "$candidate" && "$(version_of "$candidate")" == "$ACTIONLINT_VERSION" ]]; then
    log "actionlint ${ACTIONLINT_VERSION} is already installed at ${candidate}"
    exit 0
  fi
done

log "installing actionlint ${ACTIONLINT_VERSION} into ${bindir} ..."
# One retry: a first fetch from the module proxy occasionally times out.
if ! go install "${MODULE}@v${ACTIONLINT_VERSION}"; then
  log "go install failed; retrying once"
  sleep 5
  go install "${MODULE}@v${ACTIONLINT_VERSION}"
fi

installed="$(version_of "$bindir/actionlint")"
if [[ "$installed" != "$ACTIONLINT_VERSION" ]]; then
  log "expected actionlint ${ACTIONLINT_VERSION} at ${bindir}/actionlint, found '${installed}'"
  exit 1
fi
log "installed ${bindir}/actionlint (${installed})"
