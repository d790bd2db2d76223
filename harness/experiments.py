"""The experiment catalog: one declaration per experiment.

Each entry names the worker mode, the default kill point, what the
experiment proves and what it expects to observe. The runner, the report and
`--help` read from here, so the story of an experiment is told once.
"""

from dataclasses import dataclass

from .faults import killpoints as kp


@dataclass(frozen=True)
class Experiment:
    name: str
    mode: str                 # worker mode (processors/)
    kill_point: str
    steps: str
    proves: str
    expected: str
    uses_ledger: bool
    uses_dedupe: bool
    uses_output: bool


CATALOG = {e.name: e for e in [
    Experiment("offset-before", "offset-before", kp.AFTER_COMMIT_BEFORE_EFFECT,
               "poll, commit offset, effect",
               "At-most-once: commit before the effect, and each crash between them loses payments.",
               "lost = crashed payments, duplicates 0, ledger below expected",
               True, False, False),
    Experiment("offset-after", "offset-after", kp.AFTER_EFFECT_BEFORE_COMMIT,
               "poll, effect, commit offset",
               "At-least-once: effect before commit, and each crash charges again what was not committed.",
               "duplicates = effects not yet committed at each crash, lost 0, ledger above expected",
               True, False, False),
    Experiment("dedupe", "dedupe", kp.AFTER_EFFECT_BEFORE_COMMIT,
               "poll, one PG transaction {dedupe key (unique), effect if new}, commit offset",
               "Exactly-once effect: the same crashes, made harmless by an idempotency key in the effect's transaction.",
               "0 lost, 0 duplicates, ledger exactly as expected, dedupe hits = redeliveries",
               True, True, False),
    Experiment("eos", "eos", kp.AFTER_PRODUCE_BEFORE_TXN_COMMIT,
               "poll, produce, send_offsets_to_transaction, commit_transaction (read_committed)",
               "Kafka exactly-once: output and offsets commit atomically; read_committed sees each record once.",
               "read_committed output: 0 lost, 0 duplicates; read_uncommitted shows the aborted copies",
               False, False, True),
    Experiment("eos-boundary", "eos-boundary", kp.AFTER_EXTERNAL_EFFECT_BEFORE_TXN_COMMIT,
               "as eos, plus a Postgres insert (own commit) before commit_transaction",
               "Where Kafka's exactly-once stops: at the first write outside Kafka.",
               "Kafka output exact; Postgres ledger duplicates = aborted records",
               True, False, True),
    Experiment("eos-dedupe", "eos-dedupe", kp.AFTER_EXTERNAL_EFFECT_BEFORE_TXN_COMMIT,
               "as eos-boundary, the Postgres effect guarded by the dedupe table in one PG transaction",
               "Exactly-once on both sides: Kafka transactions for the topic, an idempotency key for the database.",
               "Kafka output exact and Postgres exact",
               True, True, True),
    Experiment("eos-streams", "eos-streams", kp.AFTER_PROCESS_BEFORE_COMMIT,
               "Kafka Streams topology (exactly_once_v2): consume, [--effect postgres: ledger insert], produce; "
               "commit by Streams",
               "Kafka Streams exactly_once_v2 under Runtime.halt: the topic is exact; a JDBC write in the topology is not.",
               "read_committed output exact; with --effect postgres, ledger duplicates = aborted records",
               False, False, True),
    Experiment("zombie", "eos", kp.ZOMBIE,
               "as eos; the worker is frozen (SIGSTOP), replaced with the same transactional.id, then resumed (SIGCONT)",
               "Zombie fencing: a producer that wakes up after its replacement took its transactional.id is fenced.",
               "the zombie gets a fatal fenced error; read_committed output exact",
               False, False, True),
]}


def names() -> list[str]:
    return list(CATALOG)
