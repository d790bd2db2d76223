#!/bin/bash
# Entry point: on first start (an empty $PGDATA) runs initdb with UTF8 and the
# official image's variables, then runs the server listening on all of the
# container's addresses, as the postgres user.
set -euo pipefail

log() { echo "docker-entrypoint: $*" >&2; }

if [ "${1:-}" != postgres ]; then
  exec "$@"
fi
shift

PGDATA="${PGDATA:-/var/lib/postgresql/data}"
POSTGRES_USER="${POSTGRES_USER:-postgres}"
POSTGRES_DB="${POSTGRES_DB:-$POSTGRES_USER}"

as_postgres() { setpriv --reuid=postgres --regid=postgres --init-groups "$@"; }

if [ "$(id -u)" = 0 ]; then
  mkdir -p "$PGDATA" /var/run/postgresql
  chown postgres:postgres "$PGDATA" /var/run/postgresql
  chmod 700 "$PGDATA"
else
  as_postgres() { "$@"; }
fi

if [ ! -s "$PGDATA/PG_VERSION" ]; then
  # Initialise only an empty folder; anything else is somebody's data.
  if [ -n "$(ls -A "$PGDATA")" ]; then
    log "$PGDATA holds files but no PostgreSQL cluster (no PG_VERSION); refusing to initialise it"
    exit 1
  fi
  if [ -z "${POSTGRES_PASSWORD:-}" ]; then
    log "POSTGRES_PASSWORD is not set: TCP clients log in with a password, so one is needed"
    exit 1
  fi
  log "initialising $PGDATA (user $POSTGRES_USER, database $POSTGRES_DB, UTF8)"
  pwfile="$(mktemp)"
  printf '%s\n' "$POSTGRES_PASSWORD" > "$pwfile"
  chown postgres "$pwfile" 2>/dev/null || true
  as_postgres initdb -D "$PGDATA" --username="$POSTGRES_USER" --pwfile="$pwfile" \
    --encoding=UTF8 --locale=C.UTF-8 --auth-local=trust --auth-host=scram-sha-256 >/dev/null
  rm -f "$pwfile"
  # TCP from anywhere (the published port arrives through the container's network), with a password.
  echo "host all all all scram-sha-256" >> "$PGDATA/pg_hba.conf"
  if [ "$POSTGRES_DB" != postgres ]; then
    # A server on the Unix socket only, so no client can connect before setup is done.
    as_postgres pg_ctl -D "$PGDATA" -w -o "-c listen_addresses=''" start >/dev/null
    # psql quotes the name (:"db"); it expands variables only in what it reads, not in -c.
    as_postgres psql -v ON_ERROR_STOP=1 -q -U "$POSTGRES_USER" -d postgres \
      -v db="$POSTGRES_DB" <<<'CREATE DATABASE :"db";'
    as_postgres pg_ctl -D "$PGDATA" -m fast -w stop >/dev/null
  fi
  log "initialised"
fi

as_postgres() { if [ "$(id -u)" = 0 ]; then exec setpriv --reuid=postgres --regid=postgres --init-groups "$@"; else exec "$@"; fi; }
as_postgres postgres -D "$PGDATA" -c listen_addresses='*' "$@"
