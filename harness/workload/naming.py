"""Names of a run and of everything it creates, derived from one run id.

Run ids sort by time and say what ran: `20261129T183000.123-offset-after-3f9a2c`
(UTC to the millisecond, the experiment, six random hex digits). Two runs
started in the same second, even the same millisecond, get different ids, so
they never share a folder, a topic, a consumer group or a table.
Topics and tables carry the run id, so a run's data can be audited (psql,
kcat) and removed (`harness clean RUN_ID`) without touching any other run.
"""

import hashlib
import re
import secrets
import time
from dataclasses import dataclass

SCHEMA = "harness"
TOPIC_PREFIX = "harness."
# acct: the accounts and their balances; reject: refused requests (short kinds: `<kind>_` + slug must fit
# in SLUG_MAX below)
TABLE_KINDS = ("ledger", "dedupe", "rows", "outbox", "acct", "reject")

# Postgres truncates identifiers at 63 bytes (NAMEDATALEN - 1): `dedupe_` (as long as the longest kind) + slug must fit,
# or two long run ids could silently name the same table.
PG_IDENTIFIER_MAX = 63
SLUG_MAX = PG_IDENTIFIER_MAX - len("dedupe_")
_HASH_HEX = 8
# Everything `slug` can return: "r", lowercase letters and digits, single underscores between them.
SLUG_PATTERN = r"r[a-z0-9]*(?:_[a-z0-9]+)*"
_TABLE = re.compile(rf"(?P<kind>{'|'.join(TABLE_KINDS)})_(?P<slug>{SLUG_PATTERN})")


def new_run_id(experiment: str, now: float | None = None, suffix: str | None = None) -> str:
    """`YYYYmmddTHHMMSS.mmm-EXPERIMENT-xxxxxx`: sorts by start time, unique by its random suffix."""
    now = time.time() if now is None else now
    ms = int(round(now * 1000))
    stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime(ms // 1000)) + f".{ms % 1000:03d}"
    return f"{stamp}-{experiment}-{suffix or secrets.token_hex(3)}"


def slug(run_id: str, most: int = SLUG_MAX) -> str:
    """A SQL-identifier-safe form of a run id, at most `most` characters: r20261129t183000_123_dedupe_3f9a2c.

    A longer one keeps its start and ends with a hash of the whole run id, so it stays unique.
    """
    s = "r" + re.sub(r"[^a-z0-9]+", "_", run_id.lower()).strip("_")
    if len(s) <= most:
        return s
    digest = hashlib.sha256(run_id.encode()).hexdigest()[:_HASH_HEX]
    return s[:most - _HASH_HEX - 1].rstrip("_") + "_" + digest


def is_run_table(table: str) -> bool:
    """True for a table name this harness creates (<kind>_<slug>, a kind of TABLE_KINDS), nothing else."""
    m = _TABLE.fullmatch(table)
    return bool(m) and len(m["slug"]) <= SLUG_MAX


def run_tables(run_id: str) -> set[str]:
    """The unqualified table names a run may have created."""
    return {f"{kind}_{slug(run_id)}" for kind in TABLE_KINDS}


def share_group_of(group: str) -> str:
    """The share group beside consumer group `group` (a worker knows only the group's name)."""
    return f"{group}-share"


@dataclass(frozen=True)
class RunNames:
    run_id: str

    @property
    def input_topic(self) -> str:
        return f"{TOPIC_PREFIX}{self.run_id}.input"

    @property
    def output_topic(self) -> str:
        return f"{TOPIC_PREFIX}{self.run_id}.output"

    @property
    def events_topic(self) -> str:
        return f"{TOPIC_PREFIX}{self.run_id}.events"

    @property
    def dead_letter_topic(self) -> str:
        """A queues run's dead-letter topic (--dead-letter on: its share group's errors.deadletterqueue.topic.name)."""
        return f"{TOPIC_PREFIX}{self.run_id}.dlq"

    @property
    def group(self) -> str:
        return f"harness-{self.run_id}"

    @property
    def own_prefix(self) -> str:
        """What the run's Kafka user may create topics and transactional ids under (Kafka Streams' internal
        topics start so): `harness clean` drops the topics found under it with the run's."""
        return f"harness-{self.run_id}-"

    @property
    def downstream_group(self) -> str:
        """The consumer group of a downstream consumer of the events topic."""
        return f"harness-{self.run_id}-downstream"

    @property
    def share_group(self) -> str:
        """The share group of a queues run (KIP-932): a name of its own, since a group id has one type."""
        return share_group_of(self.group)

    @property
    def rows_table(self) -> str:
        return f"{SCHEMA}.rows_{slug(self.run_id)}"

    @property
    def outbox_table(self) -> str:
        return f"{SCHEMA}.outbox_{slug(self.run_id)}"

    @property
    def ledger_table(self) -> str:
        return f"{SCHEMA}.ledger_{slug(self.run_id)}"

    @property
    def dedupe_table(self) -> str:
        return f"{SCHEMA}.dedupe_{slug(self.run_id)}"

    @property
    def accounts_table(self) -> str:
        return f"{SCHEMA}.acct_{slug(self.run_id)}"

    @property
    def rejects_table(self) -> str:
        return f"{SCHEMA}.reject_{slug(self.run_id)}"

    def topics(self) -> list[str]:
        """Every topic a run may create."""
        return [self.input_topic, self.output_topic, self.events_topic, self.dead_letter_topic]

    def transactional_id(self, slot: int) -> str:
        return f"harness-{self.run_id}-worker-{slot}"
