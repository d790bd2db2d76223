#!/usr/bin/env bash
# Starts, stops or reports a private Docker engine for `harness up --stack compose`.
#
#   bash scripts/docker-engine.sh start     # prints `export DOCKER_HOST=...` last
#   bash scripts/docker-engine.sh status
#   bash scripts/docker-engine.sh stop
#   bash scripts/docker-engine.sh stop-after PID   # stop it once process PID is gone
#
# `start` uses an engine that already answers (`docker info` succeeds with the
# current DOCKER_HOST or the default socket) and then changes nothing.
# Otherwise it installs what is missing -- Debian's docker.io with apt-get
# (system-wide; no system service is started) and the compose v2 CLI plugin,
# built with `go install` into ~/.docker/cli-plugins -- and starts a private
# dockerd whose data, state, pid file and socket all live in one folder:
# $HARNESS_DOCKER_DIR, default /tmp/harness-docker. That engine leaves the
# machine's firewall and forwarding settings alone (--iptables=false
# --ip-forward=false: published ports go through docker-proxy, and containers
# reach each other on their own network but not the outside) and makes no
# default bridge (docker0): compose makes its own networks, and `docker run`
# needs `--network host` or a network made with `docker network create`.
#
# `stop` stops only the dockerd this script started (its pid file, command line
# and start time must all agree), its containerd child, and deletes the folder.
# Every command is safe to repeat.
#
# `stop-after PID` leaves a watcher in a session of its own that runs `stop`
# once process PID (the one with the start time PID has now) has ended,
# however it ended: a CI job that starts an engine through its tests and is
# killed before they stop it leaves no engine behind. It returns at once.
set -euo pipefail

DIR="${HARNESS_DOCKER_DIR:-/tmp/harness-docker}"
COMPOSE_VERSION="${HARNESS_COMPOSE_VERSION:-2.29.7}"
START_TIMEOUT_S="${HARNESS_DOCKER_START_TIMEOUT:-60}"

log() { printf 'docker-engine: %s\n' "$*" >&2; }
die() { printf 'docker-engine: error: %s\n' "$*" >&2; exit 1; }

case "$DIR" in /*) ;; *) die "HARNESS_DOCKER_DIR must be an absolute path, not '$DIR'" ;; esac
DIR="${DIR%/}"
SOCK="$DIR/docker.sock"
PIDFILE="$DIR/dockerd.pid"
STARTFILE="$DIR/dockerd.start"   # the process start time (field 22 of /proc/PID/stat) we saw at start
LOGFILE="$DIR/dockerd.log"
# A unix socket path holds at most 107 bytes plus its terminating NUL.
[ "${#SOCK}" -le 107 ] || die "socket path $SOCK is longer than 107 bytes; choose a shorter HARNESS_DOCKER_DIR"

need_root() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi; }

start_time_of() { # field 22 of /proc/PID/stat; the command name (field 2) may hold spaces
  local stat
  stat="$(cat "/proc/$1/stat" 2>/dev/null)" || return 1
  stat="${stat##*) }"
  set -- $stat
  echo "${20}"
}

# The pid of the dockerd this script started, or nothing (status 1). A pid file
# outlives its process and pids are recycled, so the process must also be a
# dockerd, name this folder as one whole argument, and have the start time we
# recorded.
our_pid() {
  local pid want arg found=
  [ -f "$PIDFILE" ] && [ ! -L "$PIDFILE" ] && [ -O "$PIDFILE" ] || return 1
  [ -f "$STARTFILE" ] && [ ! -L "$STARTFILE" ] && [ -O "$STARTFILE" ] || return 1
  pid="$(tr -dc 0-9 < "$PIDFILE")"
  [ -n "$pid" ] && [ -r "/proc/$pid/cmdline" ] || return 1
  [ "$(basename "$(readlink "/proc/$pid/exe" 2>/dev/null)")" = dockerd ] || return 1
  while IFS= read -r -d '' arg; do
    [ "$arg" = "--data-root=$DIR/data" ] && found=1
  done < "/proc/$pid/cmdline"
  [ -n "$found" ] || return 1
  want="$(tr -dc 0-9 < "$STARTFILE")"
  [ "$(start_time_of "$pid")" = "$want" ] || return 1
  echo "$pid"
}

answers() { DOCKER_HOST="unix://$SOCK" docker info >/dev/null 2>&1; }

# Pids of processes (containerd, its shims) whose command line names this folder.
children_in_dir() {
  local p arg
  for p in /proc/[0-9]*; do
    p="${p#/proc/}"
    [ -r "/proc/$p/cmdline" ] || continue
    while IFS= read -r -d '' arg; do
      case "$arg" in "$DIR"/*|*"=$DIR"/*) echo "$p"; break ;; esac
    done 2>/dev/null < "/proc/$p/cmdline" || true
  done
}

install_engine() {
  log "installing Debian's docker.io system-wide with apt-get (no system dockerd or containerd is started)"
  local t=$SECONDS policy=/usr/sbin/policy-rc.d made_policy=
  # invoke-rc.d and deb-systemd-invoke ask policy-rc.d first; 101 means "do not start anything".
  if [ ! -e "$policy" ]; then
    printf '#!/bin/sh\nexit 101\n' | need_root tee "$policy" >/dev/null
    need_root chmod 755 "$policy"
    made_policy=1
  fi
  local rc=0
  need_root apt-get update -qq && \
    need_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends docker.io >/dev/null || rc=$?
  [ -z "$made_policy" ] || need_root rm -f "$policy"
  [ "$rc" = 0 ] || die "apt-get could not install docker.io (exit $rc)"
  command -v dockerd >/dev/null || die "docker.io is installed but dockerd is not on PATH"
  log "  done in $((SECONDS - t)) s"
}

install_compose() {
  command -v go >/dev/null || die "the compose plugin is missing and Go is not installed to build it (apt-get install golang)"
  local t=$SECONDS plugins="${DOCKER_CONFIG:-$HOME/.docker}/cli-plugins" gobin
  log "building the compose v2 plugin ${COMPOSE_VERSION} with go install (takes several minutes the first time); it goes to $plugins/docker-compose"
  gobin="$(go env GOBIN)"
  [ -n "$gobin" ] || { gobin="$(go env GOPATH)"; gobin="${gobin%%:*}/bin"; }
  GOFLAGS=-mod=mod go install "github.com/docker/compose/v2/cmd@v${COMPOSE_VERSION}" \
    || die "go install github.com/docker/compose/v2/cmd@v${COMPOSE_VERSION} failed"
  mkdir -p "$plugins"
  install -m 755 "$gobin/cmd" "$plugins/docker-compose"
  docker compose version >/dev/null 2>&1 || die "docker compose still fails after installing $plugins/docker-compose"
  log "  done in $((SECONDS - t)) s"
}

cmd_start() {
  local pid
  if pid="$(our_pid)" && answers; then
    log "the private engine already runs (pid $pid)"
    echo "export DOCKER_HOST=unix://$SOCK"
    return
  fi
  if docker info >/dev/null 2>&1; then
    log "a Docker engine already answers at ${DOCKER_HOST:-the default socket}; using it and starting nothing"
    docker compose version >/dev/null 2>&1 || log "note: that docker client has no compose plugin (docker compose version fails)"
    [ -z "${DOCKER_HOST:-}" ] || echo "export DOCKER_HOST=$DOCKER_HOST"
    return
  fi
  command -v docker >/dev/null || die "no docker client on PATH"
  command -v dockerd >/dev/null || install_engine
  docker compose version >/dev/null 2>&1 || install_compose

  if [ -e "$DIR" ] || [ -L "$DIR" ]; then
    [ -d "$DIR" ] && [ ! -L "$DIR" ] && [ -O "$DIR" ] || die "$DIR exists and is not a folder of ours; remove it or set HARNESS_DOCKER_DIR"
    pid="$(our_pid)" && die "dockerd (pid $pid) runs from $DIR but does not answer; run '$0 stop' first"
    log "$DIR is left from an engine that no longer runs; starting over in it"
    cleanup_dir
  fi
  # A new folder of ours, not one planted between the check above and here (no -p: it accepts what exists).
  mkdir -m 700 -- "$DIR" || die "cannot create $DIR"
  [ -d "$DIR" ] && [ ! -L "$DIR" ] && [ -O "$DIR" ] || die "$DIR is not a folder of ours"

  local t=$SECONDS
  log "starting a private dockerd in $DIR"
  # setsid: the engine outlives this script and the shell it was started from.
  setsid dockerd \
    "--data-root=$DIR/data" \
    "--exec-root=$DIR/run" \
    "--pidfile=$PIDFILE" \
    "--host=unix://$SOCK" \
    --bridge=none \
    --iptables=false \
    --ip-forward=false \
    >"$LOGFILE" 2>&1 </dev/null &
  pid=$!
  start_time_of "$pid" > "$STARTFILE" || die "dockerd exited at once: $(tail -n 5 "$LOGFILE" | tr '\n' ' ')"
  local deadline=$((SECONDS + START_TIMEOUT_S))
  until answers; do
    if ! kill -0 "$pid" 2>/dev/null; then
      log "dockerd exited; its last log lines:"; tail -n 10 "$LOGFILE" >&2
      die "dockerd did not start (log: $LOGFILE)"
    fi
    if [ "$SECONDS" -ge "$deadline" ]; then
      log "dockerd's last log lines:"; tail -n 10 "$LOGFILE" >&2
      die "dockerd did not answer on $SOCK within ${START_TIMEOUT_S} s (it still runs as pid $pid; '$0 stop' ends it)"
    fi
    sleep 0.5
  done
  [ "$(tr -dc 0-9 < "$PIDFILE")" = "$pid" ] || die "dockerd's pid file does not name the process just started"
  log "dockerd (pid $pid) answers on $SOCK after $((SECONDS - t)) s; stop it with '$0 stop'"
  echo "export DOCKER_HOST=unix://$SOCK"
}

# Unmount whatever is still mounted below the folder (deepest first), then delete it.
cleanup_dir() {
  local m
  while read -r m; do
    need_root umount "$m" 2>/dev/null || need_root umount -l "$m" || die "cannot unmount $m"
  done < <(awk -v d="$DIR/" 'index($2, d) == 1 { print $2 }' /proc/self/mounts | sort -r)
  rm -rf --one-file-system "$DIR" || die "cannot delete $DIR"
}

cmd_stop() {
  local pid p deadline
  if [ ! -e "$DIR" ] && [ ! -L "$DIR" ]; then
    log "no private engine: $DIR does not exist"
    return
  fi
  [ -d "$DIR" ] && [ ! -L "$DIR" ] && [ -O "$DIR" ] || die "$DIR is not a folder of ours; leaving it alone"
  if pid="$(our_pid)"; then
    log "stopping dockerd (pid $pid) and its containers"
    kill -TERM "$pid"
    deadline=$((SECONDS + 60))
    while kill -0 "$pid" 2>/dev/null; do
      [ "$SECONDS" -lt "$deadline" ] || { log "dockerd ignored SIGTERM for 60 s; killing it"; kill -KILL "$pid" 2>/dev/null || true; sleep 1; break; }
      sleep 0.5
    done
  elif [ -f "$PIDFILE" ]; then
    log "the pid in $PIDFILE is not our dockerd (any more); not signalling it"
  fi
  # dockerd stops the containerd it started; end whatever of it is left (it names this folder).
  for p in $(children_in_dir); do
    case "$(basename "$(readlink "/proc/$p/exe" 2>/dev/null)")" in
      containerd|containerd-shim*|dockerd) log "stopping leftover $(basename "$(readlink "/proc/$p/exe")") (pid $p)"; kill -TERM "$p" 2>/dev/null || true ;;
    esac
  done
  deadline=$((SECONDS + 10))
  while [ -n "$(children_in_dir)" ] && [ "$SECONDS" -lt "$deadline" ]; do sleep 0.5; done
  p="$(children_in_dir | tr '\n' ' ')"
  [ -z "$p" ] || die "processes naming $DIR still run (pids $p); not deleting it"
  cleanup_dir
  log "stopped; $DIR deleted"
}

cmd_status() {
  local pid
  if pid="$(our_pid)"; then
    if answers; then
      log "the private engine runs (dockerd pid $pid) and answers on $SOCK"
      echo "export DOCKER_HOST=unix://$SOCK"
    else
      log "dockerd (pid $pid) runs from $DIR but does not answer on $SOCK"
      return 1
    fi
  elif [ -e "$DIR" ]; then
    log "no private engine runs; $DIR is left over ('$0 stop' deletes it)"
    return 3
  else
    log "no private engine runs ($DIR does not exist)"
    return 3
  fi
}

cmd_stop_after() {
  local pid="${1:-}" start self watcher
  [[ "$pid" =~ ^[1-9][0-9]{0,9}$ ]] || die "usage: $0 stop-after PID (a process id, got '$pid')"
  start="$(start_time_of "$pid")" || die "no process $pid to wait for"
  self="$(readlink -f -- "$0")"
  setsid bash "$self" _wait-then-stop "$pid" "$start" </dev/null >/dev/null 2>&1 &
  watcher=$!
  sleep 0.2
  kill -0 "$watcher" 2>/dev/null || die "the watcher (pid $watcher) ended at once; nothing will stop the engine"
  log "a watcher (pid $watcher) stops the private engine in $DIR once process $pid has ended"
}

# The watcher itself (internal: stop-after starts it). Process PID has ended when it is gone, a zombie, or
# another process under the same pid (another start time).
cmd_wait_then_stop() {
  local pid="${1:-}" start="${2:-}" stat
  [[ "$pid" =~ ^[1-9][0-9]{0,9}$ && "$start" =~ ^[0-9]{1,20}$ ]] || die "usage: $0 _wait-then-stop PID START_TIME (internal)"
  while stat="$(cat "/proc/$pid/stat" 2>/dev/null)"; do
    stat="${stat##*) }"
    set -- $stat
    [ "${1:-}" != Z ] && [ "${20:-}" = "$start" ] || break
    sleep 1
  done
  cmd_stop
}

case "${1:-}" in
  start) cmd_start ;;
  stop) cmd_stop ;;
  status) cmd_status ;;
  stop-after) cmd_stop_after "${2:-}" ;;
  _wait-then-stop) cmd_wait_then_stop "${2:-}" "${3:-}" ;;
  *) die "usage: $0 start|stop|status|stop-after PID" ;;
esac
