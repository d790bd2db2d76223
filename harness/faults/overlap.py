"""overlap: two deliveries of one payment in flight at once, the zombie's shape for a consumer.

A consumer that stalls after checking a payment's key (a GC pause, a frozen
VM) looks dead; its partitions go to another member, which handles the payment
from the last committed offset. When the stalled one wakes up it finishes what
it started: the write it decided on before anyone had written the key. Two
deliveries of one payment overlapped, and a check-then-insert lets both write,
unless a unique key stops the second.

This fault plays that story on a seeded set of payments (`count`, none of the
crash plan's), on the experiment's declared point between its key check and
its write (`Experiment.overlap_point`): the worker freezes itself there on the
payment's first delivery; the fault then starts the slot's replacement (same
partitions, from the committed offsets), waits until the replacement says its
own write of that payment is done (at `Experiment.overlap_applied`), and
resumes the frozen worker, which finishes its write and leaves at its next gap
without committing. Each step is a line of the overlap log, written by the
process that took it (runtime/overlaps.py); the predictor reads the finished
episodes.
"""

from __future__ import annotations

import signal
import time

from ..runtime import crashlog, overlaps
from ..runtime.crashplan import CrashPlan, seeded_overlaps
from .base import Fault, number

DEFAULT_COUNT = 10
# A resumed worker has one write to finish: this long without its `left`, and it is killed (outcome unknown).
LEAVE_TIMEOUT_S = 30.0
# A worker that wrote `frozen` stops itself at once; this long without it being stopped, the episode is missed.
FREEZE_TIMEOUT_S = 10.0
STORY_EPISODES = 50              # the report's story lists this many episodes; `faults` lists them all


def _stopped(pid: int) -> bool:
    """Is the process stopped (SIGSTOP), by its /proc state?"""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rsplit(b")", 1)[1].split()[0] in (b"T", b"t")
    except (OSError, IndexError):
        return False


class Overlap(Fault):
    name = "overlap"
    options = {"count": f"payments whose first delivery freezes its worker right after its key check while a "
                        f"replacement handles them (default {DEFAULT_COUNT})"}
    setup_order = 1              # after the crash plan: its payments are left to it

    def __init__(self, count: int = DEFAULT_COUNT):
        self.count = count
        self.planned = 0
        self.log = None
        # (payment id, worker, attempt) -> its state, processes and times: two members of a rebalancing
        # group may both freeze on one payment, and each is an episode of its own.
        self.episodes: dict[tuple, dict] = {}
        self._pos = 0                           # bytes of the overlap log already taken in

    @classmethod
    def from_options(cls, spec: str, opts: dict, params) -> "Overlap":
        return cls(number(spec, "count", opts.pop("count"), int, 1, 100_000) if "count" in opts else DEFAULT_COUNT)

    def unmet(self, exp) -> str | None:
        return None if exp.overlap_point and exp.overlap_applied and exp.loop else \
            "a Python worker with a point between its key check and its write (overlap_point)"

    def setup(self, run) -> None:
        plan = CrashPlan.load(run.crash_plan)
        ids = seeded_overlaps(run.sent_ids, self.count, run.params.seed, plan.crash_ids)
        CrashPlan.amend(run.crash_plan, overlap_at=run.exp.overlap_point, overlap_applied=run.exp.overlap_applied,
                        overlaps=ids)
        self.planned, self.log = len(ids), overlaps.path_beside(run.crash_log)

    def busy(self) -> bool:
        return any(e["state"] not in ("done", "missed") for e in self.episodes.values())

    def tick(self, sup) -> None:
        if self.log is None:
            return
        self._take_new(sup)
        now = time.time()
        for e in list(self.episodes.values()):      # _advance may take in new lines, new episodes among them
            self._advance(e, sup, now)

    def finish(self, sup) -> None:
        """The run stops: the lines written since the last tick (a `left` just before its writer exited)."""
        if self.log is not None:
            self._take_new(sup)

    def _take_new(self, sup) -> None:
        """The overlap log's new complete lines, read from where the last read ended."""
        data, self._pos = crashlog.tail(self.log, self._pos)
        for r in overlaps.parse(data):
            self._take(r, sup)

    def _take(self, r: dict, sup) -> None:
        i, kind, who = r["message_id"], r["kind"], (r.get("worker"), r.get("attempt"))
        if kind == "frozen" and (i, *who) not in self.episodes:
            slot = next((s for s in sup.slots if (s.name, s.attempt) == who and s.proc is not None), None)
            self.episodes[(i, *who)] = {"id": i, "state": "frozen" if slot else "missed", "slot": slot,
                                        "proc": slot.proc if slot else None, "worker": who[0], "attempt": who[1],
                                        "times": {"frozen": r["time"]}}
        elif kind == "applied":                   # a replacement's own write: every episode of that payment
            for e in self.episodes.values():
                if e["id"] == i and "applied" not in e["times"]:
                    e["times"]["applied"], e["applied_by"] = r["time"], r.get("attempt")
        elif kind == "left" and (i, *who) in self.episodes:
            self.episodes[(i, *who)]["times"].setdefault("left", r["time"])

    def _advance(self, e: dict, sup, now: float) -> None:
        proc, t = e["proc"], e["times"]
        if e["state"] == "frozen":
            if proc.poll() is not None:
                e["state"] = "missed"             # it died before anyone could take over
            elif _stopped(proc.pid):
                sup.adopt(proc)                   # the supervisor still kills it on the way out
                sup.start(e["slot"])              # the same slot: its partitions, from the committed offsets
                t["replacement_started"] = now
                e["state"] = "replaced"
            elif now > t["frozen"] + FREEZE_TIMEOUT_S:
                # It said it froze and never stopped: not an overlap. Killed, so its slot restarts (an
                # unplanned death in the report), rather than left running beside a replacement.
                proc.kill()
                e["state"] = "missed"
        elif e["state"] == "replaced" and "applied" in t:
            proc.send_signal(signal.SIGCONT)
            t["resumed"] = now
            e["state"] = "resumed"
        elif e["state"] == "resumed":
            rc = proc.poll()
            if rc is not None:
                self._take_new(sup)               # its `left`, written just before it exited
                e["exit_code"], e["state"] = rc, "done"
            elif now > t["resumed"] + LEAVE_TIMEOUT_S:
                proc.kill()
                e["exit_code"], e["state"] = "killed: did not leave after resuming", "done"

    def story(self, events) -> dict:
        eps = sorted(self.episodes.values(), key=lambda e: e["times"]["frozen"])
        frozen = sorted(e["times"]["resumed"] - e["times"]["frozen"] for e in eps if "resumed" in e["times"])
        shown = []
        for e in eps[:STORY_EPISODES]:
            base = e["times"]["frozen"]
            shown.append({"message_id": e["id"], "target": f"{e['worker']} attempt {e['attempt']}",
                          "state": e["state"], "left": "left" in e["times"], "exit_code": e.get("exit_code"),
                          "replacement_attempt": e.get("applied_by"),
                          "times_since_frozen": {k: round(v - base, 3) for k, v in e["times"].items()}})
        return {"planned": self.planned, "happened": len(eps),
                "replaced": sum(1 for e in eps if "replacement_started" in e["times"]),
                "resumed": sum(1 for e in eps if "resumed" in e["times"]),
                "finished": sum(1 for e in eps if "left" in e["times"]),
                # resumed, then killed before it said its late write was done: whether it wrote is unknown
                "unknown_outcome": sum(1 for e in eps if "resumed" in e["times"] and "left" not in e["times"]),
                "frozen_median_seconds": round(frozen[len(frozen) // 2], 3) if frozen else None,
                "episodes": shown}

    def entries(self, crashes, events) -> list[dict]:
        out = []
        for e in self.episodes.values():
            t = e["times"]
            out.append({"fault": self.name, "time": t["frozen"], "target": f"{e['worker']} attempt {e['attempt']}",
                        "message_id": e["id"], "state": e["state"],
                        "frozen_seconds": round(t["resumed"] - t["frozen"], 3) if "resumed" in t else None,
                        "replaced_by": f"attempt {e['applied_by']}" if e.get("applied_by") else None,
                        # done (it left), not done (never resumed), or unknown (resumed, killed before it left)
                        "late_write": True if "left" in t else (None if "resumed" in t else False)})
        return out

    def interruptions(self, story: dict | None) -> int:
        # A worker resumed and killed before it left: whether its late write happened is unknown.
        return (story or {}).get("unknown_outcome", 0)

    def sentence(self, story: dict | None) -> str:
        if not story:
            return ""
        if not story["planned"]:
            return " No overlap: every payment was the crash plan's, none left to freeze on."
        if not story["happened"]:
            return " No overlap: no planned payment reached its key check."
        med = story["frozen_median_seconds"]
        text = (f" Overlaps: {story['happened']} worker(s) froze right after a key check, {story['replaced']} were "
                f"replaced, {story['resumed']} resumed once the replacement had written the payment, and "
                f"{story['finished']} finished their own write and left"
                + (f" (frozen {med:.2f} s, median)" if med is not None else ""))
        if story["unknown_outcome"]:
            text += f"; {story['unknown_outcome']} resumed and killed before they left: their write is unknown"
        return text + "."

    def shortfall(self, crashes: list[dict], story: dict | None) -> str:
        happened = (story or {}).get("happened", 0)
        if happened < self.planned:
            return (f" {happened} of {self.planned} planned overlaps happened (a planned payment the run never "
                    f"checked, e.g. one it stopped before, freezes nobody).")
        return ""
