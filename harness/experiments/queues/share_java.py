"""`--client java`: the queues family's worker on Kafka's own Java client (KafkaShareConsumer).

Kafka's Java client has had a share consumer since 4.0 and made it generally
available in 4.2; confluent-kafka's ShareConsumer (the Python workers') is a
Preview. The Java worker (streams-worker's harness.share.ShareWorker) runs the
same loops as share_loops.py: same steps, kill points, crash records (what each
death `held`, with delivery counts), events and queue-done rule, so the
family's predictors judge it unchanged. It needs kafka-clients 4.2+, while the
Streams module stays on its own release, so it is a jar of its own, from the
same sources (`share-pom.xml`), built and cached as the Streams jar is
(streams_jvm.build). Its JVMs start without a class cache: a share worker is a
plain consumer, and the cache's training is the Streams worker's.

The broker check and the group's settings are the Python launcher's
(share_launcher.py): refused in one line without share groups, the group set up
by the supervisor with the harness's own login before any member joins.
"""

import re
from dataclasses import dataclass

from ..launch import Launch, assign_partitions, java_client_settings, kafka_login, worker_env
from .share_facts import POLL_RECORDS, POLL_TIMEOUT_S, QUIET_S, limit_of
from .share_launcher import ShareWorkers

MAIN_CLASS = "harness.share.ShareWorker"
POM = "share-pom.xml"
JAR = "target/share/share-worker.jar"
SHARE_APP = "the Java share consumer (--client java)"


def client_version() -> str | None:
    """The kafka-clients release the share worker is built with (its build file says), None when unread."""
    from ..streams_jvm import SOURCES
    try:
        m = re.search(r"<kafka\.version>([0-9][0-9A-Za-z.-]*)</kafka\.version>", (SOURCES / POM).read_text())
    except OSError:
        return None
    return m[1] if m else None


def input_size(bootstrap: str, topic: str) -> int:
    """The input's records (end minus start of every partition), asked once by the supervisor, so each member
    JVM (a new one per crash) starts one Kafka client, not two."""
    from confluent_kafka import TopicPartition
    from confluent_kafka.admin import AdminClient, OffsetSpec
    from ...clients import kafka_client
    from ...runtime.kafka_calls import REQUEST_TIMEOUT_S
    admin = AdminClient(kafka_client.config(bootstrap, {"log_level": 3}))
    parts = admin.list_topics(topic, timeout=REQUEST_TIMEOUT_S).topics[topic].partitions

    def summed(spec) -> int:
        asked = admin.list_offsets({TopicPartition(topic, p): spec for p in parts}, request_timeout=REQUEST_TIMEOUT_S)
        return sum(f.result(timeout=REQUEST_TIMEOUT_S).offset for f in asked.values())
    return summed(OffsetSpec.latest()) - summed(OffsetSpec.earliest())


def command(run, slot, jar, start, total: int) -> list[str]:
    """The JVM command line of one slot's attempt (no secret: those travel in the environment)."""
    from .. import streams_jvm
    p, names, exp = run.params, run.names, run.exp
    url, user, _password = streams_jvm.jdbc(run.worker_dsn)
    cmd = [start.java, *streams_jvm.JVM_OPTIONS, *start.flags(), "-Dharness.worker=true", "-cp", str(jar), MAIN_CLASS,
           "--experiment", exp.name, "--bootstrap", run.stack.bootstrap_servers, "--share-group", names.share_group,
           "--input-topic", names.input_topic, "--worker", slot.name, "--attempt", str(slot.attempt),
           "--crash-plan", str(run.crash_plan), "--crash-log", str(run.crash_log), "--events", str(run.events),
           "--commit-every", str(p.commit_every), "--max-poll-records", str(POLL_RECORDS),
           "--poll-ms", str(round(POLL_TIMEOUT_S * 1000)), "--delivery-limit", str(limit_of(p)),
           "--quiet-ms", str(round(QUIET_S * 1000)), "--total", str(total),
           "--ledger", names.ledger_table, "--jdbc-url", url] + (["--jdbc-user", user] if user else [])
    if exp.stores.dedupe:
        cmd += ["--dedupe", names.dedupe_table]
    return cmd


@dataclass
class ShareJavaWorkers(ShareWorkers):
    """One JVM per worker slot, each a member of the run's share group, as the Python workers."""

    def said(self) -> dict:
        return {"client": "java", "library": "kafka-clients KafkaShareConsumer", "version": client_version(),
                "status": "GA (Kafka 4.2+)"}

    def check(self, stack) -> None:
        """A broker without share groups, or client settings the Java client cannot take: one line, now."""
        super().check(stack)
        java_client_settings(stack, SHARE_APP)

    def prepare(self, run):
        from .. import streams_jvm
        from ...clients import kafka_java
        from ...core.procs import dying_with_this_process
        self.group_ready(run)
        jar = streams_jvm.build(run.log, POM, JAR)
        start = streams_jvm.worker_start(jar, "plain", run.log)
        run.log(f"Java share consumers (kafka-clients {client_version() or 'unknown'}) start as {start.said}")
        java = java_client_settings(run.stack, SHARE_APP, kafka_login(run))
        env = {**worker_env(run), "HARNESS_PG_PASSWORD": streams_jvm.jdbc(run.worker_dsn)[2],
               kafka_java.ENV: kafka_java.properties_text(java)}
        slots = assign_partitions(run.params.partitions, run.params.workers)
        total = input_size(run.stack.bootstrap_servers, run.names.input_topic)

        def launch_command(slot) -> list[str]:
            # A JVM outlives a SIGKILLed harness unless told otherwise.
            return dying_with_this_process(command(run, slot, jar, start, total))

        return self.annotated(Launch(launch_command, env, slots, standby=False, planned_exits=(-9, 137)), run)

