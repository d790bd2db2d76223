"""`--dead-letter on`: the run's share group names a dead-letter topic of its own, and the audit reads it.

Kafka 4.4 (KIP-1191, `share.version` 2) can write every record a share group
gives up on to a dead-letter topic: one archived at the group's delivery-count
limit, and one a member REJECTs. Three settings rule it, read here from Kafka
4.4.0's own classes: the group's `errors.deadletterqueue.topic.name` (blank: no
topic), the topic's own `errors.deadletterqueue.group.enable` (false by default:
a topic must agree to be one), and the broker's
`errors.deadletterqueue.topic.name.prefix` (`dlq.` by default), which the name
must start with. The broker writes the record itself, with its own identity, so
the run's Kafka user needs nothing on that topic. A record it could not write
(no such topic, a name outside the prefix, a topic that did not agree) is
archived all the same: lost, with an error in the broker's log only.

The run's topic is `harness.<run id>.dlq`, one of its own topics (naming.RunNames),
created by the harness with `errors.deadletterqueue.group.enable=true`; the local
and compose stacks set the prefix to `harness.` so it fits. A broker whose prefix
it does not fit, or that has no dead-letter topics, is refused in one line before
anything is created (`refusal`).

Each dead letter carries headers (ProduceRequestHandler in kafka-server 4.4.0):
`__dlq.errors.topic`, `.partition`, `.offset` (the record's place in the input),
`.group`, `.delivery.count` and `.message` (why: "Offset delivery count exceeded
the threshold." or "Offset rejected by client."); the group's
`errors.deadletterqueue.copy.record.enable`, which the run sets, copies the key
and value too (the broker falls back to headers alone when it cannot read the
record). The audit names a payment by the input place the headers give, never by
the copy. The broker writes after the record's lock expires (or its REJECT is
committed), which may be after the workers are gone, so the reader waits, for at
most `WAIT_S`, until every record the run's evidence shows archived or rejected
has its dead letter.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from ...core.errors import HarnessError
from .share_facts import dead_letter_on as wanted      # noqa: F401 - the launcher's and the tests' name for it

HEADER = "__dlq.errors."
PREFIX_CONFIG = "errors.deadletterqueue.topic.name.prefix"
ENABLE_CONFIG = "errors.deadletterqueue.group.enable"
FIRST_SHARE_VERSION = 2          # share.version 2 (Kafka 4.4, metadata.version 4.4-IV0): ShareVersion.supportsShareGroupDLQ
WAIT_S = 30.0                    # the most the audit waits for dead letters the evidence says are coming


def refusal(features: dict | None, prefix: str | None, topic: str) -> str | None:
    """One line when this broker cannot give the run's share group `topic` as its dead-letter topic, else None.
    `features`: the finalized features (None: not asked); `prefix`: the broker's prefix setting (None: it has none,
    a broker before 4.4)."""
    share = (features or {}).get("share.version")
    if features is not None and isinstance(share, int) and share < FIRST_SHARE_VERSION:
        return (f"--dead-letter on needs share.version {FIRST_SHARE_VERSION} (Kafka 4.4 or later); this broker has "
                f"share.version {share}: start one with `harness up --kafka-version 4.4.0`")
    if prefix is None:
        return (f"--dead-letter on needs a broker with dead-letter topics (Kafka 4.4 or later): this one has no "
                f"{PREFIX_CONFIG} setting")
    if not topic.startswith(prefix):
        return (f"--dead-letter on: this broker's {PREFIX_CONFIG} is {prefix!r}, and the run's dead-letter topic "
                f"{topic} does not start with it; set it to `harness.` (the harness's stacks do)")
    return None


def broker_prefix(bootstrap: str) -> str | None:
    """The broker's dead-letter topic prefix (None: it has no such setting). HarnessError when it cannot be asked."""
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AdminClient, ConfigResource, ResourceType
    from ...clients import kafka_client
    from ...runtime.kafka_calls import REQUEST_TIMEOUT_S
    admin = AdminClient(kafka_client.config(bootstrap, {"log_level": 3}))
    try:
        node = next(iter(admin.list_topics(timeout=REQUEST_TIMEOUT_S).brokers))
        got = admin.describe_configs([ConfigResource(ResourceType.BROKER, str(node))])
        entries = next(iter(got.values())).result(timeout=REQUEST_TIMEOUT_S)
    except (KafkaException, StopIteration) as e:
        raise HarnessError(f"--dead-letter on: the broker's {PREFIX_CONFIG} could not be read: "
                           f"{kafka_client.scrub(str(e), kafka_client.settings_for(bootstrap))}") from None
    entry = entries.get(PREFIX_CONFIG)
    return None if entry is None else (entry.value or "")


def check(stack, params, topic: str) -> None:
    """Refuse, in one line, a dead-letter run on a broker that cannot have one (before anything is created)."""
    if not wanted(params) or not stack.bootstrap_servers:
        return
    from ...stack import broker_version
    why = refusal(broker_version.features(stack.bootstrap_servers), broker_prefix(stack.bootstrap_servers), topic)
    if why:
        raise HarnessError(why)


def create(bootstrap: str, topic: str, partitions: int) -> None:
    """The run's dead-letter topic, agreeing to be one (its errors.deadletterqueue.group.enable)."""
    from ...workload.payments import create_topic
    create_topic(bootstrap, topic, partitions, config={ENABLE_CONFIG: "true"})


@dataclass(frozen=True)
class DeadLetter:
    message_id: str
    partition: int               # its record's place in the input topic, from the headers
    offset: int
    dead_letter_offset: int      # where the broker wrote it in the dead-letter topic (partition, offset)
    dead_letter_partition: int
    delivery_count: int | None
    reason: str | None


def parse(headers, dlq_partition: int, dlq_offset: int, input_topic: str, at: dict) -> DeadLetter | None:
    """The dead letter of one record of the dead-letter topic, named by the payment at its input place (`at`:
    (partition, offset) -> payment id); None for a record of another topic, or one whose headers name no
    payment of the run."""
    h = {k[len(HEADER):]: (v.decode(errors="replace") if isinstance(v, bytes) else v)
         for k, v in (headers or ()) if isinstance(k, str) and k.startswith(HEADER)}
    try:
        place = (int(h.get("partition")), int(h.get("offset")))
    except (TypeError, ValueError):
        return None
    if h.get("topic") != input_topic or place not in at:
        return None
    count = h.get("delivery.count")
    return DeadLetter(at[place], place[0], place[1], dlq_offset, dlq_partition,
                      int(count) if str(count or "").isdigit() else None, h.get("message"))


@dataclass
class DeadLetters:
    topic: str
    by_id: dict = field(default_factory=dict)     # payment id -> its first DeadLetter
    records: int | None = 0                       # records read from the topic (None: unreadable)
    strays: int = 0                               # records naming no payment of the run
    missing: list = field(default_factory=list)   # (partition, offset) archived or rejected, no dead letter after WAIT_S
    error: str | None = None


def read(bootstrap: str, topic: str, input_topic: str, positions: dict, awaited: set,
         wait_s: float = WAIT_S, stop=None) -> DeadLetters:
    """Every record of the dead-letter topic, waiting (at most `wait_s`, or until `stop()`) until each input place
    in `awaited` has its dead letter. Never raises: an unreadable topic is `error` with `records` None."""
    from confluent_kafka import Consumer, TopicPartition
    from ...clients import kafka_client
    out = DeadLetters(topic)
    at = {tuple(v): i for i, v in positions.items()}
    c = Consumer(kafka_client.config(bootstrap, {"group.id": f"{topic}-audit", "enable.auto.commit": False,
                                                 "auto.offset.reset": "earliest", "log_level": 0}))
    try:
        meta = c.list_topics(topic, timeout=15).topics.get(topic)
        if meta is None or meta.error is not None:
            raise RuntimeError(f"topic {topic} is not readable: {meta.error if meta else 'absent'}")
        c.assign([TopicPartition(topic, p, 0) for p in sorted(meta.partitions)])
        seen: set = set()
        deadline = time.monotonic() + wait_s
        while True:
            for m in c.consume(num_messages=500, timeout=0.5):
                if m.error():
                    continue
                out.records += 1
                d = parse(m.headers(), m.partition(), m.offset(), input_topic, at)
                if d is None:
                    out.strays += 1
                    continue
                seen.add((d.partition, d.offset))
                out.by_id.setdefault(d.message_id, d)
            left = awaited - seen
            if not left or time.monotonic() > deadline or (stop and stop()):
                out.missing = sorted(left)
                break
    except Exception as e:  # noqa: BLE001 - an unreadable topic is unknown, never 0
        out.records, out.error = None, f"dead-letter topic {topic}: {str(e)[:200]}"
    finally:
        c.close()
    return out
