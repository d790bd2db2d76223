"""zombie: a transactional worker that comes back from the dead.

A producer that stalls (GC pause, SIGSTOP, a frozen VM) looks dead to its
supervisor, which starts a replacement with the same `transactional.id`. The
replacement's init_transactions() bumps the producer epoch: the broker aborts
the stalled transaction and fences the old producer. When the zombie wakes up
and tries to produce or commit, it must get a fatal fenced error, and the
output must stay exact. This nemesis drives that story on worker slot 0 and
records each step with its time:

paused (SIGSTOP) -> replacement started -> replacement's first record ->
zombie resumed (SIGCONT) -> zombie fenced (its own event) and exited.
"""

import signal
import time

from ..core.options import Option
from .base import Fault, number

# After this long without the zombie exiting once resumed, we stop waiting and kill it.
ZOMBIE_EXIT_TIMEOUT_S = 30
# Let the first worker get into a transaction before freezing it.
PAUSE_AFTER_FIRST_RECORD_S = 0.3
DEFAULT_PAUSE_S = 3.0

ZOMBIE_PAUSE = Option("zombie_pause", float, "zombie: seconds the worker stays frozen before its replacement starts.",
                      shown=f"{DEFAULT_PAUSE_S:g}", low=0.0, high=3600, why_high="as --fault zombie:pause",
                      must="a number of seconds, 0 or more",
                      applies_to="the zombie fault (the zombie experiment, or --fault zombie)")


class ZombiePause(Fault):
    name = "zombie"
    options = {"pause": "seconds the worker stays frozen before its replacement starts"}
    run_options = (ZOMBIE_PAUSE,)

    def __init__(self, pause_s: float = DEFAULT_PAUSE_S):
        self.pause_s = pause_s
        self.state = "wait"
        self.zombie = None
        self.zombie_name = None        # the frozen worker's slot: only its attempt 1 is the zombie
        self.times: dict = {}
        self.exit_code = None

    @classmethod
    def from_options(cls, spec: str, opts: dict, params) -> "ZombiePause":
        pause = number(spec, "pause", opts.pop("pause"), float, ZOMBIE_PAUSE.low, ZOMBIE_PAUSE.high) if "pause" in opts \
            else params.zombie_pause
        return cls(DEFAULT_PAUSE_S if pause is None else pause)

    def describe(self) -> dict:
        return {"fault": self.name, "pause": self.pause_s}

    def unmet(self, exp) -> str | None:
        return None if exp.stores.output and exp.loop else "a worker of ours that writes its output in Kafka transactions"

    def busy(self) -> bool:
        return self.state in ("paused", "replaced", "resumed")

    def tick(self, sup) -> None:
        slot = sup.slots[0]
        now = time.time()
        if self.state == "wait" and slot.finished:
            self.state = "missed"          # the worker finished before it could be frozen
            return
        if self.state == "wait" and slot.first_message_at and now > slot.first_message_at + PAUSE_AFTER_FIRST_RECORD_S:
            if slot.proc.poll() is not None:
                return
            self.zombie = slot.proc
            self.zombie_name = slot.name
            self.zombie.send_signal(signal.SIGSTOP)
            self.times["paused"] = now
            self.state = "paused"
        elif self.state == "paused" and now > self.times["paused"] + self.pause_s:
            sup.adopt(self.zombie)            # the supervisor still kills it on the way out
            sup.start(slot)                   # same slot, same transactional.id
            self.times["replacement_started"] = now
            self.state = "replaced"
        elif self.state == "replaced" and slot.first_message_at:
            self.zombie.send_signal(signal.SIGCONT)
            self.times["replacement_first_record"] = slot.first_message_at
            self.times["resumed"] = now
            self.state = "resumed"
        elif self.state == "resumed":
            rc = self.zombie.poll()
            if rc is not None:
                self.exit_code = rc
                self.times["zombie_exited"] = now
                self.state = "done"
            elif now > self.times["resumed"] + ZOMBIE_EXIT_TIMEOUT_S:
                self.zombie.kill()
                self.exit_code = "killed: did not exit after resuming"
                self.state = "done"

    def story(self, events: list[dict]) -> dict:
        fenced = [e for e in events if e.get("event") == "fenced" and e.get("attempt") == 1
                  and e.get("worker") == self.zombie_name]
        base = self.times.get("paused")
        rel = {k: round(v - base, 3) for k, v in self.times.items()} if base else {}
        if fenced and base:
            rel["zombie_fenced"] = round(fenced[0]["t"] - base, 3)
        return {"state": self.state, "pause_seconds": self.pause_s, "zombie_exit_code": self.exit_code,
                "fenced": bool(fenced), "fenced_error": fenced[0].get("reason") if fenced else None,
                "times_since_pause": rel}

    def entries(self, crashes, events) -> list[dict]:
        if "paused" not in self.times:
            return []
        return [{"fault": self.name, "time": self.times["paused"], "target": "w0 attempt 1",
                 "pause_seconds": self.pause_s, "state": self.state}]

    def interruptions(self, story: dict | None) -> int:
        # Frozen mid-transaction or between two: its open transaction, if any, is aborted by the fencing.
        return 1 if story and "paused" in story.get("times_since_pause", {}) else 0

    def observed(self, story: dict | None) -> dict:
        return {"fault.zombie.fenced": int(bool(story and story["fenced"]))}

    def sentence(self, story: dict | None) -> str:
        if not story:
            return ""
        t = story["times_since_pause"]
        if story["state"] == "missed":
            return " The worker finished before it could be frozen: no zombie."
        if story["state"] in ("wait", "paused", "replaced"):
            return (f" The zombie story did not finish (it got as far as: {story['state']}); nothing is claimed "
                    f"about fencing.")
        return (f" The zombie was frozen for {story['pause_seconds']:g} s, replaced, resumed"
                + (f" and fenced {t['zombie_fenced'] - t.get('resumed', 0):.2f} s after waking"
                   if story["fenced"] and "zombie_fenced" in t else ", and NOT fenced") + ".")
