#!/bin/bash
# The container's entry point: turns the KAFKA_* variables into
# /opt/kafka/config/server.properties and formats an empty data folder with
# $CLUSTER_ID (both done by Kafka's kafka.docker.KafkaDockerWrapper, as in the
# official image), then runs the broker in the foreground.
set -euo pipefail

[ -n "${CLUSTER_ID:-}" ] || { echo "kafka-docker-run: CLUSTER_ID is not set" >&2; exit 1; }

# The wrapper formats storage every time; on a restart the folder is already
# formatted, which it reports as an error that we let pass (as the official image does).
if ! out="$(java -Dlog4j2.configurationFile=/etc/kafka/docker/tools-log4j2.yaml -cp '/opt/kafka/libs/*' \
    kafka.docker.KafkaDockerWrapper setup \
    --default-configs-dir /etc/kafka/docker \
    --mounted-configs-dir /mnt/shared/config \
    --final-configs-dir /opt/kafka/config 2>&1)"; then
  if grep -qi "already formatted" <<<"$out"; then
    echo "kafka-docker-run: the data folder is already formatted; starting on it"
  else
    echo "$out" >&2
    exit 1
  fi
else
  echo "$out" | grep -v '^\s' | tail -n 5 || true
fi

# Kafka 3.x's wrapper writes log4j.properties, not log4j2.yaml: its broker logs (with the log4j2 jars the
# image carries) by the image's own log4j2.yaml, so KAFKA_LOG4J_* levels apply on 4.x only.
LOG_CONFIG=/opt/kafka/config/log4j2.yaml
[ -f "$LOG_CONFIG" ] || LOG_CONFIG=/etc/kafka/docker/log4j2.yaml

exec java ${KAFKA_HEAP_OPTS:--Xmx1G -Xms1G} \
  -server -XX:+UseG1GC -XX:MaxGCPauseMillis=20 -XX:InitiatingHeapOccupancyPercent=35 \
  -XX:+ExplicitGCInvokesConcurrent -Djava.awt.headless=true \
  -Dlog4j2.configurationFile="$LOG_CONFIG" \
  ${KAFKA_OPTS:-} -cp '/opt/kafka/libs/*' kafka.Kafka /opt/kafka/config/server.properties
