"""What a worker leaves for the supervisor and the checker: its events and, at a planned kill point, its crash.

`Events` appends the worker's JSON lines (started, first_message, assigned,
revoked, commit_lost, fetch_stalled, done) to the run's events file; each names
the worker's pid. `KillSwitch` writes the crash record (what a death at this
point leaves applied, unacknowledged or aborted) to the crash log and then
SIGKILLs the worker. Apart from context.py because this is the worker's
evidence, append-only and read by other processes, while context.py is how it
consumes and applies.
"""

import json
import os
import signal
import time
from pathlib import Path

from . import crashlog
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

    def planned(self, msg_id: str) -> bool:
        return msg_id in self.plan_ids and msg_id not in self.already

    def at(self, point: str, msg, unacked=(), acked_unapplied=(), produced=(), **more) -> None:
        """`more`: other facts an experiment's predictors read: lists of records or ids (e.g. `row_only`,
        `event_only`), or a value, or a function called only when the crash happens (e.g. a key's age)."""
        msg_id = msg.key().decode()
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
