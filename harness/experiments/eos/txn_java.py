"""`--client java`: the eos family's worker on Kafka's own Java client (streams-worker, harness.txn.TxnWorker).

The Python workers speak the transaction protocol through librdkafka, which
has not implemented transaction version 2 (KIP-890's client side: a new
producer epoch with every transaction, so a late EndTxn of an old
transaction is fenced). Kafka's Java client has. This worker runs the same
loop as eos_loops.py's `transactional_loop` (same steps, kill points, crash
records, events and output tags), so the experiments' predictors judge it
unchanged; only what the Python loop alone does is refused in one line
(the abort and client-pause faults it carries out itself, warm spares).

It lives in the Streams module's jar (same Kafka client, Jackson and JDBC
driver, one mvn build) and starts with the same class-data archive. Its
evidence of the transaction version it used is the Java client's own log:
checker/producer_epochs.py reads which producer epoch each transaction ended
with, from every worker's log (`TxnJavaWorkers.finish`).
"""

import os
from dataclasses import dataclass

from ...runtime.call_deadline import STUCK_EXIT
from ..common_options import TRANSACTION_TIMEOUT_MS, TXN_STUCK_AFTER_S
from ..launch import Launch, assign_partitions, java_client_settings, kafka_login, transactional_id_of, worker_env

MAIN_CLASS = "harness.txn.TxnWorker"


def command(run, slot, partitions: list, jar, start) -> list[str]:
    """The JVM command line of one slot's attempt (no secret: those travel in the environment)."""
    from .. import streams_jvm
    p, names, exp = run.params, run.names, run.exp
    stuck_ms = round(1000 * (p.txn_stuck_after or TXN_STUCK_AFTER_S))
    cmd = [start.java, *streams_jvm.JVM_OPTIONS, *start.flags(), "-Dharness.worker=true", "-cp", str(jar), MAIN_CLASS,
           "--experiment", exp.name, "--bootstrap", run.stack.bootstrap_servers, "--group", names.group,
           "--input-topic", names.input_topic, "--output-topic", names.output_topic,
           "--transactional-id", transactional_id_of(run, slot.index, slot.attempt),
           "--partitions", ",".join(map(str, partitions)), "--worker", slot.name, "--attempt", str(slot.attempt),
           "--crash-plan", str(run.crash_plan), "--crash-log", str(run.crash_log), "--events", str(run.events),
           "--commit-every", str(p.commit_every),
           "--transaction-timeout-ms", str(p.transaction_timeout_ms or TRANSACTION_TIMEOUT_MS),
           "--txn-stuck-after-ms", str(max(stuck_ms, 500))]
    if p.commit_interval_ms:
        cmd += ["--commit-interval-ms", str(p.commit_interval_ms)]
    if not p.no_history:
        cmd += ["--history", str(run.history)]
    if exp.stores.ledger:
        url, user, _password = streams_jvm.jdbc(run.worker_dsn)
        cmd += ["--ledger", names.ledger_table, "--jdbc-url", url] + (["--jdbc-user", user] if user else [])
        if exp.stores.dedupe:
            cmd += ["--dedupe", names.dedupe_table]
    return cmd


@dataclass
class TxnJavaWorkers:
    """One JVM per worker slot, each with a fixed set of partitions, as the Python workers."""

    def check(self, stack) -> None:
        """Client settings the Java client cannot take are an error before the run starts."""
        from ...clients.kafka_java import TXN_APP
        java_client_settings(stack, TXN_APP)

    def prepare(self, run) -> Launch:
        from .. import streams_jvm
        from ...clients import kafka_java
        from ...core.procs import dying_with_this_process
        jar = streams_jvm.build(run.log)
        start = streams_jvm.worker_start(jar, "cds", run.log)
        run.log(f"Java transactional workers start as {start.said}")
        java = java_client_settings(run.stack, kafka_java.TXN_APP, kafka_login(run))
        env = {**worker_env(run), "HARNESS_PG_PASSWORD": streams_jvm.jdbc(run.worker_dsn)[2],
               kafka_java.ENV: kafka_java.properties_text(java)}
        slots = assign_partitions(run.params.partitions, run.params.workers)

        def launch_command(slot) -> list[str]:
            # A JVM outlives a SIGKILLed harness unless told otherwise.
            return dying_with_this_process(command(run, slot, slots[slot.index], jar, start))

        def annotate(run, result, report) -> None:
            from ...checker.producer_epochs import summarize
            report.data["transaction_protocol"] = summarize(run.run_dir / "workers", "java")

        return Launch(launch_command, env, slots, standby=False, annotate=annotate,
                      planned_exits=(-9, 137, 3, STUCK_EXIT))

    def finish(self, run, result) -> None:
        pass

    def open_transactional_ids(self, run, slot_index: int, attempt: int) -> list[str]:
        """The transactional.id a JVM the stop SIGKILLed may have left a transaction open under: ours, as
        the Python workers'."""
        return [transactional_id_of(run, slot_index, attempt)]
