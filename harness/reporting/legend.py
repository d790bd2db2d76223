"""What each count of a scoreboard means, and where it is counted: one source for the reports and the docs.

The scoreboard (scoreboard.py) names, beside every number, the store it was
read from (STORES); the report's legend and the glossary of docs/concepts.md
(written from DEFINITIONS at the docs' build, docs_pages.py) give the same
one-line definition of each count, so the two cannot drift apart.
"""

# Where a number is read from, as the scoreboard's "counted in" column says it.
LEDGER = "database: ledger table"
DEDUPE = "database: key table"
TOPIC_RC = "Kafka output topic, read_committed"
TOPIC_RU = "Kafka output topic, read_uncommitted"
INPUT = "Kafka input topic"
WORKERS = "workers' own counts"
AMOUNTS = "payments sent (sum of amounts)"
DELIVERY_LOG = "delivery reports of the producer under test"
GROUP = "consumer group events"
ROWS = "database: service rows"
EVENTS = "Kafka events topic"
OUTBOX = "database: outbox table"
REJECTS = "database: rejects table"
DEAD_LETTER = "Kafka dead-letter topic"
CRASH_LOG = "crash log"
FAULT_LOG = "fault log"
SUPERVISOR = "supervisor"

# Every count a scoreboard can show -> its one-line definition (the legend and the docs' glossary).
DEFINITIONS = {
    "sent": "payments the run produced to the input topic: distinct ids, each with its amount",
    "deliveries": "records handed to the workers, counted by the workers themselves (each reports its count "
                  "when it ends or crashes); unknown when a process was killed without saying",
    "effects": "rows in the ledger table: one per payment applied, copies included",
    "records": "records in the output topic as a reader with that isolation level sees them, copies included",
    "duplicates": "copies beyond the first for each id, in that store: the sum over ids of (copies - 1)",
    "lost": "ids sent and acknowledged (their offset committed) with no copy in that store",
    "dead-lettered": "ids with no effect whose record the broker wrote to the run's dead-letter topic (a share "
                     "group gave up on it: delivery-count limit or REJECT): not lost, waiting there to be handled",
    "not yet processed": "ids with no effect whose offset was never committed: the run stopped before them "
                         "(not lost)",
    "aborted copies": "records of the output topic that read_committed readers never see (aborted or still open "
                      "transactions): read_uncommitted duplicates",
    "dedupe hits": "deliveries that found their key (or version) already written and skipped the effect",
    "ledger total": "the sum of the amounts in the ledger table",
    "expected ledger total": "the sum of the amounts of the payments sent: what the ledger holds when every "
                             "payment is applied exactly once",
    "acknowledged": "records the producer under test was told the broker had written",
    "never acknowledged": "records the producer under test sent with no acknowledgement (failed or unknown)",
    "sent with acks=0": "records the producer under test sent without asking for an acknowledgement",
    "reordered": "records acknowledged in another order than they were sent, per partition",
    "partition assignments": "partitions handed to a worker by a rebalance of the consumer group",
    "revocations": "rebalances that took partitions away from a worker",
    "commits lost to a rebalance": "offset commits the group refused because the partition had moved",
    "service rows": "rows the service wrote, one per payment it handled",
    "events in the topic": "events the service published to its events topic, copies included",
    "rows without an event": "service rows whose event never reached the events topic",
    "events without a row": "events in the topic whose service row does not exist",
    "duplicate events in the topic": "copies beyond the first of each event in the events topic",
    "outbox rows unsent": "outbox rows the relay had not published when the run ended",
    "requests under a reused key": "requests that reused a payment's id with another amount (a client bug)",
    "hidden": "of those, requests skipped as if they were redeliveries (the second amount never applied)",
    "rejected": "of those, requests the service refused and recorded as a conflict",
    "applied": "of those, requests whose second amount was applied",
    "not reached when the run stopped": "of those, requests no worker had handled when the run ended",
    "crashes": "workers killed by a planned crash or a kill fault",
    "other faults": "faults that are not crashes (broker, network, pauses)",
    "unplanned worker deaths": "workers that died without a fault causing it",
}

# What the predicted column holds, and the words a cell can hold instead of a number.
PREDICTED_NOTE = ("predicted: what the crash log (each crash's worker wrote it before it died) says the count "
                  "must be; a leading <= marks a bound, \"a to b\" a range, an empty cell a count with no prediction. "
                  "unknown: the harness could not measure it; n/a: the count does not apply to this run.")


def definition(metric: str) -> str:
    """The definition of a scoreboard metric (its leading spaces, for rows nested under another, ignored)."""
    return DEFINITIONS.get(metric.strip(), "")


def glossary_rows() -> list[tuple[str, str]]:
    """(count, definition) for the docs' glossary, in the order a scoreboard shows them."""
    return list(DEFINITIONS.items())
