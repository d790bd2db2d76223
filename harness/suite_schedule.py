"""How many of a suite's runs go at once: as many as the cores have room for.

On a small machine the suite is bound by CPU (measured: 180 CPU-seconds of
two cores' 206 over a 103 s suite). A fixed number of runs at a time is wrong
both ways: while every running experiment waits (key-expiry's restart delays,
a transaction's timeout, a broker fault's recovery) the cores sit idle, and
when all of them restart JVMs at once each restart waits for a core, which
stretches exactly the restart times the suite reports. So with `--parallel
auto` (the default) the next run starts when the cores were at least
`ROOM_CORES` idle over the last `WINDOW_S` (the kernel's count in
/proc/stat, so the broker's and PostgreSQL's work counts too), and not sooner
than `SETTLE_S` after the previous start (a run's own start-up shows only
after it began); at most `cap` at once, and always one when none runs.
`--parallel N` keeps exactly N at once, as before.

Every start is recorded with the running count and the idle cores it saw, so
suite.json says why the suite ran as it did.
"""

from __future__ import annotations

import os
import time
from collections import deque
from dataclasses import dataclass, field

ROOM_CORES = 0.75
WINDOW_S = 1.0
SETTLE_S = 1.0


def cpu_times(path: str = "/proc/stat") -> tuple[float, float] | None:
    """(idle, total) jiffies of all CPUs since boot, or None when the kernel's count cannot be read."""
    try:
        with open(path, encoding="ascii") as f:
            first = f.readline().split()
        if not first or first[0] != "cpu":
            return None
        ticks = [int(x) for x in first[1:9]]        # user nice system idle iowait irq softirq steal
    except (OSError, ValueError, UnicodeDecodeError):
        return None
    if len(ticks) < 5:
        return None
    return float(ticks[3] + ticks[4]), float(sum(ticks))


def cores() -> int:
    """The cores this process may run on (its affinity), not merely the machine's count."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


def parse_parallel(text: str | int) -> int | None:
    """`auto` -> None (decided by room), else a count of at least 1; anything else raises ValueError."""
    if isinstance(text, int):
        value = text
    elif str(text).strip().lower() == "auto":
        return None
    else:
        value = int(str(text).strip())
    if value < 1:
        raise ValueError(f"--parallel must be auto or at least 1, got {value}")
    return value


@dataclass
class Scheduler:
    """Says when the next run may start. `fixed` None: by room, up to `cap`; else exactly `fixed` at once."""
    fixed: int | None
    n_cores: int = field(default_factory=cores)
    read: object = cpu_times
    clock: object = time.monotonic
    samples: deque = field(default_factory=deque)
    last_start: float | None = None
    starts: list = field(default_factory=list)

    @property
    def cap(self) -> int:
        return self.fixed if self.fixed is not None else 2 * self.n_cores

    def sample(self) -> None:
        got = self.read()
        if got is not None:
            now = self.clock()
            self.samples.append((now, *got))
            while len(self.samples) > 2 and now - self.samples[1][0] >= WINDOW_S:
                self.samples.popleft()

    def idle_cores(self) -> float | None:
        """Idle cores over the last window (at least WINDOW_S), or None before a window's worth of samples."""
        if len(self.samples) < 2:
            return None
        (t0, idle0, total0), (t1, idle1, total1) = self.samples[0], self.samples[-1]
        if t1 - t0 < WINDOW_S or total1 <= total0:
            return None
        return round(self.n_cores * (idle1 - idle0) / (total1 - total0), 2)

    def may_start(self, running: int) -> bool:
        if running >= self.cap:
            return False
        if self.fixed is not None or running == 0:
            return True
        if self.last_start is not None and self.clock() - self.last_start < SETTLE_S:
            return False
        idle = self.idle_cores()
        return idle is not None and idle >= ROOM_CORES

    def started(self, name: str, running: int, since: float) -> None:
        """Records a start: `running` is how many ran before it, `since` the seconds since the suite began."""
        self.last_start = self.clock()
        self.starts.append({"experiment": name, "at_seconds": round(since, 1), "running": running,
                            "idle_cores": self.idle_cores()})

    def describe(self) -> dict:
        return {"mode": "fixed" if self.fixed is not None else "auto", "cores": self.n_cores, "cap": self.cap,
                "room_cores": None if self.fixed is not None else ROOM_CORES,
                "max_running": max((s["running"] + 1 for s in self.starts), default=0), "starts": self.starts}


def summary_line(scheduling: dict | None, parallel) -> str:
    """One sentence for suite.md and suite.html: how many ran at once and why."""
    if not isinstance(scheduling, dict):
        return f"{parallel} experiments at a time"
    if scheduling.get("mode") == "auto":
        return (f"experiments started while at least {scheduling.get('room_cores')} of the "
                f"{scheduling.get('cores')} cores were idle (at most {scheduling.get('cap')}, and one whenever "
                f"none ran): up to {scheduling.get('max_running')} ran at once")
    return f"{scheduling.get('cap')} experiments at a time (--parallel {scheduling.get('cap')})"
