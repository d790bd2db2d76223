"""random-kill: the supervisor SIGKILLs busy workers at seeded instants the worker did not choose.

Each worker attempt, once it has processed its first record, is killed after a
seeded delay (0.05-0.6 s of busy time), until `kills` kills are spent; a worker
its launcher sees with nothing left to do (a foreign consumer whose partitions
are committed to their end) is spared: that kill could damage nothing. The
worker cannot say what it had in flight, so the predictions that a crash can
change become upper bounds; the audit stays exact.

With `aim=gap` (a consumer under test, `custom`, watched from outside) a kill
that is due waits until its worker is in the window between an effect and its
offset commit, as the group's timeline shows it: the ledger grew on a partition
it owns since that partition's committed offset last moved. Random instants
rarely land there when a consumer commits every few seconds, and that window is
where an effect-then-commit consumer applies twice.
"""

import signal
import time

from ..core.errors import HarnessError
from ..runtime import crashlog
from .base import Fault, number
from ..core.options import Option
from ..runtime.crashplan import random_kill_delays

RANDOM = "random"   # the point recorded for a supervisor's kill
DEFAULT_KILLS = 10
AIMS = ("busy", "gap")

KILLS = Option("kills", int, "Number of SIGKILLs with --kill-mode random.", shown=str(DEFAULT_KILLS), low=0,
               high=100_000, why_high="as --fault random-kill:kills",
               applies_to="random kills (--kill-mode random, or --fault random-kill)")


class RandomKill(Fault):
    name = "random-kill"
    options = {"kills": "how many SIGKILLs in the run",
               "aim": "busy (default: a seeded instant of busy time) or gap (custom only: then wait until an effect "
                      "is past its partition's last commit)"}
    run_options = (KILLS,)

    def __init__(self, kills: int = DEFAULT_KILLS, seed: int = 25, aim: str = "busy"):
        self.kills, self.seed, self.aim = kills, seed, aim
        self.delays: list[float] = []
        self.kill_at: dict = {}        # (slot index, attempt) -> time

    @classmethod
    def from_options(cls, spec: str, opts: dict, params) -> "RandomKill":
        kills = number(spec, "kills", opts.pop("kills"), int, KILLS.low, KILLS.high) if "kills" in opts \
            else params.kills
        aim = opts.pop("aim", "busy")
        if aim not in AIMS:
            raise HarnessError(f"--fault {spec}: aim must be one of {', '.join(AIMS)}, not {aim!r}")
        return cls(DEFAULT_KILLS if kills is None else kills, params.seed, aim)

    def unmet(self, exp) -> str | None:
        if self.aim == "gap" and not getattr(exp.launcher, "sees_gaps", False):
            return "a launcher that sees each worker's effect-to-commit gap for aim=gap (a custom run's)"
        return None

    def setup(self, run) -> None:
        self.delays = random_kill_delays(self.seed, self.kills)

    def tick(self, sup) -> None:
        now = time.time()
        for s in sup.slots:
            if s.finished or s.proc is None or s.first_message_at is None:
                continue
            key = (s.index, s.attempt)
            if key not in self.kill_at:
                self.kill_at[key] = s.first_message_at + self.delays.pop(0) if self.delays else None
            at = self.kill_at[key]
            aimed = self.aim != "gap" or getattr(s, "in_gap", False)
            if at is not None and now >= at and s.proc.poll() is None and s.has_work and aimed:
                self.kill_at[key] = None
                s.proc.send_signal(signal.SIGKILL)
                crashlog.append(sup.crash_log, {"point": RANDOM, "message_id": None, "partition": None,
                                                "offset": None, "worker": s.name, "attempt": s.attempt,
                                                "pid": s.proc.pid, "time": time.time(), "by": "supervisor"})

    def story(self, events) -> dict:
        return {"requested": self.kills, **({"aim": self.aim} if self.aim != "busy" else {})}

    def shortfall(self, crashes: list[dict], story: dict | None) -> str:
        struck = sum(1 for c in crashes if c.get("by") == "supervisor" and c.get("point") == RANDOM)
        if struck < self.kills:
            why = self.missed_because()
            return (f" Only {struck:,} of {self.kills:,} random kills struck: {why}"
                    + (" (more payments give the kills time to land)." if why == "the workers finished first" else "."))
        return ""

    def entries(self, crashes, events) -> list[dict]:
        return [{"fault": self.name, "time": c.get("time"), "target": f"{c.get('worker')} attempt {c.get('attempt')}"}
                for c in crashes if c.get("by") == "supervisor" and c.get("point") == RANDOM]
