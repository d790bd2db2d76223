"""planned-crash: the worker kills itself (SIGKILL) at a named kill point on a seeded set of payments.

The crash plan (which payments, and at which point each) is written before the
workers start; a worker about to die at its point appends what its death
does to the crash log, fsynced, then SIGKILLs itself. That log is what makes
the prediction exact per crash.
"""

from ..core.options import Option
from .base import Fault, number
from ..runtime.crashplan import CrashPlan

KILL_POINT = Option("kill_point", str, "Where planned crashes strike: one of the experiment's kill points (`harness "
                    "experiments`), or `any` for a seeded point per crash. Default: the experiment's own.",
                    applies_to="planned crashes")


class PlannedCrash(Fault):
    name = "planned-crash"
    options = {"rate": "share of payments whose first delivery kills the worker (0..1)",
               "point": "a kill point of the experiment, or `any` (a seeded point per crash)"}
    run_options = (KILL_POINT,)

    def __init__(self, rate: float = 0.1, point: str | None = None):
        self.rate, self.point = rate, point
        self.points: list[str] = []
        self.planned = 0            # how many payments the crash plan names (set up before the workers start)
        self.errors = False         # the experiment turns them into seeded errors, not deaths (share-release)

    @classmethod
    def from_options(cls, spec: str, opts: dict, params) -> "PlannedCrash":
        rate = number(spec, "rate", opts.pop("rate"), float, 0.0, 1.0) if "rate" in opts else params.crash_rate
        return cls(rate, opts.pop("point", None) or params.kill_point)

    def unmet(self, exp) -> str | None:
        return None if exp.kill_points else "kill points"

    def setup(self, run) -> None:
        from ..experiments import kill_points_for
        self.points = kill_points_for(run.exp, self.point)
        plan = CrashPlan.make(run.sent_ids, self.rate, run.params.seed, self.points)
        CrashPlan.amend(run.crash_plan, crash_rate=plan.crash_rate, crash_ids=plan.crash_ids, points=plan.points)
        self.planned = len(plan.crash_ids)
        self.errors = bool(getattr(run.exp, "plan_errors", False))

    def entries(self, crashes, events) -> list[dict]:
        return [{"fault": self.name, "time": c.get("time"), "target": f"{c.get('worker')} attempt {c.get('attempt')}",
                 "point": c.get("point"), "message_id": c.get("message_id")}
                for c in crashes if c.get("by") != "supervisor"]

    def describe(self) -> dict:
        return {"fault": self.name, "rate": self.rate, "point": self.point, "points": self.points}

    def story(self, events) -> dict:
        return {"planned": self.planned, **({"errors": True} if self.errors else {})}

    def shortfall(self, crashes: list[dict], story: dict | None) -> str:
        struck = sum(1 for c in crashes if c.get("by") != "supervisor")
        planned = (story or {}).get("planned", 0)
        if (story or {}).get("errors"):     # its payments met an error, not a death: no crash to miss
            return ""
        if struck < planned:
            return (f" {struck:,} of {planned:,} planned crashes struck (a planned payment whose kill point the "
                    f"worker never reached, e.g. after the last commit, does not crash).")
        return ""
