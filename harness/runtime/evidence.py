"""What a worker leaves for the supervisor and the checker: its events and, at a planned kill point, its crash.

`Events` appends the worker's JSON lines (started, first_message, assigned,
revoked, commit_lost, fetch_stalled, done) to the run's events file; each names
the worker's pid. `KillSwitch` writes the crash record (what a death at this
point leaves applied, unacknowledged or aborted) to the crash log and then
SIGKILLs the worker; for the overlap fault it freezes the worker after its key
check instead, and once resumed lets it leave at its next gap (runtime/overlaps.py
says the story). Apart from context.py because this is the worker's
evidence, append-only and read by other processes, while context.py is how it
consumes and applies.
"""

import json
import os
import signal
import time
from pathlib import Path

from . import crashlog, overlaps
from .crashplan import CrashPlan


class Events:
    """Append-only JSON lines the supervisor reads: started, first_message, done. Each names the
    worker's pid, so a report (and a test) can tell which process did what."""

    def __init__(self, path: Path, worker: str, attempt: int):
        self.path, self.worker, self.attempt = path, worker, attempt

    def emit(self, event: str, **fields) -> None:
        line = json.dumps({"event": event, "worker": self.worker, "attempt": self.attempt,
                           "pid": os.getpid(), "t": time.time(), **fields}) + "\n"
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW, 0o644)
        try:
            os.write(fd, line.encode())
        finally:
            os.close(fd)


class KillSwitch:
    """Crashes the worker (SIGKILL to itself) on the first delivery of a planned message id, at its
    planned kill point.

    The loop calls `at(point, msg, ...)` in every gap between its steps and says what a death there
    does: `unacked` (effects applied, not acknowledged: they will be applied again), `acked_unapplied`
    (acknowledged, never applied: lost) and `produced` (written in the open transaction: aborted).
    Each list may be records or a function returning ids: turned into ids only when crashing, so the
    check costs nothing per record however long the batch grows. `more` is further evidence an
    experiment's predictor reads: other lists of ids (a service's `row_only`), or values (when each
    unacknowledged key was written, the TTL), each possibly a function called only when crashing.
    """

    def __init__(self, plan: CrashPlan | None, log_path: Path, worker: str, attempt: int, experiment: str):
        self.plan = plan
        self.plan_ids = plan.crash_ids if plan else frozenset()
        self.already = crashlog.crashed_ids(log_path)
        self.log_path, self.worker, self.attempt, self.experiment = log_path, worker, attempt, experiment
        self.before_crash = None       # e.g. flush a transactional producer so its aborted records are on the broker
        self.delivered = 0             # records this process began to handle, recorded with the crash
        self.history = None            # the process's History: what it knew is written before it dies
        self.overlap_ids = frozenset(plan.overlaps) if plan else frozenset()
        self.overlap_log = overlaps.path_beside(log_path)
        self.resumed_from = None       # the payment this process froze on, once resumed: it leaves at its next gap
        self.events = None             # the process's Events: a leaving worker says how many records it handled

    def planned(self, msg_id: str) -> bool:
        return msg_id in self.plan_ids and msg_id not in self.already

    def at(self, point: str, msg, unacked=(), acked_unapplied=(), produced=(), **more) -> None:
        """`more`: other facts an experiment's predictors read: lists of records or ids (e.g. `row_only`,
        `event_only`), or a value, or a function called only when the crash happens (e.g. a key's age)."""
        if self.resumed_from is not None:
            self.leave(point)
        msg_id = msg.key().decode()
        if msg_id in self.overlap_ids:
            self.overlap(point, msg, unacked)
        if self.planned(msg_id) and self.plan.point_of(msg_id) in (None, point):
            self.crash(point, msg, unacked=_ids(unacked), acked_unapplied=_ids(acked_unapplied),
                       produced=_ids(produced), **{k: fact(v) for k, v in more.items()})

    def crash(self, point: str, msg, **lists) -> None:
        if self.before_crash:
            self.before_crash()
        if self.history is not None:
            self.history.flush()
        crashlog.append(self.log_path, {
            "point": point, "message_id": msg.key().decode(), "partition": msg.partition(),
            "offset": msg.offset(), **{k: list(v) if isinstance(v, (list, tuple)) else v for k, v in lists.items()},
            "worker": self.worker,
            "attempt": self.attempt, "experiment": self.experiment, "delivered": self.delivered,
            "time": time.time()})
        os.kill(os.getpid(), signal.SIGKILL)


    def overlap(self, point: str, msg, unacked) -> None:
        """The overlap fault's steps in this process: freeze right after the check on the payment's first
        delivery; or, as the replacement, say when its own write of a payment another froze on is done."""
        msg_id, mine = msg.key().decode(), (self.worker, self.attempt)
        if point not in (self.plan.overlap_at, self.plan.overlap_applied):
            return
        steps = overlaps.episodes(overlaps.read(self.overlap_log)).get(msg_id, {})
        if point == self.plan.overlap_at and not steps:
            if self.history is not None:
                self.history.flush()
            overlaps.append(self.overlap_log, "frozen", message_id=msg_id, partition=msg.partition(),
                            offset=msg.offset(), point=point, unacked=_ids(unacked), worker=self.worker,
                            attempt=self.attempt, pid=os.getpid())
            os.kill(os.getpid(), signal.SIGSTOP)       # returns when the fault resumes us (SIGCONT)
            self.resumed_from = msg_id
        elif point == self.plan.overlap_applied and "frozen" in steps and "applied" not in steps \
                and (steps["frozen"].get("worker"), steps["frozen"].get("attempt")) != mine:
            overlaps.append(self.overlap_log, "applied", message_id=msg_id, point=point, worker=self.worker,
                            attempt=self.attempt)

    def leave(self, point: str) -> None:
        """A resumed worker's late write is done: say so and exit without committing (the replacement owns
        its partitions now)."""
        if self.history is not None:
            self.history.flush()
        overlaps.append(self.overlap_log, "left", message_id=self.resumed_from, point=point, worker=self.worker,
                        attempt=self.attempt)
        if self.events is not None:
            self.events.emit("overlap_left", message_id=self.resumed_from, delivered=self.delivered)
        os._exit(0)


class KeyedRecord:
    """Something a worker handles that is not a Kafka record (an outbox row, a provider's request), as the
    kill switch sees a record: its payment id is the key, no partition, no offset."""

    def __init__(self, message_id: str, value: bytes):
        self.message_id, self._value = message_id, value

    def key(self) -> bytes:
        return self.message_id.encode()

    def value(self) -> bytes:
        return self._value

    def partition(self):
        return None

    def offset(self):
        return None


def _ids(x) -> list[str]:
    return list(x()) if callable(x) else ids(x)


def fact(x):
    """One of KillSwitch.at's other facts, as the crash record holds it: a list of records or ids
    becomes a list of ids; a function is called now; any other value (a dict, a number) stays."""
    x = x() if callable(x) else x
    if isinstance(x, (list, tuple)):
        return [i if isinstance(i, str) else i.key().decode() for i in x]
    return x


def ids(msgs) -> list[str]:
    return [m.key().decode() for m in msgs]
