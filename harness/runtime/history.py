"""A worker's history: every poll, seek, offset commit, send and transaction boundary, as it happened.

The ledger and the topics say what the run's effects are; they cannot say
whether a consumer skipped a record, read one twice out of order, or whether a
read_committed reader saw a record of an aborted transaction. Jepsen's Kafka
checker finds those in a history of operations, and so does ours
(checker/anomalies.py). Each worker process appends one JSON array per
operation to `history/<worker>-<attempt>.jsonl` in the run folder, written at
once (one small write per poll batch, commit or delivery report: no buffer a
SIGKILL could lose, except delivery reports: see below), time first:

    [t, "open", {"worker": "w0", "attempt": 1, "pid": 123, "transactional_id": ...}]
    [t, "assign", topic, {partition: next offset}]     also after a rewind or a stall's re-seek ("seek")
    [t, "join", topic, {partition: committed offset}]  a group gave partitions (the consumer starts there
                                                        or later: it fetches its offsets again itself)
    [t, "poll", topic, {partition: [[first, last], ...]}]   consecutive offsets as ranges
    [t, "commit-begin", topic, {partition: next offset}]   a consumer's own offset commit is asked for
    [t, "commit", topic, {partition: next offset}]     ... and was committed
    [t, "commit-error", topic, {partition: next offset}, error]   ... and was refused, or timed out
    [t, "revoke", topic, [partition, ...]]             a group took partitions away (or they were lost)
    [t, "txn", "begin" | "committing" | "commit" | "abort", n]    n: the process's nth transaction
    [t, "send", topic, partition, offset, key, n]       a delivery report without error (n: its transaction)
    [t, "send-error", topic, key, error, n]

A send names the transaction it was produced in (a delivery report may come
after its transaction ended: an aborted one's late reports are still its).
Delivery reports come in batches, thousands a second inside one poll, flush or
commit_transaction call: one write and one JSON encoding each cost a fast
transactional worker a fifth of its throughput (`harness bench`). So their
lines wait in memory, each with the time its report came, and go out in one
write: before the next other operation's line, when the oldest has waited
`MAX_WAIT_S`, before a planned crash or a client pause, and when the process
ends any other way (`flush_all`: at exit, in the fork server's child before
its `os._exit`, before a stuck call's exit). A SIGKILL from outside can still
lose reports that came within the last `MAX_WAIT_S` and were not yet acted on,
the same as if the process had died before they came; no line is ever written
out of its order.

"committing" is written just before commit_transaction is called: a process
that died after "begin" without it cannot have committed (no EndTxn was
sent), one that died after it may have. The file is the worker's own and
append-only; the harness reads it as untrusted input all the same.
"""

from __future__ import annotations

import atexit
import json
import os
import time
from json.encoder import encode_basestring_ascii as _json_string
from pathlib import Path

MAX_WAIT_S = 0.2                      # the longest a delivery report waits in memory while reports keep coming
_MAX_WAIT_US = int(MAX_WAIT_S * 1_000_000)
_LIVE: list = []                      # this process's histories with a file, for flush_all


def flush_all() -> None:
    """Write every history's waiting delivery reports (the process is about to end, or to stop)."""
    for h in list(_LIVE):
        try:
            h.flush()
        except OSError:
            pass


atexit.register(flush_all)


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
        self._callback: tuple | None = None  # (transaction, its on_delivery callback)
        self._sends: list[tuple] = []        # delivery reports not yet written: (µs, topic, partition, offset, key, n)
        if self.path is not None:
            _LIVE.append(self)               # an exception, sys.exit (a fencing) or os._exit writes what came

    def _open(self) -> None:
        if self.fd is None:
            self.fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW, 0o644)
            self._put(_line(time.time(), "open", {**self.header, "pid": os.getpid()}))

    def _write(self, *fields) -> None:
        if self.path is None:
            return
        self._open()
        self.flush()
        self._put(_line(time.time(), *fields))

    def _put(self, text: str) -> None:
        os.write(self.fd, text.encode())

    def flush(self) -> None:
        """Write the delivery reports that came since the last line (one write for all of them)."""
        if not self._sends or self.path is None:
            return
        sends, self._sends = self._sends, []
        self._open()
        self._put("".join(_send_line(*s) for s in sends))

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

    def commit_error(self, topic: str, offsets: dict, error) -> None:
        self._write("commit-error", topic, {str(p): int(o) for p, o in offsets.items()}, str(error)[:200])

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
        error), with the transaction it was produced in (one callback per transaction, made once)."""
        n = self.txn_no
        if self._callback is not None and self._callback[0] == n:
            return self._callback[1]

        def delivered(err, msg) -> None:
            if err is not None:
                self.send_errors += 1
            if self.path is None:
                return
            key = msg.key()
            key = key.decode(errors="replace") if key is not None else None
            if err is not None:
                self._write("send-error", msg.topic(), key, str(err)[:200], n)
            else:       # acks=0: no offset comes back (None): -1, a send with no place in the log
                offset = msg.offset()
                us = time.time_ns() // 1000
                self._sends.append((us, msg.topic(), msg.partition(), -1 if offset is None else offset, key, n))
                if us - self._sends[0][0] > _MAX_WAIT_US:
                    self.flush()
        self._callback = (n, delivered)
        return delivered

    def close(self) -> None:
        self.flush()
        if self.fd is not None:
            os.close(self.fd)
        self.fd, self.path = None, None
        if self in _LIVE:
            _LIVE.remove(self)


def _line(t: float, *fields) -> str:
    return json.dumps([round(t, 6), *fields], separators=(",", ":")) + "\n"


_TOPICS: dict[str, str] = {}        # topic -> its JSON string (a worker writes to one or two)


def _send_line(us: int, topic: str, partition: int, offset: int, key: str | None, n: int | None) -> str:
    """A "send" line that reads back as `_line` writes it, without the general encoder (a fast worker writes
    thousands a second; float formatting alone would cost more than the rest): tests/unit/test_history_writer.py
    checks that both read back the same."""
    t = _TOPICS.get(topic)
    if t is None:
        t = _TOPICS[topic] = _json_string(topic)
    return '[%d.%06d,"send",%s,%d,%d,%s,%s]\n' % (us // 1_000_000, us % 1_000_000, t, partition, offset,
                                                   "null" if key is None else _json_string(key),
                                                   "null" if n is None else "%d" % n)
