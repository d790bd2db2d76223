"""eos-streams: the same exactly-once promise from Kafka Streams (exactly_once_v2), and its limit.

A Kafka Streams topology (streams-worker, Java) consumes the payments
and produces them to the output topic; Streams commits offsets and output in
one transaction by itself. The worker dies by `Runtime.halt` inside the
topology, after processing a planned record and before Streams commits: that
is the only gap our code can reach, since Streams owns the commit. With
`--effect postgres` the topology also inserts a ledger row by JDBC, and that
write, outside Kafka, duplicates like eos-boundary's.
"""

from ...checker.damage import ABORTED, DUPLICATED
from ...checker.predictors import LedgerPredictor, OutputPredictor
from ...core.options import Option
from ..common_options import COMMIT_INTERVAL_MS
from ..declaration import Experiment, KillPoint, Stores
from ..launch import StreamsWorkers

PROCESS = KillPoint("after-process-before-commit", "process (produce in the task's transaction)",
                    "Streams commit", frozenset({ABORTED, DUPLICATED}),
                    "every record processed since the last Streams commit is aborted and processed again; "
                    "with --effect postgres their ledger rows are written again")

STREAMS_JVM = Option(
    "streams_jvm", str, "eos-streams only: how each worker JVM starts: cds (a class-data archive trained beside "
    "the jar), aot (a JDK 25's ahead-of-time cache, JEP 483: classes loaded and linked before the run; "
    "needs a JDK 25 installed) or plain (neither). Speed only: the same worker and checks; `harness bench "
    "streams` measures each.", default="cds", choices=("cds", "aot", "plain"), applies_to="eos-streams")
STREAMS_SPARE = Option(
    "streams_spare", str, "eos-streams only: on keeps a warm spare JVM per worker slot (started while the "
    "worker runs; it gets its real command line only once the halted JVM is dead, so it fences it as a cold "
    "start does); off starts each restart cold (as `harness bench streams` does). Speed only: the same worker "
    "and checks. Off by default until it is measured to make the suite no slower.", default="off",
    choices=("off", "on"), applies_to="eos-streams")
STREAMS_PROTOCOL = Option(
    "streams_protocol", str, "eos-streams only: the Kafka Streams group protocol (group.protocol): classic (a "
    "consumer group, the workers static members) or KIP-1071's streams (a streams group, tasks assigned by the "
    "broker: streams.version 1, Kafka 4.2+ clusters). With streams the workers are dynamic members (this Kafka "
    "Streams client refuses static membership with it), so a halted worker's tasks wait for the broker's "
    "group.streams.session.timeout.ms.", shown="classic", choices=("classic", "streams"), applies_to="eos-streams")
EFFECT = Option("effect", str, "eos-streams only: also write each record to the Postgres ledger by JDBC.",
                default="none", choices=("none", "postgres"), applies_to="eos-streams")

# The Java worker lists in `unacked` every record processed since the last commit: produced and, with
# --effect postgres, written to the ledger.
EOS_STREAMS = Experiment(
    name="eos-streams",
    steps=("consume", "[--effect postgres: ledger insert by JDBC]", "produce", "commit by Streams"),
    kill_points=(PROCESS,),
    default_point=PROCESS.name,
    stores=Stores(output=True),
    allows=frozenset({"hanging-transaction"}),   # Streams' own transactions: their end is Streams' to choose
    proves="Kafka Streams exactly_once_v2 under Runtime.halt: the topic is exact; a JDBC write in the topology is not.",
    expected="read_committed output exact; with --effect postgres, ledger duplicates = aborted records",
    predictors=(OutputPredictor(produced="unacked"),),
    launcher=StreamsWorkers(),
    # Streams keeps its own transactional ids and timeout: of the transaction options only the interval applies.
    options=(EFFECT, COMMIT_INTERVAL_MS, STREAMS_JVM, STREAMS_SPARE, STREAMS_PROTOCOL),
    variants={"effect=postgres": {"stores": Stores(ledger=True, output=True),
                                  "predictors": (LedgerPredictor(), OutputPredictor(produced="unacked"))}},
    suite={"group": "eos", "weight": 10, "args": ["--effect", "postgres"]},
)
