"""How an experiment's workers are started: Python worker processes (of one kind, or of several
roles), or the Kafka Streams JVM.

A launcher turns a run (its names, stack, folder and parameters) into what the
supervisor needs: a command line per worker slot and attempt, the
environment (secrets travel there, never in argv, which `ps` shows), the
partitions of each slot, and whether workers report their deliveries. The
supervisor knows nothing of what runs inside.
"""

import json
import os
import shutil
import sys
from dataclasses import dataclass
from typing import Callable

from ..runtime import worker_args
from ..runtime.call_deadline import STUCK_EXIT


@dataclass
class Launch:
    command: Callable                      # command(slot) -> argv
    env: dict | Callable                   # the workers' environment, or env(slot) -> dict per slot and attempt
    slots: list                            # partitions per worker slot
    group_done: Callable | None = None     # workers that never exit by themselves: when the run is over
    reports_deliveries: bool = True        # every worker process reports how many records it began
    standby: bool = True                   # workers understand --standby (a warm spare per slot)
    names: list | None = None              # a name per slot (default w0, w1, ...)
    # Workers the harness did not write (they keep no crash records and write no events):
    watch: Callable | None = None          # watch(supervisor), every turn: observe them from outside
    may_exit: Callable | None = None       # may_exit(slot): is an exit 0 the end of its work, or a failure?
    ledger_reader: Callable | None = None  # reads the effects instead of the ledger table (checker/ledger.py)
    dead_letter_reader: Callable | None = None   # dead_letter_reader() -> the run's dead letters (queues, --dead-letter)
    annotate: Callable | None = None       # annotate(run, result, report): add what only the launcher knows
    bad_input: Callable | None = None      # bad_input(result) -> one line when the workers never could run
    planned_exits: tuple = (-9, 137, 3)    # exit statuses restarted as crashes: SIGKILL, Java halt, fenced producer
    own_process_group: bool = False        # each worker in its own process group, killed whole when it dies
    forked: bool = False                   # `harness.workers.worker` command lines, forked from a server


def kafka_login(run) -> dict:
    """The Kafka client settings a run's consumers log in with: its own user's (workload.run_kafka_user),
    else (no user made: an external cluster, a plaintext stack) the stack's."""
    from ..clients import kafka_client
    login = getattr(run, "kafka_login", None)
    return dict(login) if login is not None else kafka_client.settings_for(run.stack.bootstrap_servers)


# What a shell of `eval "$(harness env)"` (stack/shellenv.py) or a user's own set-up puts in the environment
# that logs in as someone other than the run: libpq's user and password settings (a consumer's bare `psql`
# would connect as the `harness` role, owner of every run's tables), the harness's own Kafka login file and
# its state folder. A consumer gets its run's logins (HARNESS_WORKER_DSN / HARNESS_POSTGRES_DSN, the Kafka
# settings below) and nothing else. libpq's PGREQUIREAUTH and PGCHANNELBINDING stay: they only restrict.
NOT_FOR_WORKERS = ("PGUSER", "PGPASSWORD", "PGPASSFILE", "PGSERVICE", "PGSERVICEFILE", "PGDATABASE",
                   "HARNESS_KAFKA_CONFIG_FILE", "HARNESS_HOME", "HARNESS_POSTGRES_DSN")


def worker_env(run) -> dict:
    """The environment of a run's workers: this process's without another login (NOT_FOR_WORKERS), with the
    run's Kafka login as the only client settings they inherit (kafka_client.ENV), never the harness's own
    (a super user on its SCRAM stack)."""
    from ..clients import kafka_client
    own = {k: v for k, v in os.environ.items() if k not in NOT_FOR_WORKERS}
    return {**own, kafka_client.ENV: json.dumps({run.stack.bootstrap_servers: kafka_login(run)})}


def transactional_id_of(run, slot_index: int, attempt: int) -> str:
    """The transactional.id of a worker slot's attempt (a fresh one per attempt with --fresh-transactional-id)."""
    tid = run.names.transactional_id(slot_index)
    return tid + f"-attempt-{attempt}" if run.params.fresh_transactional_id else tid


def assign_partitions(partitions: int, workers: int) -> list[list[int]]:
    """Partition p goes to worker slot p % workers; slots without a partition are not started."""
    slots = [[p for p in range(partitions) if p % workers == w] for w in range(workers)]
    return [s for s in slots if s]


def python_worker_command(run, slot, partitions: list, group: str, topic: str, **more) -> list[str]:
    """`python -m harness.workers.worker --experiment NAME ...` for one slot and attempt; `more`: other
    worker arguments by name (runtime/worker_args.py), its `option` dict merged with the declared ones."""
    p, names, exp = run.params, run.names, run.exp
    stores = exp.stores
    values = {
        "experiment": exp.name, "variant": exp.variant or None, "worker": slot.name, "attempt": slot.attempt,
        "bootstrap": run.stack.bootstrap_servers, "group": group, "input_topic": topic, "partitions": partitions,
        "commit_every": p.commit_every, "crash_log": run.crash_log, "events": run.events,
        "crash_plan": run.crash_plan, "history": None if p.no_history else run.history,
        "ledger": names.ledger_table if stores.ledger else None,
        "dedupe": names.dedupe_table if stores.dedupe else None,
        "rejects": names.rejects_table if stores.rejects else None,
        "rows": names.rows_table if stores.rows else None,
        "outbox": names.outbox_table if stores.outbox else None,
        "events_topic": names.events_topic if stores.events else None,
        "output_topic": names.output_topic if stores.output else None,
        "transactional_id": transactional_id_of(run, slot.index, slot.attempt) if stores.output else None,
        "accounts": names.accounts_table if stores.accounts else None,
        # the run options its declaration hands to its workers
        "option": {opt.name: getattr(p, opt.name) for opt in exp.options if opt.worker},
    }
    values["option"].update(more.pop("option", {}))
    return [sys.executable, "-m", "harness.workers.worker", *worker_args.encode({**values, **more})]


@dataclass
class PythonWorkers:
    """`python -m harness.workers.worker --experiment NAME ...`: the experiment's own loop."""

    def check(self, stack) -> None:
        """Bad input this launcher can see before anything is created (HarnessError); Python workers have none."""

    def more(self, run) -> dict:
        """Worker arguments beyond the experiment's, by name (runtime/worker_args.py): none here."""
        return {}

    def prepare(self, run) -> Launch:
        slots = assign_partitions(run.params.partitions, run.params.workers)
        more = self.more(run)

        def command(slot) -> list[str]:
            return python_worker_command(run, slot, slots[slot.index], run.names.group, run.names.input_topic,
                                         **more)

        # Our own workers also end with STUCK_EXIT when a transactional call outlives its deadline.
        return Launch(command, {**worker_env(run), "HARNESS_WORKER_DSN": run.worker_dsn}, slots, forked=True,
                      planned_exits=(-9, 137, 3, STUCK_EXIT))

    def finish(self, run, result) -> None:
        pass

    def open_transactional_ids(self, run, slot_index: int, attempt: int) -> list[str]:
        """The transactional.id a worker attempt the stop SIGKILLed may have left a transaction open under."""
        return [transactional_id_of(run, slot_index, attempt)]


@dataclass
class RoleWorkers:
    """Several kinds of Python worker in one run, as the experiment's `roles` declare them: a role that
    consumes the input gets one process per partition set (like plain workers), any other role one
    process. All of them are slots of the same supervisor: restarted when killed, killed when the run
    stops, dead with it if it dies. A role finishes only after the roles it names in `after` did
    (each worker reads their `done` events)."""

    def prepare(self, run) -> Launch:
        p, names = run.params, run.names
        slots, slot_names, specs = [], [], []
        for role in run.exp.roles:
            if role.consumes == "input":
                parts = assign_partitions(p.partitions, p.workers)
            else:
                parts = [list(range(p.partitions))]
            for i, ps in enumerate(parts):
                slots.append(ps)
                slot_names.append(f"{role.name}-{i}")
                specs.append(role)
        by_role = {r.name: [n for n, spec in zip(slot_names, specs) if spec is r] for r in run.exp.roles}

        def command(slot) -> list[str]:
            role = specs[slot.index]
            if role.consumes == "events":
                group, topic = names.downstream_group, names.events_topic
            else:
                group, topic = names.group, names.input_topic
            after = [n for r in role.after for n in by_role[r]]
            return python_worker_command(run, slot, slots[slot.index], group, topic, role=role.name, after=after)

        return Launch(command, {**worker_env(run), "HARNESS_WORKER_DSN": run.worker_dsn}, slots,
                      reports_deliveries=False, standby=False, names=slot_names, forked=True)

    def finish(self, run, result) -> None:
        pass


def java_client_settings(stack, app: str | None = None, settings: dict | None = None) -> dict:
    """`settings` (default: the stack's Kafka client settings) as a Java worker's properties (kafka_java);
    HarnessError naming `app` (default: the Kafka Streams app) and any setting it cannot take."""
    from ..clients import kafka_client, kafka_java
    return kafka_java.java_properties(kafka_client.settings_for(stack.bootstrap_servers) if settings is None
                                      else settings, app or kafka_java.STREAMS_APP)


@dataclass
class StreamsWorkers:
    """The Kafka Streams application of streams-worker, one JVM per slot (built with mvn)."""

    def check(self, stack) -> None:
        """Client settings the Java app cannot take are an error before the run starts."""
        java_client_settings(stack)

    def prepare(self, run) -> Launch:
        from . import streams_jvm as streams
        from ..clients import kafka_java
        from ..core.procs import dying_with_this_process
        p, names = run.params, run.names
        jar = streams.build(run.log)
        start = streams.worker_start(jar, p.streams_jvm or "cds", run.log)
        run.log(f"Kafka Streams workers start as {start.said}")
        # The user's Kafka client settings in Java's names; they may hold secrets, so the environment.
        java = java_client_settings(run.stack, settings=kafka_login(run))
        env = {**worker_env(run), "HARNESS_PG_PASSWORD": streams.jdbc(run.worker_dsn)[2],
               kafka_java.ENV: kafka_java.properties_text(java)}
        slots = [list(range(p.partitions))] * min(p.workers, p.partitions)

        def command(slot):
            cmd = streams.command(jar, slot, bootstrap=run.stack.bootstrap_servers, input_topic=names.input_topic,
                                  output_topic=names.output_topic, application_id=names.group,
                                  state_dir=run.run_dir / "streams-state", crash_plan=run.crash_plan,
                                  crash_log=run.crash_log, commit_interval_ms=p.commit_interval_ms,
                                  ledger_table=names.ledger_table if run.exp.stores.ledger else None,
                                  dsn=run.worker_dsn, start=start, group_protocol=p.streams_protocol)
            # A JVM runs until told to stop, and nothing would tell it once a SIGKILLed harness is gone.
            return dying_with_this_process(cmd)
        # Streams runs until told to stop: the run is over when the group's commits reach the end.
        # A warm spare per slot with --streams-spare on (off by default: not yet measured to make the suite no
        # slower): the supervisor hands it the next attempt's command line
        # only once the halted JVM has exited, so its group join and InitProducerId fence that JVM as a cold
        # start's would (docs/design.md, streams-worker/README.md "Warm spare").
        spare = (p.streams_spare or "off") == "on"

        def annotate(run, result, report) -> None:
            report.data["streams_jvm"] = {"asked": p.streams_jvm or "cds", "java": start.java,
                                          "release": streams.java_release(start.java),
                                          "cache": start.kind.name if start.kind and start.cache else None,
                                          "spare": spare}
        return Launch(command, env, slots, group_done=lambda: run.progress.done >= p.messages,
                      reports_deliveries=False, standby=spare, annotate=annotate)

    def open_transactional_ids(self, run, slot_index: int, attempt: int) -> list[str]:
        """The transactional.ids a Streams JVM the stop SIGKILLed may have left a transaction open under: named
        by the process id it kept in its state directory (read before finish() deletes it)."""
        from .streams_jvm import transactional_ids
        return transactional_ids(run.run_dir / "streams-state" / f"w{slot_index}", run.names.group)

    def finish(self, run, result) -> None:
        from .streams_jvm import first_record_events
        result.events = sorted(result.events + first_record_events(run.run_dir / "workers"),
                               key=lambda e: e.get("t", 0))
        # Streams' working state (its process id and task directories) is not evidence: drop it.
        shutil.rmtree(run.run_dir / "streams-state", ignore_errors=True)
