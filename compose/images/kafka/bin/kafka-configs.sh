#!/bin/bash
# Kafka 3.x keeps this tool in its core (kafka.admin); 4.0 moved it to kafka-tools.
case "$(cat /opt/kafka/release 2>/dev/null)" in
  3.*) exec /opt/kafka/bin/kafka-run-class.sh kafka.admin.ConfigCommand "$@" ;;
esac
exec /opt/kafka/bin/kafka-run-class.sh org.apache.kafka.tools.ConfigCommand "$@"
