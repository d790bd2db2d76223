"""A worker's history: every poll, seek, offset commit, send and transaction boundary, as it happened.

The ledger and the topics say what the run's effects are; they cannot say
whether a consumer skipped a record, read one twice out of order, or whether a
read_committed reader saw a record of an aborted transaction. Jepsen's Kafka
checker finds those in a history of operations, and so does ours
(checker/anomalies.py). Each worker process appends one JSON array per
operation to `history/<worker>-<attempt>.jsonl` in the run folder, written at
once (one small write per poll batch, commit or delivery report: no buffer a
SIGKILL could lose), time first:

    [t, "open", {"worker": "w0", "attempt": 1, "pid": 123, "transactional_id": ...}]
    [t, "assign", topic, {partition: next offset}]     also after a rewind or a stall's re-seek ("seek")
    [t, "join", topic, {partition: committed offset}]  a group gave partitions (the consumer starts there
                                                        or later: it fetches its offsets again itself)
    [t, "poll", topic, {partition: [[first, last], ...]}]   consecutive offsets as ranges
    [t, "commit", topic, {partition: next offset}]     offsets committed (a consumer's own commit)
    [t, "revoke", topic, [partition, ...]]             a group took partitions away (or they were lost)
    [t, "txn", "begin" | "committing" | "commit" | "abort", n]    n: the process's nth transaction
    [t, "send", topic, partition, offset, key, n]       a delivery report without error (n: its transaction)
    [t, "send-error", topic, key, error, n]

A send names the transaction it was produced in (a delivery report may come
after its transaction ended: an aborted one's late reports are still its).
"committing" is written just before commit_transaction is called: a process
that died after "begin" without it cannot have committed (no EndTxn was
sent), one that died after it may have. The file is the worker's own and
append-only; the harness reads it as untrusted input all the same.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path


def ranges(offsets: list[int]) -> list[list[int]]:
    """[3, 4, 5, 9, 10] -> [[3, 5], [9, 10]], in the order given (a jump back starts a new range)."""
    out: list[list[int]] = []
    for o in offsets:
        if out and o == out[-1][1] + 1:
            out[-1][1] = o
        else:
            out.append([o, o])
    return out


class History:
    """Appends a worker process's operations to its history file; a no-op without a folder. The file is
    created at the first operation, so a warm spare that is never used (or is re-activated as another
    attempt) leaves none."""

    def __init__(self, folder: str | None, worker: str, attempt: int, **header):
        self.fd = None
        self.path = Path(folder) / f"{worker}-{attempt}.jsonl" if folder else None
        self.header = {"worker": worker, "attempt": attempt, **header}
        self.txn_no: int | None = None       # the transaction open now (None: not transactional)
        self.send_errors = 0                 # failed delivery reports so far (counted with or without a file)
        self._errors_at_begin = 0

    def _write(self, *fields) -> None:
        if self.path is None:
            return
        if self.fd is None:
            self.fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW, 0o644)
            self._line("open", {**self.header, "pid": os.getpid()})
        self._line(*fields)

    def _line(self, *fields) -> None:
        os.write(self.fd, (json.dumps([round(time.time(), 6), *fields], separators=(",", ":")) + "\n").encode())

    def poll(self, topic: str, msgs: list) -> None:
        if self.path is None or not msgs:
            return
        per: dict[int, list[int]] = {}
        for m in msgs:
            per.setdefault(m.partition(), []).append(m.offset())
        self._write("poll", topic, {str(p): ranges(offs) for p, offs in per.items()})

    def positions(self, op: str, topic: str, offsets: dict) -> None:
        """An "assign", "join", "seek" or "commit": the next offset of each partition."""
        self._write(op, topic, {str(p): int(o) for p, o in offsets.items()})

    def revoked(self, topic: str, partitions) -> None:
        self._write("revoke", topic, sorted(int(p) for p in partitions))

    def txn(self, step: str) -> None:
        if step == "begin":
            self.txn_no = (self.txn_no or 0) + 1
            self._errors_at_begin = self.send_errors
        self._write("txn", step, self.txn_no)

    def txn_failed_sends(self) -> int:
        """Delivery reports with an error since the open transaction began (after a flush: all of them)."""
        return self.send_errors - self._errors_at_begin

    def on_delivery(self):
        """A producer's on_delivery callback for the record produced now: its place in the log (or its
        error), with the transaction it was produced in."""
        n = self.txn_no

        def delivered(err, msg) -> None:
            if err is not None:
                self.send_errors += 1
            if self.path is None:
                return
            key = msg.key().decode(errors="replace") if msg.key() is not None else None
            if err is not None:
                self._write("send-error", msg.topic(), key, str(err)[:200], n)
            else:       # acks=0: no offset comes back (None): -1, a send with no place in the log
                offset = msg.offset()
                self._write("send", msg.topic(), msg.partition(), -1 if offset is None else offset, key, n)
        return delivered

    def close(self) -> None:
        if self.fd is not None:
            os.close(self.fd)
        self.fd, self.path = None, None
