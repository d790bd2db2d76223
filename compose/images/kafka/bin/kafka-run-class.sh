#!/bin/bash
# kafka-run-class.sh CLASS [ARGS...]: runs one of Kafka's main classes with
# every jar of /opt/kafka/libs on the class path (the command-line tools log
# warnings and errors only, to stderr).
set -euo pipefail
[ $# -ge 1 ] || { echo "usage: $0 CLASS [ARGS...]" >&2; exit 2; }
exec java ${KAFKA_HEAP_OPTS:--Xmx256M} -Djava.awt.headless=true \
  -Dlog4j2.configurationFile=/etc/kafka/docker/tools-log4j2.yaml \
  ${KAFKA_OPTS:-} -cp '/opt/kafka/libs/*' "$@"
