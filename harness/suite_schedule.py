"""How many of a suite's runs go at once: as many as the cores have room for.

On a small machine the suite is bound by CPU (measured: 180 CPU-seconds of
two cores' 206 over a 103 s suite). A fixed number of runs at a time is wrong
both ways: while every running experiment waits (key-expiry's restart delays,
a transaction's timeout, a broker fault's recovery) the cores sit idle, and
when all of them restart JVMs at once each restart waits for a core, which
stretches exactly the restart times the suite reports. So with `--parallel
auto` (the default) the next run starts when the cores were at least
`ROOM_CORES` idle over the last `WINDOW_S`, and not sooner than `SETTLE_S`
after the previous start (a run's own start-up and its workers show only a
few seconds after it began); at most two per core (and one per GiB of
available memory), and always one when none runs. `--parallel N` keeps
exactly N at once, as before.

The cores are the ones this process may use: its CPU affinity, each CPU's
own count in /proc/stat (so the broker's and PostgreSQL's work counts too),
or, under a cgroup CPU quota (a container's `--cpus`), the quota and the
cgroup's own usage. Without either count the suite runs a fixed
`cores + 1` at once and says it could not measure.

Every start is recorded with the running count and the idle cores it saw, so
suite.json says why the suite ran as it did.
"""

from __future__ import annotations

import math
import os
import time
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path

ROOM_CORES = 0.75
WINDOW_S = 1.0
SETTLE_S = 3.0
CLOCK_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def affinity() -> set[int]:
    try:
        return set(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return set(range(os.cpu_count() or 1))


def busy_seconds(cpus: set[int], path: str = "/proc/stat") -> float | None:
    """Core-seconds the given CPUs have been busy since boot (not idle, not waiting for I/O), from each
    CPU's own line of /proc/stat; None when the kernel's count cannot be read or names none of them."""
    try:
        with open(path, encoding="ascii") as f:
            lines = f.read(1 << 20).splitlines()
    except (OSError, UnicodeDecodeError):
        return None
    busy, seen = 0, 0
    for line in lines:
        name, _, rest = line.partition(" ")
        if not (name.startswith("cpu") and name[3:].isdigit() and int(name[3:]) in cpus):
            continue
        try:
            ticks = [int(x) for x in rest.split()[:8]]      # user nice system idle iowait irq softirq steal
        except ValueError:
            return None
        if len(ticks) < 5:
            return None
        busy += sum(ticks) - ticks[3] - ticks[4]
        seen += 1
    return busy / CLOCK_TICKS if seen else None


def cgroup_quota(root: str = "/sys/fs/cgroup", own: str = "/proc/self/cgroup") -> tuple[float, object] | None:
    """(cores, usage reader) when this process's cgroup has a CPU quota (v2 cpu.max, v1 cfs_quota_us), the
    reader giving the cgroup's busy core-seconds; None without a quota."""
    try:
        entries = [line.split(":", 2) for line in Path(own).read_text(encoding="ascii").splitlines()]
    except (OSError, UnicodeDecodeError):
        return None
    paths = {kind: rel.strip().lstrip("/") for _, kind, rel in (e for e in entries if len(e) == 3)}
    v2 = Path(root, paths.get("", ""))
    v1 = next((Path(root, k, rel) for k, rel in paths.items() if "cpu" in k.split(",")), None)
    v1acct = next((Path(root, k, rel) for k, rel in paths.items() if "cpuacct" in k.split(",")), None)
    try:
        if "" in paths and (v2 / "cpu.max").exists():
            quota, period = (v2 / "cpu.max").read_text().split()[:2]
            if quota == "max":
                return None

            def usage_v2():
                for line in (v2 / "cpu.stat").read_text().splitlines():
                    if line.startswith("usage_usec "):
                        return int(line.split()[1]) / 1e6
                return None
            return int(quota) / int(period), _safe(usage_v2)
        if v1 is not None and (v1 / "cpu.cfs_quota_us").exists() and v1acct is not None:
            quota = int((v1 / "cpu.cfs_quota_us").read_text())
            if quota <= 0:
                return None
            period = int((v1 / "cpu.cfs_period_us").read_text())
            return quota / period, _safe(lambda: int((v1acct / "cpuacct.usage").read_text()) / 1e9)
    except (OSError, ValueError, ZeroDivisionError):
        return None
    return None


def _safe(read):
    def reader():
        try:
            return read()
        except (OSError, ValueError, IndexError):
            return None
    return reader


def available_gib(path: str = "/proc/meminfo") -> float | None:
    try:
        for line in Path(path).read_text(encoding="ascii").splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) / (1 << 20)
    except (OSError, ValueError, IndexError, UnicodeDecodeError):
        return None
    return None


def machine() -> tuple[float, object]:
    """(cores, busy core-seconds reader) for this process: a cgroup quota's, else its affinity's CPUs."""
    quota = cgroup_quota()
    cpus = affinity()
    if quota is not None and quota[0] < len(cpus):
        return quota
    return float(len(cpus)), lambda: busy_seconds(cpus)


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
    """Says when the next run may start. `fixed` None: by room, up to `cap`; else exactly `fixed` at once.
    `read` gives the busy core-seconds so far of the `n_cores` the suite may use (None: unreadable)."""
    fixed: int | None
    n_cores: float | None = None
    read: object = None
    clock: object = time.monotonic
    memory_gib: float | None = None
    samples: deque = field(default_factory=deque)
    last_start: float | None = None
    starts: list = field(default_factory=list)
    measured: bool = True

    def __post_init__(self):
        if self.n_cores is None or self.read is None:
            self.n_cores, self.read = machine()
            self.memory_gib = available_gib()
        if self.fixed is None and self.read() is None:
            # No count to decide by: a fixed number, said so in the report.
            self.fixed, self.measured = math.ceil(self.n_cores) + 1, False

    @property
    def cap(self) -> int:
        if self.fixed is not None:
            return self.fixed
        cap = max(1, round(2 * self.n_cores))
        return max(1, min(cap, int(self.memory_gib))) if self.memory_gib is not None else cap

    def sample(self) -> None:
        got = self.read()
        if got is None:
            self.samples.clear()        # a failed read: nothing old is trusted
            return
        now = self.clock()
        self.samples.append((now, got))
        while len(self.samples) > 2 and now - self.samples[1][0] >= WINDOW_S:
            self.samples.popleft()

    def idle_cores(self) -> float | None:
        """Idle cores over the last window (at least WINDOW_S, ending at the last sample, which is recent), or
        None before a window's worth of samples."""
        if len(self.samples) < 2:
            return None
        (t0, busy0), (t1, busy1) = self.samples[0], self.samples[-1]
        if t1 - t0 < WINDOW_S or self.clock() - t1 > 2 * WINDOW_S or busy1 < busy0:
            return None
        return round(max(0.0, self.n_cores - (busy1 - busy0) / (t1 - t0)), 2)

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
                            "idle_cores": self.idle_cores() if self.measured else None})

    def describe(self) -> dict:
        auto = self.fixed is None or not self.measured
        return {"mode": "auto" if auto else "fixed", "measured": self.measured, "cores": round(self.n_cores, 2),
                "cap": self.cap, "room_cores": ROOM_CORES if self.fixed is None else None,
                "max_running": max((s["running"] + 1 for s in self.starts), default=0), "starts": self.starts}


def summary_line(scheduling: dict | None, parallel) -> str:
    """One sentence for suite.md and suite.html: how many ran at once and why."""
    if not isinstance(scheduling, dict):
        return f"{parallel} experiments at a time"
    cores, cap, most = scheduling.get("cores"), scheduling.get("cap"), scheduling.get("max_running")
    if scheduling.get("mode") == "auto" and scheduling.get("measured") is False:
        return (f"{cap} experiments at a time: auto could not measure how busy the {cores} cores were "
                f"(no readable /proc/stat or cgroup count), so it ran cores + 1")
    if scheduling.get("mode") == "auto":
        return (f"experiments started while at least {scheduling.get('room_cores')} of the {cores} cores were "
                f"idle (at most {cap}, and one whenever none ran): up to {most} ran at once")
    return f"{cap} experiments at a time (--parallel {cap})"
