"""A wall-time bound on a worker's blocking transactional calls: a call that never returns ends the worker, not the run.

librdkafka's transactional calls take a timeout, and a retriable error asks
for the same call again. Against a coordinator that stopped answering (a
frozen node, or one killed while the client still waits on its connection),
the calls and their retries can block as long as the run lasts: a worker once
sat in send_offsets_to_transaction after a broker kill until the run's time
limit, and the run said "incomplete", nothing about the guarantee under test.

`CallDeadline` watches the call in progress from a daemon thread. Past its
deadline it hands what the worker held to `on_stuck` (the worker logs it as a
`txn_stuck` event: the open transaction's records and ledger rows, whose
outcome is now unknown, committed or aborted) and ends the process with
STUCK_EXIT, which the supervisor restarts like a fenced worker once it finds
that event. The successor's init_transactions settles the transaction one way
or the other (with a fresh transactional.id, the broker's transaction timeout
does), and the checker counts the event's records as bounds, never as a guess.
The watcher holds its lock from the check to the exit, so the worker cannot
leave the call (or start the next one) while its evidence is taken; if
`on_stuck` fails, the process exits 1, an unplanned death, not a described one.

Time the process spends stopped (SIGSTOP: the zombie fault, a held worker)
does not count: the thread adds at most two of its ticks (0.5 s) per wake-up,
so a freeze shows as one short gap. A watcher starved of CPU counts less than
the wall clock: the deadline is a floor, not an exact time.
"""

from __future__ import annotations

import os
import threading
import time
import traceback
from contextlib import contextmanager

from .history import flush_all

STUCK_EXIT = 4
TICK_S = 0.25


def _evidence(evidence: dict) -> dict:
    """The evidence's values, functions called now; one that fails is named, never a reason not to exit."""
    out, errors = {}, []
    for k, v in evidence.items():
        try:
            out[k] = v() if callable(v) else v
        except Exception as e:  # noqa: BLE001 - the exit matters more than one list
            out[k] = None
            errors.append(f"{k}: {type(e).__name__}: {e}")
    return {**out, "evidence_errors": errors} if errors else out


class CallDeadline:
    """`with deadline.call("commit_transaction", produced=..., unacked=...):` bounds the block by
    `seconds` of awake time. Evidence values may be functions: called only when the call is stuck."""

    def __init__(self, seconds: float, on_stuck, exit=os._exit):
        self.seconds, self.on_stuck, self.exit = seconds, on_stuck, exit
        self._lock = threading.Lock()
        self._call: tuple | None = None       # (name, evidence) of the call in progress
        self._awake = 0.0                     # seconds of it the watcher was awake to see
        self._thread: threading.Thread | None = None

    @contextmanager
    def call(self, name: str, **evidence):
        with self._lock:
            self._call, self._awake = (name, evidence), 0.0
        if self._thread is None:             # started in the worker itself (a forked process has no threads)
            self._thread = threading.Thread(target=self._watch, name="call-deadline", daemon=True)
            self._thread.start()
        try:
            yield
        finally:
            with self._lock:
                self._call = None

    def tick(self, elapsed: float) -> tuple | None:
        """Count `elapsed` seconds towards the call in progress (at most two ticks: a longer gap is a
        stopped process, not a slow call). The stuck call's (name, seconds, evidence) once past the deadline."""
        with self._lock:
            return self._count(elapsed)

    def _count(self, elapsed: float) -> tuple | None:
        if self._call is None:
            return None
        self._awake += min(max(elapsed, 0.0), 2 * TICK_S)
        if self._awake <= self.seconds:
            return None
        name, evidence = self._call
        return name, round(self._awake, 1), _evidence(evidence)

    def _watch(self) -> None:
        last = time.monotonic()
        while True:
            time.sleep(TICK_S)
            now = time.monotonic()
            with self._lock:      # held to the exit: the worker cannot leave the call meanwhile
                stuck = self._count(now - last)
                last = now
                if stuck:
                    code = STUCK_EXIT
                    try:
                        self.on_stuck(*stuck)
                    except BaseException:  # noqa: BLE001 - undescribed: exit as a failure, not as "stuck"
                        traceback.print_exc()
                        code = 1
                    flush_all()          # os._exit runs no atexit handler
                    self.exit(code)
                    return
