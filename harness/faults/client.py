"""abort and client-pause: faults a transactional client inflicts on its own transactions.

- `abort`: the workers abort a seeded share of their transactions instead of
  committing them, then rewind to their committed offsets and do the work
  again, as Kafka's `TransactionalMessageCopier --enable-random-aborts` does.
  read_committed must never show a record of an aborted transaction; each
  abort leaves its records in the log as aborted copies, exactly predicted.
- `client-pause`: a worker freezes (SIGSTOP) at a chosen step of a transaction
  holding a planned payment, for a seeded time, then is resumed (SIGCONT) and
  goes on as it would. A pause longer than `--transaction-timeout-ms` lets the
  coordinator abort the transaction under the sleeping client (within the
  timeout and the brokers' cleanup interval: 1 s on our stacks, Kafka's
  default 10 s), the setting in which a paused client's writes landed in the
  wrong transaction (KAFKA-17754). The worker flushes before it freezes, so no
  write of its is in flight while it sleeps; what it writes after waking, and
  whether any of it leaked, the anomaly classes say (aborted-read,
  torn-transaction). Such a pause can abort what a crash record or an abort
  event lists as in the log, so the numbers it can touch become bounds.

The worker carries out both (runtime/client_faults.py reads their plans from
the run's plan file); the supervisor's side is here: the plan, the SIGCONT,
and what the report says.
"""

from __future__ import annotations

import signal
import time

from ..experiments.common_options import TRANSACTION_TIMEOUT_MS
from ..core.procs import stopped
from ..runtime.client_faults import BEFORE_COMMIT, PAUSE_STEPS, PLANNED_ABORT
from ..runtime.crashplan import CrashPlan, seeded_pauses
from .base import Fault, number
from .zombie import ZombiePause

DEFAULT_ABORT_RATE = 0.2
MAX_ABORT_RATE = 0.9            # beyond this a transaction would be redone almost forever
DEFAULT_PAUSE_S = 2.0
DEFAULT_PAUSES = 3


def _takes(fault: str, exp) -> str | None:
    return None if fault in exp.client_faults else \
        f"a worker loop that carries out the {fault} fault (the eos family's Python workers: eos, eos-boundary, " \
        f"eos-dedupe, zombie without --client java)"


class Abort(Fault):
    name = "abort"
    moves_partitions = True     # each abort rewinds the worker to its committed offsets
    options = {"rate": f"share of transactions aborted instead of committed (0..{MAX_ABORT_RATE:g}, default "
                       f"{DEFAULT_ABORT_RATE:g})"}

    def __init__(self, rate: float = DEFAULT_ABORT_RATE):
        self.rate = rate

    @classmethod
    def from_options(cls, spec: str, opts: dict, params) -> "Abort":
        rate = number(spec, "rate", opts.pop("rate"), float, 0.0, MAX_ABORT_RATE) if "rate" in opts \
            else DEFAULT_ABORT_RATE
        return cls(rate)

    def unmet(self, exp) -> str | None:
        return _takes(self.name, exp)

    def setup(self, run) -> None:
        CrashPlan.amend(run.crash_plan, abort_rate=self.rate)

    @staticmethod
    def _aborts(events: list[dict]) -> list[dict]:
        return [e for e in events if e.get("event") == "txn_aborted" and e.get("reason") == PLANNED_ABORT]

    def entries(self, crashes, events) -> list[dict]:
        """One entry per worker attempt that aborted on purpose (not one per abort: a run aborts hundreds),
        at its first abort, with how many it aborted and the records in them."""
        by: dict = {}
        for e in self._aborts(events):
            k = (e.get("worker"), e.get("attempt"))
            if k not in by:
                by[k] = {"fault": self.name, "time": e.get("t"), "target": f"{k[0]} attempt {k[1]}",
                         "aborted_transactions": 0, "records": 0, "exact": True}
            by[k]["aborted_transactions"] += 1
            by[k]["records"] += len(e.get("produced") or [])
            by[k]["exact"] = by[k]["exact"] and e.get("planned") is True
        return list(by.values())

    def story(self, events) -> dict:
        aborts = self._aborts(events)
        return {"rate": self.rate, "aborted_transactions": len(aborts),
                "aborted_records": sum(len(e.get("produced") or []) for e in aborts),
                "not_flushed": sum(1 for e in aborts if e.get("planned") is not True)}

    def sentence(self, story: dict | None) -> str:
        if not story:
            return ""
        s = (f" The workers aborted {story['aborted_transactions']:,} transactions on purpose (rate "
             f"{story['rate']:g}), {story['aborted_records']:,} records in them, each redone after a rewind.")
        if story["not_flushed"]:
            s += (f" {story['not_flushed']} of them could not be flushed first: what they left in the log is "
                  f"a bound.")
        return s

    def shortfall(self, crashes, story: dict | None) -> str:
        if story and self.rate > 0 and not story["aborted_transactions"]:
            return " The abort fault aborted no transaction (the workers committed too few for its rate)."
        return ""


def _own(sup, pid: int):
    """The process of one of the supervisor's slots with this pid (None: not one of ours)."""
    return next((s.proc for s in sup.slots if s.proc is not None and s.proc.pid == pid), None)


class ClientPause(Fault):
    name = "client-pause"
    moves_partitions = True     # a pause past the transaction timeout wakes to an abort, then a rewind
    excludes = {ZombiePause.name: "both freeze a worker with SIGSTOP, and each would wake or miss the other's"}
    options = {"at": "the step where the worker freezes: " + "; ".join(f"{k} ({v})" for k, v in PAUSE_STEPS.items())
                     + f" (default {BEFORE_COMMIT})",
               "seconds": f"mean length of a pause; each is seeded between half and 1.5 times it (default "
                          f"{DEFAULT_PAUSE_S:g}; above --transaction-timeout-ms / 1000 the coordinator aborts the "
                          f"transaction under the sleeping worker)",
               "count": f"how many payments' transactions freeze their worker (default {DEFAULT_PAUSES})"}

    def __init__(self, at: str = BEFORE_COMMIT, seconds: float = DEFAULT_PAUSE_S, count: int = DEFAULT_PAUSES,
                 txn_timeout_s: float = TRANSACTION_TIMEOUT_MS / 1000):
        self.at, self.seconds, self.count = at, seconds, count
        self.txn_timeout_s = txn_timeout_s      # a pause this long lets the coordinator abort under the worker
        self.held: dict = {}          # pid -> the client_paused event of a worker we still have to wake
        self.pauses: list[dict] = []  # every pause seen: the event, and when it was woken
        self._seen = 0                # events of the supervisor's list already looked at

    @classmethod
    def from_options(cls, spec: str, opts: dict, params) -> "ClientPause":
        at = opts.pop("at", BEFORE_COMMIT)
        if at not in PAUSE_STEPS:
            from ..core.errors import HarnessError
            raise HarnessError(f"--fault {spec}: at must be one of {', '.join(PAUSE_STEPS)}, got {at!r}")
        seconds = number(spec, "seconds", opts.pop("seconds"), float, 0.0, 3600) if "seconds" in opts \
            else DEFAULT_PAUSE_S
        count = number(spec, "count", opts.pop("count"), int, 1, 1000) if "count" in opts else DEFAULT_PAUSES
        timeout_ms = getattr(params, "transaction_timeout_ms", None) or TRANSACTION_TIMEOUT_MS
        return cls(at, seconds, count, timeout_ms / 1000)

    def describe(self) -> dict:
        return {"fault": self.name, "at": self.at, "seconds": self.seconds, "count": self.count}

    def unmet(self, exp) -> str | None:
        return _takes(self.name, exp)

    def setup(self, run) -> None:
        CrashPlan.amend(run.crash_plan, pause_at=self.at,
                        pauses=seeded_pauses(run.sent_ids, self.count, self.seconds, run.params.seed))

    def busy(self) -> bool:
        return bool(self.held)

    def tick(self, sup) -> None:
        events = sup.result.events
        for e in events[self._seen:]:
            if e.get("event") == "client_paused" and isinstance(e.get("pid"), int):
                entry = {"event": e, "resumed_at": None}
                self.pauses.append(entry)
                self.held[e["pid"]] = entry
        self._seen = len(events)
        now = time.time()
        for pid, entry in list(self.held.items()):
            proc = _own(sup, pid)
            if proc is None or proc.poll() is not None:
                del self.held[pid]            # it died (a kill, the run's end): nobody to wake
                continue
            e = entry["event"]
            # Wake it only once it really stopped (the event is written just before its SIGSTOP).
            if now >= float(e.get("t", 0)) + float(e.get("seconds", 0)) and stopped(pid):
                proc.send_signal(signal.SIGCONT)
                entry["resumed_at"] = now
                del self.held[pid]

    def finish(self, sup) -> None:
        for pid, entry in list(self.held.items()):
            proc = _own(sup, pid)
            if proc is not None and proc.poll() is None:
                proc.send_signal(signal.SIGCONT)
                entry["resumed_at"] = time.time()
        self.held.clear()

    def story(self, events) -> dict:
        out = []
        for entry in self.pauses:
            e, woke = entry["event"], entry["resumed_at"]
            same = [x for x in events if x.get("worker") == e.get("worker") and x.get("attempt") == e.get("attempt")
                    and x.get("t", 0) > (woke or float("inf"))]
            after = next((x for x in same if x.get("event") in ("txn_aborted", "fenced", "txn_stuck")
                          and x.get("reason") != PLANNED_ABORT), None)
            out.append({"worker": e.get("worker"), "attempt": e.get("attempt"), "step": e.get("step"),
                         "message_id": e.get("message_id"), "paused_at": e.get("t"),
                         "planned_seconds": e.get("seconds"),
                         "paused_seconds": round(woke - e["t"], 3) if woke and e.get("t") else None,
                         "records_held": len(e.get("produced") or []),
                         "next_abort": ({"event": after.get("event"), "t": after.get("t"),
                                         "reason": str(after.get("reason") or "")[:200]} if after else None)})
        return {"at": self.at, "seconds": self.seconds, "planned": self.count, "pauses": out,
                "transaction_timeout_seconds": self.txn_timeout_s}

    def bounds_aborts(self, story: dict | None) -> bool:
        """A pause as long as the transaction timeout may have let the coordinator abort records a crash
        record or an abort event then lists as in the log: those numbers become bounds."""
        return any(p["paused_seconds"] is None or p["paused_seconds"] >= self.txn_timeout_s
                   for p in (story or {}).get("pauses") or [])

    def entries(self, crashes, events) -> list[dict]:
        return [{"fault": self.name, "time": p["paused_at"], "target": f"{p['worker']} attempt {p['attempt']}",
                 "step": p["step"], "message_id": p["message_id"], "paused_seconds": p["paused_seconds"],
                 "records_held": p["records_held"], "next_abort": p["next_abort"]}
                for p in self.story(events)["pauses"]]

    def sentence(self, story: dict | None) -> str:
        if not story:
            return ""
        pauses = story["pauses"]
        if not pauses:
            return f" No worker reached a planned pause ({story['planned']} planned at {story['at']})."
        aborted = sum(1 for p in pauses if p["next_abort"])
        return (f" {len(pauses)} worker(s) froze at {story['at']} for "
                + ", ".join("unknown" if p["paused_seconds"] is None else f"{p['paused_seconds']:g}" for p in pauses)
                + f" s; after waking, {aborted} of those worker attempts saw a transaction aborted or were fenced "
                  f"(the first such event of each is listed with its pause).")

    def shortfall(self, crashes, story: dict | None) -> str:
        if story and len(story["pauses"]) < story["planned"]:
            return (f" {len(story['pauses'])} of {story['planned']} planned pauses happened (a planned payment "
                    f"whose transaction never reached {story['at']}, or that shared its transaction with another "
                    f"planned payment, does not pause a worker).")
        return ""
