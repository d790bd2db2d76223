"""Run options that several experiment families declare alike: Kafka transactions, consumer-group membership.

Each is declared once here and named in the `options` of every experiment that
takes it (harness/core/options.py says what a declaration gives);
the group protocols' refusals on a cluster or client without them (--group-protocol consumer,
eos-streams' --streams-protocol streams) are declared beside them.
"""

from ..core.errors import HarnessError
from ..core.options import Option

# With a fresh transactional.id nobody fences the dead producer: its transaction stays open until this
# timeout. 10 s keeps the experiment short while making the stall obvious next to sub-second restarts.
FRESH_ID_TRANSACTION_TIMEOUT_MS = 10_000
# The producers' transaction.timeout.ms when not given: the broker aborts a transaction its producer
# abandoned after this (a restart with the same transactional.id aborts it at once).
TRANSACTION_TIMEOUT_MS = 60_000

ON_TRANSACTIONS = "experiments with Kafka transactions"
# Kafka Streams keeps its own transactional ids and timeout: these are the eos family's own workers' (Python or Java).
ON_OWN_TRANSACTIONS = "experiments with Kafka transactions of their own (eos, eos-boundary, eos-dedupe, zombie)"

COMMIT_INTERVAL_MS = Option(
    "commit_interval_ms", int, "eos family: commit the transaction at least this often (instead of every N records).",
    low=1, high=3_600_000, why_high="an hour; Kafka Streams refuses more", worker=True, applies_to=ON_TRANSACTIONS)
FRESH_TRANSACTIONAL_ID = Option(
    "fresh_transactional_id", bool, "eos family: restarted workers take a NEW transactional.id, so nothing fences "
    "the dead transaction and read_committed readers stall until transaction.timeout.ms.", default=False,
    applies_to=ON_OWN_TRANSACTIONS)
TRANSACTION_TIMEOUT = Option(
    "transaction_timeout_ms", int, "eos family: the producers' transaction.timeout.ms.",
    shown=f"{TRANSACTION_TIMEOUT_MS}; {FRESH_ID_TRANSACTION_TIMEOUT_MS} with --fresh-transactional-id", low=1,
    high=900_000, why_high="the brokers' transaction.max.timeout.ms default", worker=True,
    applies_to=ON_OWN_TRANSACTIONS,
    derive=lambda values: FRESH_ID_TRANSACTION_TIMEOUT_MS if values["fresh_transactional_id"] else None)
# A transactional call (init, send offsets, commit, abort, retries included) blocked this long has met a
# coordinator that stopped answering: the worker ends, its transaction's outcome unknown (a bound, not a hang).
TXN_STUCK_AFTER_S = 60.0
TXN_STUCK_AFTER = Option(
    "txn_stuck_after", float, "eos family: seconds a transactional call (init, send offsets, commit, abort, with its "
    "retries) may block; past them the worker exits for a restart and its transaction's outcome is unknown "
    "(the numbers it can change become bounds) instead of stalling the run.", default=TXN_STUCK_AFTER_S, low=0.5,
    high=3600, why_high="an hour; a run's own time limit ends it sooner", worker=True, applies_to=ON_OWN_TRANSACTIONS)
CLIENT = Option(
    "client", str, "eos and queues families: the workers' Kafka client: python (confluent-kafka: librdkafka, "
    "transaction version 1 on every broker; its share consumer a Preview) or java (Kafka's own kafka-clients: "
    "transaction version 2 where the broker offers it, a new producer epoch per transaction; KafkaShareConsumer, "
    "GA). Same steps, kill points and checks.",
    default="python", choices=("python", "java"),
    applies_to="eos, eos-boundary, eos-dedupe, zombie and the queues family (share-ack-after, share-ack-before, "
               "share-dedupe, share-poison)")
TRANSACTION_OPTIONS = (COMMIT_INTERVAL_MS, FRESH_TRANSACTIONAL_ID, TRANSACTION_TIMEOUT, TXN_STUCK_AFTER, CLIENT)

ASSIGNMENT = Option(
    "assignment", str, "Consumer experiments: assign (each worker a fixed set of partitions: fastest restarts) or "
    "group (subscribe as members of the run's group: partitions move when workers die and return).",
    default="assign", choices=("assign", "group"), worker=True)
GROUP_PROTOCOL = Option(
    "group_protocol", str, "The workers' consumer group protocol (group.protocol): classic or KIP-848's consumer "
    "(Kafka 4.0+ brokers, librdkafka 2.12+). With --assignment group: how members join (classic: 1 s session). "
    "With fixed partitions (every other run): the client's protocol alone; the broker's group is a simple one "
    "either way, and Kafka's Java client (--client java) runs its KIP-848 consumer.", shown="classic", choices=("classic", "consumer"), worker=True)

# KIP-848's consumer protocol is GA from Kafka 4.0 (the cluster finalizes the group.version feature at 1)
# and from librdkafka 2.12; Kafka's Java client has it since 4.0 (the streams-worker builds on 4.1).
CONSUMER_PROTOCOL_LIBRDKAFKA = (2, 12)
# KIP-1071's streams groups: a broker serves them when the cluster finalized streams.version 1 (the default of a
# cluster formatted by Kafka 4.2 or later) and this broker setting lists streams (its default from 4.1 on).
REBALANCE_PROTOCOLS = "group.coordinator.rebalance.protocols"


def consumer_protocol_refusal(found: dict | None, librdkafka: str | None) -> str | None:
    """Why `--group-protocol consumer` cannot run here, in one line, or None. `found`: the cluster's
    finalized features (None: it could not be asked, so not refused); `librdkafka`: the Python workers'
    librdkafka version (None: the workers are Java)."""
    if found is not None and found.get("group.version", 0) < 1:
        from ..stack.broker_version import metadata_version
        return ("--group-protocol consumer needs a cluster that finalized group.version 1 (Kafka 4.0 or later); "
                f"this one has metadata.version {metadata_version(found) or 'unknown'} and no group.version")
    if librdkafka is not None:
        have = tuple(int(x) for x in librdkafka.split(".")[:2] if x.isdigit())
        if have < CONSUMER_PROTOCOL_LIBRDKAFKA:
            return (f"--group-protocol consumer needs librdkafka 2.12 or later in the Python workers; this one "
                    f"has {librdkafka} (or use --client java where the experiment takes it)")
    return None


def streams_protocol_refusal(found: dict | None, protocols: str | None) -> str | None:
    """Why `--streams-protocol streams` (KIP-1071) cannot run here, in one line, or None. `found`: the
    cluster's finalized features (None: it could not be asked, so not refused); `protocols`: the broker's
    group.coordinator.rebalance.protocols (None: it could not be described, so not refused)."""
    if found is not None and found.get("streams.version", 0) < 1:
        from ..stack.broker_version import metadata_version
        return ("--streams-protocol streams needs a cluster that finalized streams.version 1 (Kafka 4.2 or later; "
                "`kafka-features.sh upgrade --feature streams.version=1` on an upgraded one); this one has "
                f"metadata.version {metadata_version(found) or 'unknown'} and streams.version "
                f"{found.get('streams.version', 0)}")
    if protocols is not None and "streams" not in [p.strip() for p in protocols.split(",")]:
        return ("--streams-protocol streams needs the brokers' group.coordinator.rebalance.protocols to list "
                f"streams; this cluster's is {protocols!r}")
    return None


def refuse_group_protocol(params, stack) -> None:
    """One line (HarnessError) when the run asks for a group protocol its cluster or client lacks."""
    from ..stack.broker_version import broker_settings, features
    if getattr(params, "streams_protocol", None) == "streams":
        found = features(stack.bootstrap_servers) if stack.bootstrap_servers else None
        said = broker_settings(stack.bootstrap_servers, (REBALANCE_PROTOCOLS,)) if stack.bootstrap_servers else {}
        why = streams_protocol_refusal(found, said.get(REBALANCE_PROTOCOLS))
        if why:
            raise HarnessError(why)
    if getattr(params, "group_protocol", None) != "consumer":
        return
    import confluent_kafka
    found = features(stack.bootstrap_servers) if stack.bootstrap_servers else None
    lib = None if getattr(params, "client", None) == "java" else confluent_kafka.libversion()[0]
    why = consumer_protocol_refusal(found, lib)
    if why:
        raise HarnessError(why)


GROUP_OPTIONS = (ASSIGNMENT, GROUP_PROTOCOL)
