#!/usr/bin/env bash
# The entry point of a Kafka container of the compose stack with SCRAM (docker-compose.scram.yml,
# docker-compose.cluster.scram.yml: `harness up --stack compose --auth scram`), run in place of the image's
# own, in the official apache/kafka image and in the one scripts/build-images.sh builds alike: the images
# stay as they are, and a plaintext stack runs them unchanged.
#
# What it does, then hands over to the image's own entry point:
#   1. Every listener in KAFKA_LISTENER_SECURITY_PROTOCOL_MAP becomes SASL_PLAINTEXT: the controller
#      listener takes SASL/PLAIN logins of the user `controller`, every other one SCRAM-SHA-512 logins
#      (harness/stack/kafka_auth.py says why the controllers cannot take SCRAM). The JAAS settings that
#      hold the passwords are exported as KAFKA_* variables, which the image turns into server properties.
#   2. An empty data folder is formatted with the SCRAM user `harness` in its metadata (`--add-scram`;
#      KRaft has no other place for the first user). The image's own start then finds it formatted.
#   3. A client settings file for the healthcheck, in the Kafka config folder (0600).
#
# The passwords come from the compose secrets in /run/secrets (the harness hands them to `docker compose`
# in its environment, from its 0600 files); they never reach a command line: the format's arguments go in
# a 0600 argument file that the java launcher reads (`java @file`).
set -euo pipefail
umask 077

SECRETS=/run/secrets
CONFIG_DIR=/opt/kafka/config        # the image's: its entry point writes server.properties there, as the Kafka user
SCRAM_USER=harness
CONTROLLER_USER=controller
MECHANISM=SCRAM-SHA-512

die() { echo "kafka-scram: $*" >&2; exit 1; }

# secret NAME: the password in /run/secrets/NAME, if it has the shape the harness writes (kafka_auth.PASSWORD):
# anything else could break out of the JAAS text it goes into.
secret() {
  local f="$SECRETS/$1" value
  [ -r "$f" ] || die "no readable secret $f (the compose file hands it over)"
  value="$(<"$f")"
  [[ "$value" =~ ^[A-Za-z0-9_-]{16,200}$ ]] || die "the secret $f is not a password the harness wrote"
  printf '%s' "$value"
}

scram_jaas() { printf 'org.apache.kafka.common.security.scram.ScramLoginModule required username="%s" password="%s";' "$SCRAM_USER" "$1"; }

# The same entry logs this node in to the controllers and lets the controller user in on its own listener.
plain_jaas() {
  printf 'org.apache.kafka.common.security.plain.PlainLoginModule required username="%s" password="%s" user_%s="%s";' \
    "$CONTROLLER_USER" "$1" "$CONTROLLER_USER" "$1"
}

# sasl_map MAP CONTROLLER_NAME: MAP with every listener SASL_PLAINTEXT.
sasl_map() {
  local out="" entry
  IFS=, read -ra entries <<<"$1"
  for entry in "${entries[@]}"; do
    out+="${out:+,}${entry%%:*}:SASL_PLAINTEXT"
  done
  printf '%s' "$out"
}

# export_sasl PASSWORD CONTROLLER_PASSWORD: the SASL settings of every listener, as KAFKA_* variables.
export_sasl() {
  local map="${KAFKA_LISTENER_SECURITY_PROTOCOL_MAP:?}" controller="${KAFKA_CONTROLLER_LISTENER_NAMES:?}" entry name
  IFS=, read -ra entries <<<"$map"
  for entry in "${entries[@]}"; do
    name="${entry%%:*}"
    [[ "$name" =~ ^[A-Z]+$ ]] || die "listener name '$name' is not one the compose files use"
    if [ "$name" = "$controller" ]; then
      export "KAFKA_LISTENER_NAME_${name}_PLAIN_SASL_JAAS_CONFIG=$(plain_jaas "$2")"
    else
      export "KAFKA_LISTENER_NAME_${name}_SCRAM___SHA___512_SASL_JAAS_CONFIG=$(scram_jaas "$1")"
    fi
  done
  KAFKA_LISTENER_SECURITY_PROTOCOL_MAP="$(sasl_map "$map")"
  export KAFKA_LISTENER_SECURITY_PROTOCOL_MAP
}

# The KAFKA_* variables the image does not turn into server properties (Kafka's KafkaDockerWrapper).
NOT_PROPERTIES=" KAFKA_VERSION KAFKA_HEAP_OPTS KAFKA_LOG4J_OPTS KAFKA_OPTS KAFKA_JMX_OPTS KAFKA_JVM_PERFORMANCE_OPTS \
KAFKA_GC_LOG_OPTS KAFKA_LOG4J_ROOT_LOGLEVEL KAFKA_LOG4J_LOGGERS KAFKA_TOOLS_LOG4J_LOGLEVEL KAFKA_JMX_HOSTNAME "

# server_properties: the server properties of the KAFKA_* variables, as the image makes them (drop the
# prefix, lower-case, `_` -> `.`, `___` -> `-`, `__` -> `_`).
server_properties() {
  local var key
  while IFS= read -r var; do
    [[ "$NOT_PROPERTIES" == *" $var "* ]] && continue
    key="${var#KAFKA_}"
    key="${key,,}"
    key="${key//_/.}"
    key="${key//.../-}"
    key="${key//../_}"
    printf '%s=%s\n' "$key" "${!var}"
  done < <(compgen -e | grep '^KAFKA_' | sort)
}

# argfile_quote ARG: one argument of a java @file, double-quoted (local_kafka._argfile_quote).
argfile_quote() {
  local a="${1//\\/\\\\}"
  printf '"%s"\n' "${a//\"/\\\"}"
}

# format PASSWORD: an empty data folder formatted with the SCRAM user in its metadata; a formatted one as it is.
format() {
  local tmp out log4j=""
  [ -n "${CLUSTER_ID:-}" ] || die "CLUSTER_ID is not set"
  tmp="$(mktemp -d)"
  server_properties >"$tmp/server.properties"
  {
    for a in kafka.tools.StorageTool format -t "$CLUSTER_ID" -c "$tmp/server.properties" \
        --add-scram "$MECHANISM=[name=$SCRAM_USER,password=$1]" --ignore-formatted; do
      argfile_quote "$a"
    done
  } >"$tmp/format.args"
  for f in /etc/kafka/docker/tools-log4j2.yaml /opt/kafka/config/tools-log4j2.yaml; do
    [ -f "$f" ] && { log4j="-Dlog4j2.configurationFile=$f"; break; }
  done
  if ! out="$(java -Xmx256m ${log4j:+"$log4j"} -cp '/opt/kafka/libs/*' "@$tmp/format.args" 2>&1)"; then
    rm -rf "$tmp"
    echo "${out//$1/***}" | tail -n 20 >&2
    die "formatting the data folder with the SCRAM user failed"
  fi
  rm -rf "$tmp"
  # Only what it did: its "Bootstrap metadata" line shows the user's salted keys.
  grep -E '^Formatting|already formatted' <<<"${out//$1/***}" || true
}

# health_settings PASSWORD: the healthcheck's client settings (Java names), 0600 in the config folder.
health_settings() {
  printf 'security.protocol=SASL_PLAINTEXT\nsasl.mechanism=%s\nsasl.jaas.config=%s\n' "$MECHANISM" \
    "$(scram_jaas "$1")" >"$CONFIG_DIR/harness-client.properties"
}

# The image's own entry point: the official image's, else the one scripts/build-images.sh's image has.
start_image() {
  if [ -x /etc/kafka/docker/run ]; then
    [ -x /__cacert_entrypoint.sh ] && exec /__cacert_entrypoint.sh /etc/kafka/docker/run
    exec /etc/kafka/docker/run
  fi
  exec /opt/kafka/bin/kafka-docker-run.sh
}

main() {
  local pw cpw
  pw="$(secret harness-kafka-password)"
  cpw="$(secret harness-kafka-controller-password)"
  export_sasl "$pw" "$cpw"
  format "$pw"
  health_settings "$pw"
  start_image
}

if [ "${BASH_SOURCE[0]}" = "$0" ]; then
  main "$@"
fi
