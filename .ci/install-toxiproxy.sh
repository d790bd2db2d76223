#!/usr/bin/env bash
# Installs the pinned toxiproxy-server (the TCP proxy behind `harness up --proxies` and the latency
# fault, harness/stack/toxiproxy.py) with `go install`, unless that version is already installed.
# Safe to run any number of times.
#
#   bash .ci/install-toxiproxy.sh          # pinned version
#   TOXIPROXY_VERSION=2.3.0 bash .ci/install-toxiproxy.sh
#
# `go install` names the binary after its folder (`server`): it is built into a folder of its own,
# then moved to "$(go env GOPATH)/bin/toxiproxy-server", where the harness looks for it (after PATH).
set -euo pipefail

TOXIPROXY_VERSION="${TOXIPROXY_VERSION:-2.5.0}"
TOXIPROXY_VERSION="${TOXIPROXY_VERSION#v}"
MODULE="github.com/Shopify/toxiproxy/v2/cmd/server"

log() { printf 'install-toxiproxy: %s\n' "$*" >&2; }

# A binary built by `go install` prints "git" for -version; the module version is in its build info.
version_of() { go version -m "$1" 2>/dev/null | awk '$1 == "mod" && $2 == "github.com/Shopify/toxiproxy/v2" { sub(/^v/, "", $3); print $3 }'; }

if ! command -v go >/dev/null 2>&1; then
  log "Go is not installed; install it to build toxiproxy-server ${TOXIPROXY_VERSION}"
  exit 1
fi
if [[ -z "${HOME:-}" ]]; then
  HOME="$(getent passwd "$(id -u)" | cut -d: -f6)"
  export HOME
fi

gopath="$(go env GOPATH)"
bindir="${gopath%%:*}/bin"
target="$bindir/toxiproxy-server"
if [[ -x "$target" && "$(version_of "$target")" == "$TOXIPROXY_VERSION" ]]; then
  log "toxiproxy-server ${TOXIPROXY_VERSION} is already installed at ${target}"
  exit 0
fi

build="$(mktemp -d)"
trap 'rm -rf "$build"' EXIT
log "building toxiproxy-server ${TOXIPROXY_VERSION} with go install ..."
# One retry: a first fetch from the module proxy occasionally times out.
if ! GOBIN="$build" go install "${MODULE}@v${TOXIPROXY_VERSION}"; then
  log "go install failed; retrying once"
  sleep 5
  GOBIN="$build" go install "${MODULE}@v${TOXIPROXY_VERSION}"
fi
mkdir -p "$bindir"
mv -f "$build/server" "$target"
installed="$(version_of "$target")"
if [[ "$installed" != "$TOXIPROXY_VERSION" ]]; then
  log "expected toxiproxy-server ${TOXIPROXY_VERSION} at ${target}, found '${installed}'"
  exit 1
fi
log "installed ${target} (${installed})"
