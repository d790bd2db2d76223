"""How many of a suite's runs go at once, and which one gets the cores first.

The suite's wall time is its longest run (eos-streams: a JVM per crash) or
its CPU, whichever is larger. Measured on a quiet 2-core machine with the
default suite (2026-12-03, all 21 as-predicted each time): 3 runs at once at
equal priority took 143 s, eos-streams among them 125 s with its restarts at
1.03 s (median), because every other run took cores from it; admitting a run
only while 0.75 or 0.25 of the cores were idle took 182 and 135 s (the runs
wait a lot: restart delays, transactions; the cores were idle half the time);
4 at once with every run after the first at nice 10 took 123 s, and 6 at once
116 s, near the floor the CPU sets (about 165 CPU-s of runs and 40 of the
broker and PostgreSQL over 2 cores).

So with `--parallel auto` (the default): up to `PER_CORE` runs per core (and
one per GiB of available memory) at once, started `SETTLE_S` apart (a run's
own start-up is a burst), the first, heaviest one (the declarations' launch
weight) at the suite's priority and every later one, with all its processes,
at nice `YIELDING_NICE`, so they take what the long pole leaves. `--parallel
N` keeps exactly N at once at equal priority, as before.

The cores are the ones this process may use: its CPU affinity, or a cgroup
CPU quota (a container's `--cpus`) when that is smaller. Each start records
how many ran, its nice level and how many cores were idle over the last second
(each CPU's own line of /proc/stat, or the cgroup's usage; null when
unreadable), so suite.json says how the suite ran.
"""

from __future__ import annotations

import math
import os
import time
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path

PER_CORE = 3
WINDOW_S = 1.0
SETTLE_S = 3.0
YIELDING_NICE = 10
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
    """Says when the next run may start and at which nice level. `fixed` None: auto, else exactly `fixed`
    at once. `read` gives the busy core-seconds so far of the `n_cores` the suite may use (None: unreadable)."""
    fixed: int | None
    n_cores: float | None = None
    read: object = None
    clock: object = time.monotonic
    memory_gib: float | None = None
    samples: deque = field(default_factory=deque)
    last_start: float | None = None
    starts: list = field(default_factory=list)

    def __post_init__(self):
        if self.n_cores is None or self.read is None:
            self.n_cores, self.read = machine()
            self.memory_gib = available_gib()

    @property
    def cap(self) -> int:
        if self.fixed is not None:
            return self.fixed
        cap = max(1, round(PER_CORE * self.n_cores))
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
        return self.last_start is None or self.clock() - self.last_start >= SETTLE_S

    def nice(self) -> int:
        """The next run's nice level: auto, 0 for the first (the long pole) and YIELDING_NICE after it."""
        return YIELDING_NICE if self.fixed is None and self.starts else 0

    def started(self, name: str, running: int, since: float, nice: int = 0) -> None:
        """Records a start: `running` is how many ran before it, `since` the seconds since the suite began."""
        self.last_start = self.clock()
        self.starts.append({"experiment": name, "at_seconds": round(since, 1), "running": running,
                            "nice": nice, "idle_cores": self.idle_cores()})

    def describe(self) -> dict:
        return {"mode": "auto" if self.fixed is None else "fixed", "cores": round(self.n_cores, 2), "cap": self.cap,
                "yielding_nice": YIELDING_NICE if self.fixed is None else None,
                "max_running": max((s["running"] + 1 for s in self.starts), default=0), "starts": self.starts}


def summary_line(scheduling: dict | None, parallel) -> str:
    """One sentence for suite.md and suite.html: how many ran at once and why."""
    if not isinstance(scheduling, dict):
        return f"{parallel} experiments at a time"
    cores, cap, most = scheduling.get("cores"), scheduling.get("cap"), scheduling.get("max_running")
    if scheduling.get("mode") == "auto":
        return (f"up to {cap} experiments at a time ({PER_CORE} per core of {cores}), started {SETTLE_S:.0f} s "
                f"apart, the first at the suite's priority and the others at nice {scheduling.get('yielding_nice')}: "
                f"up to {most} ran at once")
    return f"{cap} experiments at a time (--parallel {cap})"
