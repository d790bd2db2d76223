"""How many of a suite's runs go at once: one more than the cores.

The suite's wall time is its longest run (eos-streams: a JVM per crash) or
its CPU, whichever is larger, and on a small machine they are close. Measured
with the default suite on a 2-core machine on 2026-12-03 (all 21 runs
as-predicted every time). The machine's speed drifted that afternoon (the same
runs took about 20 % more CPU later), so only runs side by side compare:

    earlier:  3 at once, equal priority                               143 s
              admit a run only while 0.75 idle cores                   182 s
              admit a run only while 0.25 idle cores                   135 s
              4 at once, 3 s apart, all but the longest at nice 10     123 s
              6 at once, the same                                      116 s
    later:    3 at once, equal priority                                161, 160 s
              6 at once, all but the longest at nice 10                164, 169 s

Only the last pair was measured side by side, twice each, and there 6 at once
with nice levels was no better (a nice level does not shield the longest run
from the broker and PostgreSQL that every run shares); the earlier batch's
faster schedules were not repeated. So `--parallel auto` (the default) is the
old default, 3 on two cores, made to follow the cores: the cores rounded up,
plus one, at equal priority, the longest first; `--parallel N` runs N.

The cores are the ones this process may use: its CPU affinity, or a cgroup
CPU quota (a container's `--cpus`) when that is smaller. Each start records
how many ran and how many cores were idle over the last second before it
(each CPU's own line of /proc/stat, or the cgroup's usage; null when
unreadable), so suite.json says how busy the machine was as the suite ran.
It also gets the cores' busy core-seconds over the whole suite: from the CPU
lines every process on them counts (the broker's and PostgreSQL's when they
run here), from a cgroup every process in it. That much CPU work takes at
least its core-seconds over the cores, on any schedule that needs no less
(another schedule may need more or less CPU). On 2026-12-03 the default suite
kept 2 cores busy 210.7 core-seconds in 117 s, so that work took at least
105 s there; the runs' own share was 159.1, and the broker's and
PostgreSQL's about 32 and 19 (their processes' /proc/PID/stat before and
after, read by hand).
"""

from __future__ import annotations

import math
import os
import time
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path

WINDOW_S = 1.0
CLOCK_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def affinity() -> set[int]:
    try:
        return set(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return set(range(os.cpu_count() or 1))


def busy_seconds(cpus: set[int], path: str = "/proc/stat") -> float | None:
    """Core-seconds the given CPUs have been busy since boot (not idle, not waiting for I/O, not stolen by a
    hypervisor), from each CPU's own line of /proc/stat; None when the kernel's count cannot be read or names
    none of them."""
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
        busy += sum(ticks[:7]) - ticks[3] - ticks[4]       # not idle, not I/O wait, not stolen by a hypervisor
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


CPU_LINES, CGROUP = "cpu-lines", "cgroup"      # where the busy count comes from


def machine() -> tuple[float, object, str]:
    """(cores, busy core-seconds reader, its source) for this process: a cgroup quota's (the cgroup's usage),
    else its affinity's CPUs (every process on them, from their /proc/stat lines)."""
    quota = cgroup_quota()
    cpus = affinity()
    if quota is not None and quota[0] < len(cpus):
        return quota[0], quota[1], CGROUP
    return float(len(cpus)), lambda: busy_seconds(cpus), CPU_LINES


def parse_parallel(text: str | int) -> int | None:
    """`auto` -> None (the cores rounded up, plus one), else a count of at least 1; anything else raises
    ValueError."""
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
    """Says when the next run may start: `fixed` None (auto) the cores rounded up plus one at once, else
    exactly `fixed`. `read` gives the busy core-seconds so far of the `n_cores` the suite may use (None:
    unreadable)."""
    fixed: int | None
    n_cores: float | None = None
    read: object = None
    clock: object = time.monotonic
    source: str = CPU_LINES
    samples: deque = field(default_factory=deque)
    starts: list = field(default_factory=list)
    first_sample: tuple | None = None   # (time, busy core-seconds) of the first readable sample
    total: dict | None = None           # busy() when the suite ended (finish())
    finished: bool = False

    def __post_init__(self):
        if self.n_cores is None or self.read is None:
            self.n_cores, self.read, self.source = machine()

    @property
    def cap(self) -> int:
        return self.fixed if self.fixed is not None else math.ceil(self.n_cores) + 1

    def sample(self) -> None:
        got = self.read()
        if got is None:
            self.samples.clear()        # a failed read: nothing old is trusted
            return
        now = self.clock()
        if self.first_sample is None:
            self.first_sample = (now, got)
        self.samples.append((now, got))
        while len(self.samples) > 2 and now - self.samples[1][0] >= WINDOW_S:
            self.samples.popleft()

    def idle_cores(self) -> float | None:
        """Idle cores over the last window (at least WINDOW_S, ending at the last sample, which is recent), or
        None before a window's worth of samples. Time a hypervisor stole counts as idle here (busy_seconds
        leaves it out)."""
        if len(self.samples) < 2:
            return None
        (t0, busy0), (t1, busy1) = self.samples[0], self.samples[-1]
        if t1 - t0 < WINDOW_S or self.clock() - t1 > 2 * WINDOW_S or busy1 < busy0:
            return None
        return round(max(0.0, self.n_cores - (busy1 - busy0) / (t1 - t0)), 2)

    def may_start(self, running: int) -> bool:
        return running < self.cap

    def started(self, name: str, running: int, since: float) -> None:
        """Records a start: `running` is how many ran before it, `since` the seconds since the suite began."""
        self.starts.append({"experiment": name, "at_seconds": round(since, 1), "running": running,
                            "idle_cores": self.idle_cores()})

    def busy(self) -> dict | None:
        """How busy the cores were from the first readable sample to now: {core_seconds, over_seconds, source},
        or None when either end is unreadable, the count went backwards, or less than 0.1 s passed. From the CPU lines every process on these
        cores counts (the broker's and PostgreSQL's when they run here, and anyone else's); from a cgroup,
        every process in it."""
        end, now = self.read(), self.clock()
        if self.first_sample is None or end is None or end < self.first_sample[1] \
                or now - self.first_sample[0] < 0.1:
            return None
        return {"core_seconds": round(end - self.first_sample[1], 1),
                "over_seconds": round(now - self.first_sample[0], 1), "source": self.source}

    def finish(self) -> None:
        """The suite has ended: its busy time is taken now, with its wall time."""
        self.total, self.finished = self.busy(), True

    def describe(self) -> dict:
        return {"mode": "auto" if self.fixed is None else "fixed", "cores": round(self.n_cores, 2), "cap": self.cap,
                "max_running": max((s["running"] + 1 for s in self.starts), default=0), "starts": self.starts,
                "busy": self.total if self.finished else self.busy()}


def summary_line(scheduling: dict | None, parallel) -> str:
    """One sentence for suite.md and suite.html: how many ran at once and why."""
    if not isinstance(scheduling, dict):
        return f"{parallel} experiments at a time"
    if scheduling.get("mode") == "auto":
        cores = scheduling.get("cores")
        cores = f"{cores:g}" if isinstance(cores, (int, float)) and not isinstance(cores, bool) else "unknown"
        return (f"{scheduling.get('cap')} experiments at a time (--parallel auto: this process's {cores} "
                f"core(s) rounded up, plus one)")
    return f"{scheduling.get('cap')} experiments at a time (--parallel {scheduling.get('cap')})"
