#!/bin/bash
# Kafka's releases after 4.1 moved ConfigCommand from the core jar (kafka.admin) to the tools jar
# (org.apache.kafka.tools); the image holds one release's jars, so the class is chosen by what they hold.
if grep -qa 'org/apache/kafka/tools/ConfigCommand.class' /opt/kafka/libs/kafka-tools-*.jar 2>/dev/null; then
  exec /opt/kafka/bin/kafka-run-class.sh org.apache.kafka.tools.ConfigCommand "$@"
fi
exec /opt/kafka/bin/kafka-run-class.sh kafka.admin.ConfigCommand "$@"
