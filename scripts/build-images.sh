#!/usr/bin/env bash
# Builds the compose stack's Kafka and PostgreSQL images from Debian packages
# and Maven Central, for machines that cannot pull apache/kafka and postgres
# from a registry. Needs a Docker engine (scripts/docker-engine.sh start).
#
#   bash scripts/build-images.sh            # builds what is missing
#   bash scripts/build-images.sh --rebuild  # builds all four again
#   bash scripts/build-images.sh --only kafka,toxiproxy   # only those (and the base image they need)
#   bash scripts/build-images.sh --only base   # only the stock bookworm image (step 1)
#
# Then point the compose files at the images:
#   export HARNESS_KAFKA_IMAGE=harness-kafka:<KAFKA_VERSION> HARNESS_POSTGRES_IMAGE=harness-postgres:15 \
#          HARNESS_TOXIPROXY_IMAGE=harness-toxiproxy:<TOXIPROXY_VERSION>
#   harness up --stack compose
#
# Steps (each says how long it took):
#   1. harness-base:bookworm  Debian bookworm (minbase) made with debootstrap
#      from the mirror apt already uses, imported with `docker import`.
#   2. harness-kafka:<KAFKA_VERSION>  Debian's openjdk-17-jre-headless plus
#      Kafka's jars (server and command-line tools), resolved with mvn on this
#      machine as the local stack does (cached under the harness cache folder).
#   3. harness-postgres:15  Debian's postgresql-15.
#   4. harness-toxiproxy:<TOXIPROXY_VERSION>  Toxiproxy's server and CLI (the
#      proxies of `harness up --stack compose --brokers 3 --proxies`), built
#      with `go install` from the Go module proxy, static, at the paths of the
#      official image (/toxiproxy, /toxiproxy-cli). Skipped, saying so, where Go
#      is missing: only the latency fault on compose needs it.
# Installs debootstrap with apt-get (system-wide) if it is missing.
set -euo pipefail
cd "$(dirname "$0")/.."

START=$SECONDS
step() { STEP_T=$SECONDS; echo "build-images: $*" >&2; }
took() { echo "build-images:   done in $((SECONDS - STEP_T)) s" >&2; }
die() { echo "build-images: error: $*" >&2; exit 1; }
# The Python that has the harness installed: the harness passes its own; by hand, the checkout's
# virtual environment (scripts/setup.sh makes it), else python3.
PYTHON="${HARNESS_PYTHON:-}"
[ -n "$PYTHON" ] || { [ -x .venv/bin/python ] && PYTHON=.venv/bin/python; } || PYTHON=python3

REBUILD= ONLY=
while [ $# -gt 0 ]; do
  case "$1" in
    --rebuild) REBUILD=1 ;;
    --only) [ $# -ge 2 ] || die "usage: $0 [--rebuild] [--only base,kafka,postgres,toxiproxy]"; ONLY="$2"; shift ;;
    *) die "usage: $0 [--rebuild] [--only base,kafka,postgres,toxiproxy]" ;;
  esac
  shift
done
for svc in ${ONLY//,/ }; do
  case "$svc" in base|kafka|postgres|toxiproxy) ;; *) die "--only takes base, kafka, postgres and toxiproxy, not '$svc'" ;; esac
done
# wanted SVC: whether this run builds SVC's image (all of them without --only)
wanted() { [ -z "$ONLY" ] || [[ ",$ONLY," == *",$1,"* ]]; }

need_root() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi; }

command -v docker >/dev/null || die "no docker client on PATH"
docker info >/dev/null 2>&1 || die "no Docker engine answers at ${DOCKER_HOST:-the default socket}; run 'bash scripts/docker-engine.sh start' and the export line it prints"

# The release: $HARNESS_KAFKA_VERSION (as `harness up --stack compose --kafka-version` passes it), else the pinned one.
KAFKA_VERSION=
if wanted kafka; then KAFKA_VERSION="$("$PYTHON" -c '
import os, sys
from harness.core import versions
from harness.core.errors import HarnessError
from harness.stack import kafka_versions
try:
    release = kafka_versions.check(os.environ.get("HARNESS_KAFKA_VERSION") or versions.KAFKA_VERSION)
except HarnessError as e:
    sys.exit(str(e))
print(release)')" || die "no Kafka image for that release (see the line above)"; fi
export KAFKA_VERSION
BASE_IMAGE=harness-base:bookworm
KAFKA_IMAGE="harness-kafka:${KAFKA_VERSION}"
POSTGRES_IMAGE=harness-postgres:15
TOXIPROXY_VERSION="$("$PYTHON" -c 'from harness.core import versions; print(versions.TOXIPROXY_VERSION)')"
TOXIPROXY_IMAGE="harness-toxiproxy:${TOXIPROXY_VERSION}"

# build TAG CONTEXT [docker build options]: the build's output goes to a log, shown when it fails.
build() {
  local tag="$1" context="$2"; shift 2
  docker build --network host --build-arg "BASE=$BASE_IMAGE" "$@" -t "$tag" "$context" > "$TMP/build.log" 2>&1 \
    || { tail -n 20 "$TMP/build.log" >&2; die "docker build of $tag failed (see the lines above)"; }
}

have_image() { [ -z "$REBUILD" ] && docker image inspect "$1" >/dev/null 2>&1; }

# The Debian mirror apt uses here: the first bookworm (not -security/-updates) source.
debian_mirror() {
  local f
  for f in /etc/apt/sources.list.d/*.sources; do
    [ -f "$f" ] || continue
    awk 'BEGIN { RS = ""; FS = "\n" }
      {
        uris = ""; suites = ""
        for (i = 1; i <= NF; i++) {
          if ($i ~ /^URIs:/) { uris = $i; sub(/^URIs:[ \t]*/, "", uris) }
          if ($i ~ /^Suites:/) { suites = " " $i " "; sub(/^ Suites:/, "", suites) }
        }
        if (suites ~ /[ \t]bookworm[ \t]/) { split(uris, u, /[ \t]+/); print u[1]; exit }
      }' "$f"
  done
  for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
    [ -f "$f" ] || continue
    awk '$1 == "deb" { i = 2; if ($2 ~ /^\[/) { while ($i !~ /\]$/) i++; i++ } if ($(i + 1) == "bookworm") { print $i; exit } }' "$f"
  done
}

TMP="$(mktemp -d /tmp/harness-images.XXXXXX)"
trap 'rm -rf --one-file-system "$TMP"' EXIT

# --- 1. Base image (for Kafka's and PostgreSQL's) -------------------------------
if ! wanted base && ! wanted kafka && ! wanted postgres; then
  :
elif have_image "$BASE_IMAGE"; then
  echo "build-images: $BASE_IMAGE exists (--rebuild makes it again)" >&2
else
  MIRROR="$(debian_mirror | head -n 1)"
  [ -n "$MIRROR" ] || die "found no bookworm source in /etc/apt/sources.list{,.d/*}; cannot tell debootstrap which mirror to use"
  if ! command -v debootstrap >/dev/null; then
    step "installing Debian's debootstrap system-wide with apt-get"
    need_root apt-get update -qq
    need_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends debootstrap >/dev/null
    took
  fi
  step "making $BASE_IMAGE with debootstrap --variant=minbase bookworm from $MIRROR"
  need_root debootstrap --variant=minbase bookworm "$TMP/rootfs" "$MIRROR" > "$TMP/debootstrap.log" 2>&1 \
    || { tail -n 15 "$TMP/debootstrap.log" >&2; die "debootstrap failed (see the lines above)"; }
  # Leave no package lists or caches in the image; apt-get update fetches fresh ones.
  need_root rm -rf "$TMP/rootfs/var/lib/apt/lists/"* "$TMP/rootfs/var/cache/apt/"*.bin "$TMP/rootfs/var/cache/apt/archives/"*.deb
  need_root tar -C "$TMP/rootfs" --numeric-owner -c . | docker import - "$BASE_IMAGE" >/dev/null \
    || die "docker import of the bookworm root file system failed"
  need_root rm -rf --one-file-system "$TMP/rootfs"
  took
fi

# --- 2. Kafka ----------------------------------------------------------------
if ! wanted kafka; then
  :
elif have_image "$KAFKA_IMAGE"; then
  echo "build-images: $KAFKA_IMAGE exists (--rebuild makes it again)" >&2
else
  step "resolving Kafka ${KAFKA_VERSION}'s jars and command-line tools with mvn (cached after the first time)"
  LIB="$("$PYTHON" - <<'EOF'
# The local stack's class path (harness/stack/kafka-pom.xml) plus kafka-tools,
# whose classes the image's scripts (kafka-topics.sh, ...) run.
import os, subprocess, sys
from harness.core import safefile
from harness.core.paths import cache_dir
from harness.stack import maven
release = os.environ["KAFKA_VERSION"]
home = cache_dir() / f"kafka-image-{release}"
lib, marker = home / "lib", home / "resolved.ok"
if not marker.exists():
    # Kafka 3.x's tools bring reload4j as their SLF4J binding: the image logs by log4j2 alone (check_classpath).
    no_reload4j = "".join(f"        <exclusion><groupId>{g}</groupId><artifactId>{a}</artifactId></exclusion>\n"
                          for g, a in (("org.slf4j", "slf4j-reload4j"), ("ch.qos.reload4j", "reload4j")))
    tools = ("    <dependency>\n      <groupId>org.apache.kafka</groupId>\n"
             "      <artifactId>kafka-tools</artifactId>\n"
             f"      <version>{release}</version>\n      <exclusions>\n{no_reload4j}      </exclusions>\n"
             "    </dependency>\n  </dependencies>")
    import shutil
    shutil.rmtree(lib, ignore_errors=True)      # what a failed resolution left: copy-dependencies only adds
    home.mkdir(parents=True, exist_ok=True)
    safefile.write_text(home / "pom.xml", maven.pom_text(release).replace("  </dependencies>", tools, 1))
    proc = subprocess.run(["mvn", "-B", "-q", "-f", str(home / "pom.xml"), "dependency:copy-dependencies",
                           f"-DoutputDirectory={lib}", "-DincludeScope=runtime"],
                          capture_output=True, text=True, timeout=maven.MVN_TIMEOUT_S)
    if proc.returncode != 0:
        sys.exit("mvn failed:\n" + "\n".join((proc.stdout + proc.stderr).strip().splitlines()[-15:]))
    maven.check_classpath(lib)
    if not any(p.name.startswith("kafka-tools-") for p in lib.glob("*.jar")):
        sys.exit(f"no kafka-tools jar in {lib}")
    safefile.write_text(marker, release + "\n")
print(lib)
EOF
)" || die "could not resolve Kafka's jars"
  took
  step "building $KAFKA_IMAGE (Debian's openjdk-17-jre-headless with apt-get inside the build)"
  mkdir -p "$TMP/kafka"
  cp -r compose/images/kafka/. "$TMP/kafka/"
  mkdir -p "$TMP/kafka/libs"
  cp "$LIB"/*.jar "$TMP/kafka/libs/"
  build "$KAFKA_IMAGE" "$TMP/kafka" --build-arg "KAFKA_VERSION=$KAFKA_VERSION"
  took
fi

# --- 3. PostgreSQL -----------------------------------------------------------
if ! wanted postgres; then
  :
elif have_image "$POSTGRES_IMAGE"; then
  echo "build-images: $POSTGRES_IMAGE exists (--rebuild makes it again)" >&2
else
  step "building $POSTGRES_IMAGE (Debian's postgresql-15 with apt-get inside the build)"
  build "$POSTGRES_IMAGE" compose/images/postgres
  took
fi

# --- 4. Toxiproxy ------------------------------------------------------------
TOXIPROXY_EXPORT=" HARNESS_TOXIPROXY_IMAGE=$TOXIPROXY_IMAGE"
if ! wanted toxiproxy; then
  TOXIPROXY_EXPORT=
elif have_image "$TOXIPROXY_IMAGE"; then
  echo "build-images: $TOXIPROXY_IMAGE exists (--rebuild makes it again)" >&2
elif ! command -v go >/dev/null; then
  echo "build-images: Go is not installed: no $TOXIPROXY_IMAGE (only the latency fault on compose needs it)" >&2
  TOXIPROXY_EXPORT=
else
  step "building $TOXIPROXY_IMAGE (Toxiproxy ${TOXIPROXY_VERSION}'s server and CLI with go install, static)"
  mkdir -p "$TMP/toxiproxy/bin"
  cp compose/images/toxiproxy/Dockerfile "$TMP/toxiproxy/"
  for cmd in server cli; do
    CGO_ENABLED=0 GOBIN="$TMP/toxiproxy/bin" go install "github.com/Shopify/toxiproxy/v2/cmd/${cmd}@v${TOXIPROXY_VERSION}" \
      > "$TMP/go.log" 2>&1 || { tail -n 15 "$TMP/go.log" >&2; die "go install of Toxiproxy's $cmd failed"; }
  done
  build "$TOXIPROXY_IMAGE" "$TMP/toxiproxy"
  took
fi

echo "build-images: done in $((SECONDS - START)) s" >&2
EXPORTS=
[[ ",$ONLY," == *",base,"* ]] && EXPORTS+=" HARNESS_BASE_IMAGE=$BASE_IMAGE"
wanted kafka && EXPORTS+=" HARNESS_KAFKA_IMAGE=$KAFKA_IMAGE"
wanted postgres && EXPORTS+=" HARNESS_POSTGRES_IMAGE=$POSTGRES_IMAGE"
echo "export${EXPORTS}${TOXIPROXY_EXPORT}"
