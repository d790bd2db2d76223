"""A Kafka node that dies during `harness up` is named with the cause its log gives, not a stack tail.

The log below is Kafka 4.4's own, from an `up` over a state folder whose kafka/data held a report
folder (the case of an --out inside the state folder).
"""

from harness.stack.start_failure import cause, kafka_cause

FOREIGN_FOLDER = """\
[2026-12-07 05:48:49,940] INFO Loading logs from log dirs ArrayBuffer(/s/kafka/data) (kafka.log.LogManager)
[2026-12-07 05:48:49,945] ERROR Encountered fatal fault: Error starting LogManager (org.apache.kafka.server.fault.ProcessTerminatingFaultHandler)
org.apache.kafka.common.KafkaException: Found directory /s/kafka/data/x, 'x' is not in the form of topic-partition or topic-partition.uniqueId-delete (if marked for deletion).
Kafka's log directories (and children) should only contain Kafka topic data.
\tat org.apache.kafka.storage.internals.log.UnifiedLog.parseTopicPartitionName(UnifiedLog.java:2404) ~[kafka-storage-4.4.0.jar:?]
\tat org.apache.kafka.storage.internals.log.LogManager.loadLogs(LogManager.java:661) ~[kafka-storage-4.4.0.jar:?]
\tat java.base/java.lang.Thread.run(Thread.java:840) [?:?]
2026-12-07T05:48:44.292246874Z kafka-1-raft-io-thread WARN Unable to register Log4j shutdown hook because JVM is shutting down.
"""

WRAPPED = """\
[2026-12-07 05:00:00,000] ERROR [KafkaRaftServer nodeId=1] Fatal error during startup (kafka.server.KafkaRaftServer)
java.lang.RuntimeException: Failed to start
\tat kafka.Kafka.main(Kafka.scala:1)
Caused by: java.io.IOException: Permission denied
\tat x.y(Z.java:1)
Caused by: java.nio.file.AccessDeniedException: /s/kafka/data/meta.properties
\tat x.y(Z.java:2)
"""


def test_a_foreign_folder_in_kafkas_data_is_named_with_what_to_do():
    line = cause(FOREIGN_FOLDER)
    assert line.startswith("/s/kafka/data/x is not Kafka's"), line
    assert "move it out of the state folder" in line and "\n" not in line and "\tat" not in line


def test_the_innermost_cause_is_the_one_named():
    assert cause(WRAPPED) == "AccessDeniedException: /s/kafka/data/meta.properties"


def test_a_log_without_an_exception_names_none():
    assert cause("[x] INFO started\n[y] WARN slow\n") is None
    assert cause("") is None


def test_a_long_message_stays_one_bounded_line():
    line = cause("ERROR boom\njava.lang.IllegalStateException: " + "z" * 10_000 + "\n")
    assert line.startswith("IllegalStateException: z") and len(line) <= 400


def test_the_cause_is_read_from_the_nodes_own_log(tmp_path):
    class Node:
        home = tmp_path
        logs = tmp_path / "logs"
    Node.logs.mkdir()
    (Node.logs / "server.log").write_text(FOREIGN_FOLDER)
    assert "/s/kafka/data/x is not Kafka's" in kafka_cause(Node)
    (Node.logs / "server.log").write_text("INFO nothing\n")
    assert kafka_cause(Node) is None
