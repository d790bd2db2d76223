"""How an experiment's workers are started: Python worker processes, or the Kafka Streams JVM.

A launcher turns a run (its names, stack, folder and parameters) into what the
supervisor needs: a command line per worker slot and attempt, the
environment (secrets travel there, never in argv, which `ps` shows), the
partitions of each slot, and whether workers report their deliveries. The
supervisor knows nothing of what runs inside.
"""

import os
import shutil
import sys
from dataclasses import dataclass, field
from typing import Callable


@dataclass
class Launch:
    command: Callable                      # command(slot) -> argv
    env: dict
    slots: list                            # partitions per worker slot
    group_done: Callable | None = None     # workers that never exit by themselves: when the run is over
    reports_deliveries: bool = True        # every worker process reports how many records it began
    standby: bool = True                   # workers understand --standby (a warm spare per slot)


def transactional_id_of(run, slot_index: int, attempt: int) -> str:
    """The transactional.id of a worker slot's attempt (a fresh one per attempt with --fresh-transactional-id)."""
    tid = run.names.transactional_id(slot_index)
    return tid + f"-attempt-{attempt}" if run.params.fresh_transactional_id else tid


def assign_partitions(partitions: int, workers: int) -> list[list[int]]:
    """Partition p goes to worker slot p % workers; slots without a partition are not started."""
    slots = [[p for p in range(partitions) if p % workers == w] for w in range(workers)]
    return [s for s in slots if s]


@dataclass
class PythonWorkers:
    """`python -m harness.processors.worker --experiment NAME ...`: the experiment's own loop."""
    extra_args: list = field(default_factory=list)

    def prepare(self, run) -> Launch:
        p, names, exp = run.params, run.names, run.exp
        slots = assign_partitions(p.partitions, p.workers)

        def command(slot) -> list[str]:
            cmd = [sys.executable, "-m", "harness.processors.worker", "--experiment", exp.name,
                   "--worker", slot.name, "--attempt", str(slot.attempt), "--bootstrap", run.stack.bootstrap_servers,
                   "--group", names.group, "--input-topic", names.input_topic,
                   "--partitions", ",".join(map(str, slots[slot.index])),
                   "--commit-every", str(p.commit_every), "--crash-log", str(run.crash_log),
                   "--events", str(run.events), "--crash-plan", str(run.crash_plan)]
            if exp.stores.ledger:
                cmd += ["--ledger", names.ledger_table]
            if exp.stores.dedupe:
                cmd += ["--dedupe", names.dedupe_table]
            if exp.stores.output:
                cmd += ["--output-topic", names.output_topic,
                        "--transactional-id", transactional_id_of(run, slot.index, slot.attempt)]
            if p.transaction_timeout_ms:
                cmd += ["--transaction-timeout-ms", str(p.transaction_timeout_ms)]
            if p.commit_interval_ms:
                cmd += ["--commit-interval-ms", str(p.commit_interval_ms)]
            if p.assignment == "group":
                cmd += ["--assignment", "group", "--group-protocol", p.group_protocol or "classic"]
            return cmd + self.extra_args

        return Launch(command, {**os.environ, "HARNESS_WORKER_DSN": run.stack.postgres_dsn}, slots)

    def finish(self, run, result) -> None:
        pass


@dataclass
class StreamsWorkers:
    """The Kafka Streams application of experiments/eos-streams, one JVM per slot (built with mvn)."""

    def prepare(self, run) -> Launch:
        from . import streams_jvm as streams
        p, names = run.params, run.names
        jar = streams.build(run.log)
        env = {**os.environ, "HARNESS_PG_PASSWORD": streams.jdbc(run.stack.postgres_dsn)[2]}
        slots = [list(range(p.partitions))] * min(p.workers, p.partitions)

        def command(slot):
            return streams.command(jar, slot, bootstrap=run.stack.bootstrap_servers, input_topic=names.input_topic,
                                   output_topic=names.output_topic, application_id=names.group,
                                   state_dir=run.run_dir / "streams-state", crash_plan=run.crash_plan,
                                   crash_log=run.crash_log, commit_interval_ms=p.commit_interval_ms,
                                   ledger_table=names.ledger_table if run.exp.stores.ledger else None,
                                   dsn=run.stack.postgres_dsn)
        # Streams runs until told to stop: the run is over when the group's commits reach the end.
        return Launch(command, env, slots, group_done=lambda: run.progress.done >= p.messages,
                      reports_deliveries=False)

    def finish(self, run, result) -> None:
        from .streams_jvm import first_record_events
        result.events = sorted(result.events + first_record_events(run.run_dir / "workers"),
                               key=lambda e: e.get("t", 0))
        # Streams' working state (RocksDB files and a 14 MB native library copy) is not evidence: drop it.
        shutil.rmtree(run.run_dir / "streams-state", ignore_errors=True)
