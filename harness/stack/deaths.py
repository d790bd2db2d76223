"""Notice, within seconds, that the stack's own broker or PostgreSQL died while the workers ran.

A SIGKILLed broker of the local stack went unnoticed: the run waited out its whole time limit while
the clients printed their reconnection errors. On the local stack the harness knows its services'
processes (their pid records: pid, start time, ports), so `StackWatch` looks at them about every
second; once one is gone (or its pid is another process now) the run ends `incomplete`, naming it by
its pid and port. It is ticked by the supervisor as a fault is (tick, stops_run), without being one:
it is not in the report's list of faults. A worker that keeps failing (a killed PostgreSQL makes every
attempt exit at once) is not blamed before the watch has looked once more (look_now).

A death the run causes on purpose is not one to stop for: with a fault that kills or stops Kafka
nodes (broker-kill, leader-kill, the network faults) the nodes are not watched, only PostgreSQL.
Compose and external stacks run processes the harness does not own: nothing is watched there, and the
note says so.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from ..core import procs

WATCH_EVERY_S = 1.0


@dataclass(frozen=True)
class Watched:
    name: str              # the stack's name for it: kafka, kafka-2, postgres
    pid: int
    start_time: int
    port: int | None

    def gone(self) -> bool:
        return not procs.alive(self.pid) or procs.start_time(self.pid) != self.start_time

    def words(self) -> str:
        port = f", port {self.port}" if self.port else ""
        return f"{'Kafka node ' + self.name if self.name.startswith('kafka') else 'PostgreSQL'} (pid {self.pid}{port})"


class StackWatch:
    """The supervisor's ticks call `tick`; `stops_run` says which service died, once one has."""

    name = "stack-watch"

    def __init__(self, watched: list[Watched], note: str):
        self.watched, self.note = watched, note
        self.died: str | None = None
        self._next = 0.0

    @classmethod
    def of(cls, stack, kafka_left_alone: str | None = None) -> "StackWatch":
        """What to watch on `stack`; `kafka_left_alone`: why its Kafka nodes are not watched (a fault of
        the run kills them), None to watch them."""
        if stack.kind != "local":
            return cls([], f"the {stack.kind} stack's processes are not the harness's own: a death of its broker "
                           "or PostgreSQL is not watched for (the run then ends at its time limit)")
        from ..core.paths import state_dir
        from .local_services import services
        watched = []
        for key, svc in services(state_dir(), stack.brokers).items():
            if key == "toxiproxy" or (kafka_left_alone and key.startswith("kafka")):
                continue
            rec = svc.running()
            if rec is not None:
                watched.append(Watched(key, rec.pid, rec.start_time, rec.ports.get(key)))
        note = "watching " + (", ".join(w.words() for w in watched) or "nothing (no service of it is running)")
        if kafka_left_alone:
            note += f"; not its Kafka nodes ({kafka_left_alone})"
        return cls(watched, note)

    # -- the part of the fault protocol the supervisor calls --------------------------------
    def tick(self, sup=None, now: float | None = None) -> None:
        now = time.monotonic() if now is None else now
        if self.died or now < self._next:
            return
        self._next = now + WATCH_EVERY_S
        dead = next((w for w in self.watched if w.gone()), None)
        if dead is not None:
            self.died = (f"the stack's {dead.words()} died during the run, and nothing the run did killed it: "
                         "the run cannot go on")

    def look_now(self) -> None:
        """Look at once, however recent the last look: the supervisor asks before it blames the workers for
        failures that a dead service caused (they fail faster than the watch looks)."""
        self._next = 0.0
        self.tick()

    def busy(self) -> bool:
        return False

    def stops_run(self) -> str | None:
        return self.died

    def finish(self, sup=None) -> None:
        pass
