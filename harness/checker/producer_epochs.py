"""Which producer epoch each transaction ended with, read from the Java transactional workers' logs.

KIP-890 (transaction version 2) bumps the producer epoch at every EndTxn, so a
late EndTxn or produce of an old transaction is fenced instead of touching the
next one. Whether a run's transactions had that defense depends on the broker
(its finalized `transaction.version`, in the report's environment) and on the
client: Kafka's Java client speaks version 2 where the broker offers it,
librdkafka does not yet. The Java client logs each producer id and epoch it
takes (`ProducerId set to P with epoch E`, at InitProducerId and, under
version 2, in every EndTxn response), and our worker prints each transaction's
end after the call returned (`eos-txn TXN-END ... txn=N result=commit`), so
the order of those lines says which epoch each transaction ended with. Every
line names its process (pid=): one slot's log holds its attempts one after
another, and a zombie's lines among its replacement's. Pure: text in,
counts out; nothing here guesses a version it did not see.
"""

import re
from pathlib import Path

# Bounded numbers: a log is the workers' own, read as untrusted all the same.
EPOCH = re.compile(r"pid=(\d{1,10}) .*ProducerId set to (-?\d{1,19}) with epoch (-?\d{1,6})\b")
TXN_END = re.compile(r"eos-txn TXN-END pid=(\d{1,10}) worker=(\S{1,100}) attempt=(\d{1,9}) txn=(\d{1,9}) result=(commit|abort)\b")
START = re.compile(r"eos-txn START pid=(\d{1,10}) ")
TV2 = re.compile(r"pid=(\d{1,10}) .*Updating isTV2 enabled to (true|false)")
MAX_LOG_BYTES = 64 << 20             # of each worker log, what is read (a run's logs are far smaller)
EXAMPLES = 5


def client_tv2(text: str) -> list[bool]:
    """What the client said of transaction version 2 (its `Updating isTV2 enabled to B` line, from the
    broker's finalized features), per process that said anything: its last word."""
    said: list[list] = []                 # [pid, last word], one per process in the order they started
    for line in text.splitlines():
        m = START.search(line)
        if m:
            said.append([m.group(1), None])
            continue
        m = TV2.search(line)
        if m:
            mine = next((x for x in reversed(said) if x[0] == m.group(1)), None)
            if mine is None:
                said.append(mine := [m.group(1), None])
            mine[1] = m.group(2) == "true"
    return [word for _pid, word in said if word is not None]


def transactions(text: str) -> list[dict]:
    """Each ended transaction of one log, in order: its worker, attempt, number, result, and the producer
    (id, epoch) in force in its process when it began and when its end returned. Lines are told apart by
    the process that wrote them (pid=): a zombie and its replacement write to the same log at once. A
    producer id of -1 (the client's reset before InitProducerId) is no epoch."""
    out = []
    current: dict = {}        # pid -> (producer id, epoch) now
    at_begin: dict = {}       # pid -> (producer id, epoch) when its open transaction began
    for line in text.splitlines():
        m = START.search(line)
        if m:                            # a new process: its producer starts from nothing
            current.pop(m.group(1), None)
            at_begin.pop(m.group(1), None)
            continue
        m = EPOCH.search(line)
        if m:
            pid, producer, epoch = m.group(1), int(m.group(2)), int(m.group(3))
            if producer >= 0:
                current[pid] = (producer, epoch)
                at_begin.setdefault(pid, current[pid])
            continue
        m = TXN_END.search(line)
        if m:
            pid = m.group(1)
            began, now = at_begin.get(pid), current.get(pid)
            out.append({"worker": m.group(2), "attempt": int(m.group(3)), "txn": int(m.group(4)),
                        "result": m.group(5), "began": list(began) if began else None,
                        "ended": list(now) if now else None})
            if now:
                at_begin[pid] = now
    return out


def bumped(t: dict) -> bool | None:
    """Did this transaction end with a new epoch (or, on epoch overflow, a new producer id)? None: unknown."""
    if not t["began"] or not t["ended"]:
        return None
    return t["ended"] != t["began"]


def summary(txns: list[dict], client: str, tv2: list[bool] | None = None) -> dict:
    """The report's `transaction_protocol`. The version is judged on committed transactions only: an abort
    may end with a new epoch under version 1 too (after an error the client recovers from by bumping it),
    and an abort of a transaction that never reached the broker sends no EndTxn under version 2."""
    commits = [t for t in txns if t["result"] == "commit" and bumped(t) is not None]
    moved = sum(1 for t in commits if bumped(t))
    if not commits:
        seen = "unknown"
    elif moved == len(commits):
        seen = "2"
    elif moved == 0:
        seen = "before 2"
    else:
        # KIP-890: a producer may end its first transaction the old way and upgrade for the next one.
        seen = "mixed"
    aborts = [t for t in txns if t["result"] == "abort"]
    return {"client": client, "transactions_ended": len(txns), "commits_with_epoch_known": len(commits),
            "commits_epoch_bumped": moved, "aborts": len(aborts),
            "aborts_epoch_bumped": sum(1 for t in aborts if bumped(t)), "version_seen": seen,
            "processes_said_tv2": {"enabled": sum(1 for x in tv2 or () if x),
                                   "disabled": sum(1 for x in tv2 or () if not x)},
            "evidence": "the Java client's log: its 'ProducerId set to P with epoch E' lines before each "
                        "'eos-txn TXN-END' line of the worker (each line names its process), and its "
                        "'Updating isTV2 enabled to B' line per process",
            "examples": [{k: t[k] for k in ("worker", "attempt", "txn", "result", "began", "ended")}
                         for t in txns[:EXAMPLES]]}


def summarize(logs: Path, client: str) -> dict:
    """`summary` over every worker log of a run's `workers` folder (one log per slot, attempts appended)."""
    txns: list[dict] = []
    tv2: list[bool] = []
    for log in sorted(logs.glob("*.log")):
        if log.is_symlink() or not log.is_file():
            continue
        with open(log, "rb") as f:
            text = f.read(MAX_LOG_BYTES).decode(errors="replace")
        txns += transactions(text)
        tv2 += client_tv2(text)
    return summary(txns, client, tv2)
