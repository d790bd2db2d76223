"""The client faults a transactional worker carries out on itself: planned aborts and pauses.

Kafka's own system tests abort a share of their transactions on purpose
(`TransactionalMessageCopier --enable-random-aborts`), and Jepsen freezes
clients in the middle of a transaction: that is how aborted reads and torn
transactions were found in Kafka-protocol brokers (KAFKA-17754). Both need the
worker's hand, because only the worker knows where its transaction stands; the
run's plan file says what to do (runtime/crashplan.py), seeded:

- abort: at each commit point a seeded draw (per worker attempt) may say
  "abort instead". The worker flushes, so every record of the transaction is
  in the log, logs `txn_aborted` with `planned: true` and what the transaction
  held, aborts and rewinds to its committed offsets. Such an event is as exact
  as a crash record, and the predictions stay exact (checker/predict.py).
- client-pause: when the open transaction holds a planned payment at the
  planned step, the worker flushes, logs `client_paused` (step, payment,
  seconds, what it held) and stops itself with SIGSTOP; the supervisor's fault
  (faults/client.py) sends SIGCONT when the seconds are over. The worker then
  goes on as it would. What the pause did is the broker's and the client's
  doing: past transaction.timeout.ms the coordinator has aborted the
  transaction, and the worker meets that as an abort or a fencing, which it
  logs like any other (those make the numbers they touch bounds).

Each planned payment pauses its worker once in the run: a successor reads
the pauses its predecessors logged.
"""

from __future__ import annotations

import json
import os
import random
import signal

from .history import flush_all

MID_PRODUCE, BEFORE_COMMIT, AFTER_SEND_OFFSETS = "mid-produce", "before-commit", "after-send-offsets"
PAUSE_STEPS = {
    MID_PRODUCE: "right after a planned payment's record is produced, its transaction open",
    BEFORE_COMMIT: "with every record of the transaction produced, before send_offsets_to_transaction",
    AFTER_SEND_OFFSETS: "after send_offsets_to_transaction, before commit_transaction",
}
PLANNED_ABORT = "planned abort (the abort fault)"


def paused_ids(events_path) -> set:
    """The payments whose pause a worker already took (their `client_paused` events)."""
    out = set()
    try:
        with open(events_path, "rb") as f:
            for line in f:
                if b'"client_paused"' not in line:
                    continue
                try:
                    e = json.loads(line)
                except ValueError:
                    continue
                if isinstance(e, dict) and e.get("event") == "client_paused" and isinstance(e.get("message_id"), str):
                    out.add(e["message_id"])
    except OSError:
        pass
    return out


class ClientFaults:
    """This worker attempt's part of the abort and client-pause plans."""

    def __init__(self, plan, events, worker: str, attempt: int):
        self.events = events
        self.abort_rate = plan.abort_rate if plan else 0.0
        self._draws = random.Random(f"{plan.seed if plan else 0}-aborts-{worker}-{attempt}")
        self.pause_at = plan.pause_at if plan else None
        self.pauses = dict(plan.pauses) if plan else {}
        self.taken = paused_ids(events.path) if self.pauses else set()

    def abort_due(self) -> bool:
        """At a commit point: should this transaction be aborted instead (a seeded draw)?"""
        return self.abort_rate > 0 and self._draws.random() < self.abort_rate

    def pause(self, step: str, ids, flush, **held) -> None:
        """At `step` of the open transaction holding `ids` (or a function returning them): freeze this process if the plan says so.
        `flush()` returns the records it could not deliver; `held` lists what the transaction holds
        (functions returning ids are called only when pausing)."""
        if step != self.pause_at or not self.pauses:
            return
        ids = ids() if callable(ids) else ids
        planned = next((i for i in ids if i in self.pauses and i not in self.taken), None)
        if planned is None:
            return
        self.taken.add(planned)
        left = flush()
        self.events.emit("client_paused", step=step, message_id=planned, seconds=self.pauses[planned],
                         undelivered=left, **{k: list(v() if callable(v) else v) for k, v in held.items()})
        flush_all()                                   # what it knew is written before it freezes
        os.kill(os.getpid(), signal.SIGSTOP)          # the supervisor's fault sends SIGCONT
        self.events.emit("client_resumed", step=step, message_id=planned)
