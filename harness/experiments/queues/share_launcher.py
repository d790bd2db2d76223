"""How the queues family's workers start: the Python workers, on a broker that has share groups.

Share groups are production-ready from Kafka 4.2 (`share.version` 1, finalized
when a 4.2+ node is formatted); an older broker, or one whose feature is off,
has no share group to join, and a worker would wait on it forever. The check
reads the broker's own finalized features (stack/broker_version.py) before
anything of the run is created, and refuses in one line naming what it found.
A broker that does not say (a listener that wants SASL first) is not refused:
the workers then find out themselves. The group's settings are made here too,
by the supervisor, before the workers join.
"""

import dataclasses

from ...core.errors import HarnessError
from ...stack import broker_version
from ...clients import kafka_client
from ...runtime.kafka_calls import REQUEST_TIMEOUT_S
from ..launch import PythonWorkers
from . import share_dead_letter as dead_letter
from .share_facts import GROUP_CONFIG, archived_records, limit_of, settled_records
from .share_options import group_settings

FIRST_RELEASE = "4.2"
FIRST_LEVEL = 28               # metadata.version 4.2-IV0 (broker_version.LEVELS)


def refusal(found: dict | None, release: str | None) -> str | None:
    """One line when these finalized features cannot serve share groups, else None (also when unknown)."""
    if found is None:
        return None
    level, share = found.get("metadata.version"), found.get("share.version", 0)
    said = release or broker_version.metadata_version(found) or "unknown"
    if isinstance(level, int) and level < FIRST_LEVEL:
        return (f"share groups need Kafka {FIRST_RELEASE} or later; this broker is {said} "
                f"(metadata.version {broker_version.metadata_version(found)}): start one with "
                f"`harness up --kafka-version 4.4.0`")
    if not share:
        return (f"share groups are off on this broker ({said}: share.version {share}); turn them on with "
                f"`kafka-features.sh upgrade --feature share.version=1`")
    return None


def configure_group(bootstrap: str, group: str, settings: dict | None = None) -> None:
    """Set the share group's settings with the admin API (incremental, idempotent). The supervisor does it with
    the harness's own login before the workers start (ShareWorkers.prepare): a run's Kafka user may join its
    groups but not alter their configs."""
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType
    admin = AdminClient(kafka_client.config(bootstrap, {"log_level": 3}))
    entries = [ConfigEntry(k, v, incremental_operation=AlterConfigOpType.SET)
               for k, v in (settings or GROUP_CONFIG).items()]
    for fut in admin.incremental_alter_configs([ConfigResource(ResourceType.GROUP, group,
                                                               incremental_configs=entries)]).values():
        try:
            fut.result(timeout=REQUEST_TIMEOUT_S)
        except KafkaException as e:        # e.g. a limit outside this broker's own bounds: said in one line
            raise HarnessError(f"the broker refused the share group's settings: {e.args[0]}") from None


class ShareWorkers(PythonWorkers):
    def check(self, stack) -> None:
        why = refusal(broker_version.features(stack.bootstrap_servers) if stack.bootstrap_servers else None,
                      stack.kafka_version)
        if why:
            raise HarnessError(why)

    def check_run(self, params, stack, names) -> None:
        """--dead-letter on, on a broker without dead-letter topics or whose prefix the run's does not fit: one line."""
        dead_letter.check(stack, params, names.dead_letter_topic)

    def prepare(self, run):
        """The share group's settings (short locks, the run's --delivery-limit) are set here, with the harness's own
        login, before any worker joins: a run's Kafka user on a SCRAM stack may not alter a group's configs."""
        self.group_ready(run)
        return self.annotated(super().prepare(run), run)

    def group_ready(self, run) -> None:
        """The run's share group set up (and its dead-letter topic made, with --dead-letter on) before anyone joins."""
        dlq = run.names.dead_letter_topic if dead_letter.wanted(run.params) else None
        if dlq:
            dead_letter.create(run.stack.bootstrap_servers, dlq, 1)
        configure_group(run.stack.bootstrap_servers, run.names.share_group, group_settings(run.params, dlq))

    def said(self) -> dict:
        """The report's `share_consumer`: the members' share consumer, its release and status."""
        import confluent_kafka
        ours, lib = confluent_kafka.version(), confluent_kafka.libversion()     # a tuple or a string, by release
        return {"client": "python", "library": "confluent-kafka ShareConsumer",
                "version": f"{ours if isinstance(ours, str) else ours[0]} (librdkafka {lib if isinstance(lib, str) else lib[0]})",
                "status": "Preview"}

    def annotated(self, launch, run=None):
        said = self.said()

        def annotate(run, result, report) -> None:
            report.data["share_consumer"] = said
        reader = dead_letter_reader(run) if run is not None and dead_letter.wanted(run.params) else None
        return dataclasses.replace(launch, annotate=annotate, dead_letter_reader=reader)


def dead_letter_reader(run):
    """What reads the run's dead letters at the audit, waiting for those its evidence says are coming: each record
    a death left at the delivery-count limit (the crash log's `held`) and each one a member REJECTed (the events)."""
    from ...clients import pgconn

    def read():
        awaited = archived_records(run.crash_log, limit_of(run.params)) | settled_records(run.events, ("rejected",))
        return dead_letter.read(run.stack.bootstrap_servers, run.names.dead_letter_topic, run.names.input_topic,
                                run.positions, awaited, stop=pgconn.interrupted)
    return read
