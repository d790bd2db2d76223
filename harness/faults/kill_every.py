"""kill-every: the supervisor SIGKILLs one running worker on a steady beat, every SECONDS.

Random kills land where a worker happens to be busy; a beat keeps hitting a
consumer for the whole run, restarts included, which is how a flapping
deployment (an OOM loop, a crash-looping pod) treats it. Each beat takes the
next running worker slot in turn. Like random kills, the worker cannot say
what it had in flight: what the kills could change becomes a bound, and a
claim under test (`--expect`) stays exact.
"""

import math
import signal
import time

from ..core.errors import HarnessError
from ..runtime import crashlog
from ..core.options import Option
from .base import Fault, number

BEAT = "beat"       # the point recorded for a kill on the beat

KILL_EVERY = Option("kill_every", float, "Also SIGKILL one running worker every SECONDS, in turn (alone unless "
                    "--kill-mode random or --kills asks for random kills too).", low=0.1, high=3600,
                    must="between 0.1 and 3,600 seconds", metavar="SECONDS",
                    applies_to="kills on a beat (without --fault, or with --fault kill-every)")


class KillEvery(Fault):
    name = "kill-every"
    options = {"seconds": "seconds between two SIGKILLs (one running worker each, in turn)"}
    run_options = (KILL_EVERY,)

    def __init__(self, seconds: float):
        self.seconds = seconds
        self.next_at: float | None = None
        self.turn = 0

    @classmethod
    def from_options(cls, spec: str, opts: dict, params) -> "KillEvery":
        if "seconds" in opts:
            return cls(number(spec, "seconds", opts.pop("seconds"), float, KILL_EVERY.low, KILL_EVERY.high))
        if params.kill_every is None:
            raise HarnessError(f"--fault {spec}: give the beat, e.g. kill-every:seconds=2 (or --kill-every 2)")
        return cls(params.kill_every)

    def tick(self, sup) -> None:
        now = time.time()
        if self.next_at is None:
            self.next_at = now + self.seconds
            return
        if now < self.next_at:
            return
        self.next_at += self.seconds * max(1, math.floor((now - self.next_at) / self.seconds) + 1)
        running = [s for s in sup.slots if not s.finished and s.proc is not None and s.proc.poll() is None]
        if not running:
            return
        s = running[self.turn % len(running)]
        self.turn += 1
        s.proc.send_signal(signal.SIGKILL)
        crashlog.append(sup.crash_log, {"point": BEAT, "message_id": None, "partition": None, "offset": None,
                                        "worker": s.name, "attempt": s.attempt, "pid": s.proc.pid,
                                        "time": time.time(), "by": "supervisor"})

    def story(self, events) -> dict:
        return {"every_seconds": self.seconds}

    def entries(self, crashes, events) -> list[dict]:
        return [{"fault": self.name, "time": c.get("time"), "target": f"{c.get('worker')} attempt {c.get('attempt')}"}
                for c in crashes if c.get("by") == "supervisor" and c.get("point") == BEAT]
