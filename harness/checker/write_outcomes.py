"""Each write's outcome as its writer knew it: ok, failed, or unknown.

A network does not say whether a request it lost was applied. A produce whose
delivery report is a timeout, a lost connection or NOT_LEADER_OR_FOLLOWER
(KAFKA-13574) may be in the log or not; a transaction whose process died, or
whose commit call did not return, after "committing" may have committed or
not. Jepsen's rule, which the anomaly classes follow: an unknown write is
written if any reader ever sees it and absent otherwise, never an anomaly
either way (checker/anomalies.py judges only sends whose outcome is known).
This module counts them per kind, from the workers' histories, so the report
says how much of the run was unknown to its own clients: a run whose faults
left many unknowns proves less than one that left none.

A failed send is one whose error says the record never left or was refused
for good (too large, not authorized, purged from the queue before sending);
every other error is unknown. A consumer's own offset commit is the same: ok
when the call returned, failed when librdkafka never sent it (its own local
errors), unknown for every broker error (librdkafka retries a commit, so the
error is the last try's, and an earlier try may have been stored), a timeout
or a lost connection, or when the process died between asking and the answer
(its history ends with the "commit-begin"). An unknown
commit may have moved the group's offset: the records after the last known
commit may be redelivered, or not.
"""

from __future__ import annotations

import re

from .anomalies import ABORTED, COMMITTED, UNKNOWN, Process, txn_outcomes

# Delivery errors that say the broker never took the record (librdkafka's names, as str(err) holds them).
DEFINITE_FAILURES = ("_PURGE_QUEUE", "MSG_SIZE_TOO_LARGE", "_MSG_SIZE_TOO_LARGE", "INVALID_RECORD",
                     "TOPIC_AUTHORIZATION_FAILED", "CLUSTER_AUTHORIZATION_FAILED", "_UNKNOWN_TOPIC",
                     "_UNKNOWN_PARTITION", "_INVALID_ARG", "RECORD_LIST_TOO_LARGE")
# Offset commit errors that say the offsets were never sent: librdkafka's own, local ones. Every broker
# error can be the last answer of a chain of retries whose first try was stored (librdkafka retries a
# commit on a timeout, a lost connection, NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE ...), and Kafka's
# coordinator answers COORDINATOR_NOT_AVAILABLE or NOT_COORDINATOR also after appending the offsets to its
# log: all of those are unknown.
COMMIT_NEVER_SENT = ("_NO_OFFSET", "_INVALID_ARG", "_STATE", "_ASSIGNMENT_LOST")
_CODE = re.compile(r"code=([A-Za-z_]+)")
MAX_IDS = 20


def send_failed_for_good(error: str) -> bool:
    return any(name in (error or "") for name in DEFINITE_FAILURES)


def commit_refused(error: str) -> bool:
    """Whether a commit's error says it was never sent (its KafkaError code, exactly)."""
    m = _CODE.search(error or "")
    return m is not None and m.group(1) in COMMIT_NEVER_SENT


def count(procs: list[Process], topic: str | None = None) -> dict:
    """{"sends": {ok, failed, unknown}, "transactions": {committed, aborted, unknown}, "commits": {ok, failed,
    unknown}, "unknown_sends": ids, "unknown_transactions": ["worker/attempt transaction n", ...],
    "unknown_commits": ["worker/attempt partition:offset,...", ...]} over the histories (sends to `topic`
    when given; commits of any topic: a consumer commits the input it reads)."""
    sends = {"ok": 0, "failed": 0, "unknown": 0}
    txns = {COMMITTED: 0, ABORTED: 0, UNKNOWN: 0}
    commits = {"ok": 0, "failed": 0, "unknown": 0}
    unknown_sends, unknown_txns, unknown_commits = [], [], []

    def unknown_commit(proc: Process, offsets: dict) -> None:
        commits["unknown"] += 1
        unknown_commits.append(f"{proc.name} " + ",".join(f"{p}:{o}" for p, o in sorted(offsets.items())))
    for p in procs:
        asked = None                # the commit asked for and not yet answered
        for op in p.ops:
            if op[1] == "commit-begin":
                if asked is not None:       # asked again without an answer line: the first is unknown
                    unknown_commit(p, asked)
                asked = op[3]
                continue
            if op[1] in ("commit", "commit-error") and asked is not None and op[3] != asked:
                unknown_commit(p, asked)    # an answer to another question: the one asked stays unanswered
            if op[1] == "commit":
                commits["ok"] += 1
                asked = None
                continue
            if op[1] == "commit-error":
                if commit_refused(op[4]):
                    commits["failed"] += 1
                else:
                    unknown_commit(p, op[3])
                asked = None
                continue
            if topic is not None and op[1] in ("send", "send-error") and op[2] != topic:
                continue
            if op[1] == "send":
                sends["ok"] += 1
            elif op[1] == "send-error":
                if send_failed_for_good(op[4]):
                    sends["failed"] += 1
                else:
                    sends["unknown"] += 1
                    unknown_sends.append(op[3])
        if asked is not None:       # the process ended between asking and the answer
            unknown_commit(p, asked)
        for n, outcome in sorted(txn_outcomes(p).items()):
            txns[outcome] += 1
            if outcome == UNKNOWN:
                unknown_txns.append(f"{p.name} transaction {n}")
    return {"sends": sends, "transactions": txns, "commits": commits,
            "unknown_sends": sorted({str(k) for k in unknown_sends})[:MAX_IDS],
            "unknown_transactions": unknown_txns[:MAX_IDS], "unknown_commits": unknown_commits[:MAX_IDS]}
