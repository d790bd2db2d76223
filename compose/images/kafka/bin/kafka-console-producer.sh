#!/bin/bash
# Kafka 4.0 moved this tool from the core jar to the tools jar (org.apache.kafka.tools); the image holds
# one release's jars, so the class is chosen by what they hold (as kafka-configs.sh does).
if grep -qa 'org/apache/kafka/tools/ConsoleProducer.class' /opt/kafka/libs/kafka-tools-*.jar 2>/dev/null; then
  exec /opt/kafka/bin/kafka-run-class.sh org.apache.kafka.tools.ConsoleProducer "$@"
fi
exec /opt/kafka/bin/kafka-run-class.sh kafka.tools.ConsoleProducer "$@"
