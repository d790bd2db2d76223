"""Who holds a transaction open at the end of a run: Kafka's own `kafka-transactions.sh describe-producers`.

A partition whose last stable offset stays below its end (hanging-transaction,
checker/anomalies.py) says that a transaction is open, not whose. The broker
knows: DescribeProducers answers, per partition, each producer's id, epoch and
the first offset of its open transaction. The Python client has no call for
it, so we ask Kafka's own tool, `org.apache.kafka.tools.TransactionsCommand`
(what `kafka-transactions.sh describe-producers` runs), from the jars `harness
up` resolves (stack/maven.py resolve_tools). A cluster that needs client settings
(the local stack's SCRAM login) gets them in Java's names (kafka_java) through a
0600 file given as `--command-config` and deleted afterwards, never on the
command line. A partition it could not describe says why (no jars here, client
settings Java cannot take, the tool failed): its producers are unknown, never
guessed. When some producer holds a transaction open, the tool's `list`
(ListTransactions) names the transactional.id each producer id serves: the
identity by which the report ties a transaction to a worker the harness's stop
killed (reporting/stop_excuse.py); a producer it does not list has none.
"""

from __future__ import annotations

import os
import subprocess
import tempfile
from contextlib import contextmanager

from ..clients import kafka_client, kafka_java
from ..core.errors import HarnessError, first_line

TOOL = "org.apache.kafka.tools.TransactionsCommand"
DESCRIBE_TIMEOUT_S = 60
MAX_PARTITIONS = 4          # one JVM per partition: an end with many open partitions describes the first few
COLUMNS = {"ProducerId": "producer_id", "ProducerEpoch": "producer_epoch", "LastSequence": "last_sequence",
           "LastTimestamp": "last_timestamp", "CurrentTransactionStartOffset": "transaction_start_offset",
           "LatestCoordinatorEpoch": "coordinator_epoch"}


def parse(text: str | list[str]) -> list[dict]:
    """The tool's table (a header row, then one row per producer) -> one dict per producer whose open
    transaction starts at an offset (CurrentTransactionStartOffset >= 0); numbers as ints, anything else
    dropped. Lines before the header (log noise) and rows of another width are ignored."""
    rows = [line.split() for line in (text.splitlines() if isinstance(text, str) else text) if line.strip()]
    head = next((i for i, r in enumerate(rows) if "ProducerId" in r and "CurrentTransactionStartOffset" in r), None)
    if head is None:
        return []
    names = rows[head]
    out = []
    for r in rows[head + 1:]:
        if len(r) != len(names):
            continue
        d = {}
        for name, value in zip(names, r):
            if name in COLUMNS and value.lstrip("-").isdigit() and len(value) <= 20:
                d[COLUMNS[name]] = int(value)
        if d.get("transaction_start_offset", -1) >= 0 and "producer_id" in d:
            out.append(d)
    return out


def describe(bootstrap: str, topic: str, partitions, lib=None) -> dict:
    """{partition: [open transactions' producers] or a string saying why they are unknown}."""
    parts = sorted(partitions)
    if not parts:
        return {}
    why = None
    if lib is None:
        from ..stack import maven
        lib = maven.resolved_tools()
        if lib is None:
            why = "Kafka's command-line tools are not on this machine (`harness up` for a local stack resolves them)"
    java = {}
    if why is None:
        try:
            java = kafka_java.java_properties(kafka_client.settings_for(bootstrap), "Kafka's TransactionsCommand")
        except HarnessError as e:
            why = str(e)
    out: dict = {}
    with _command_config(java) as config:
        def tool(*args) -> str | list:
            return _tool(lib, bootstrap, config, args)
        for i, p in enumerate(parts):
            if why or i >= MAX_PARTITIONS:
                out[p] = why or f"not described (only the first {MAX_PARTITIONS} partitions are)"
                continue
            said = tool("describe-producers", "--topic", topic, "--partition", str(p))
            out[p] = parse(said) if isinstance(said, list) else said
        if any(isinstance(v, list) and v for v in out.values()):
            listed = tool("list")       # ListTransactions: which transactional.id each producer id serves
            ids = parse_list(listed) if isinstance(listed, list) else {}
            for v in out.values():
                for d in v if isinstance(v, list) else ():
                    d["transactional_id"] = ids.get(d["producer_id"])
    return out


def _tool(lib, bootstrap: str, config: str | None, args) -> str | list:
    """The tool's output lines, or a string saying why it failed (its last line, scrubbed of the login)."""
    cmd = ["java", "-Xmx128m", "-XX:TieredStopAtLevel=1", "-cp", f"{lib}/*", TOOL, "--bootstrap-server",
           bootstrap, *(["--command-config", config] if config else []), *args]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=DESCRIBE_TIMEOUT_S)
    except (OSError, subprocess.TimeoutExpired) as e:
        return f"{TOOL} failed: {first_line(e)}"
    if proc.returncode != 0:
        said = kafka_client.scrub((proc.stderr.strip() or proc.stdout.strip()),
                                  kafka_client.settings_for(bootstrap)).splitlines()
        return f"{TOOL} exited {proc.returncode}" + (f": {said[-1][:200]}" if said else "")
    return proc.stdout.splitlines()


def parse_list(lines: list[str]) -> dict:
    """`list`'s table (TransactionalId, Coordinator, ProducerId, TransactionState) -> {producer id:
    transactional.id}. Ids are untrusted text: only printable ones of at most 249 characters (Kafka's own
    limit for names) count; rows of another width and lines before the header are ignored."""
    rows = [line.split() for line in lines if line.strip()]
    head = next((i for i, r in enumerate(rows) if "TransactionalId" in r and "ProducerId" in r), None)
    if head is None:
        return {}
    tid, pid = rows[head].index("TransactionalId"), rows[head].index("ProducerId")
    out = {}
    for r in rows[head + 1:]:
        if len(r) == len(rows[head]) and r[pid].isdigit() and len(r[pid]) <= 20 and len(r[tid]) <= 249 \
                and r[tid].isprintable():
            out[int(r[pid])] = r[tid]
    return out


@contextmanager
def _command_config(java: dict):
    """A 0600 file of these Java client properties for the tool's --command-config (None when there are
    none), deleted on the way out: the login never goes on a command line."""
    if not java:
        yield None
        return
    fd, path = tempfile.mkstemp(prefix="harness-tool-", suffix=".properties")     # 0600
    try:
        with os.fdopen(fd, "w") as f:
            f.write(kafka_java.properties_text(java))
        yield path
    finally:
        os.unlink(path)
