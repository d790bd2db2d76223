"""The parameters of one run: the run's own options, and the value every later step reads.

`harness run`, the suite and the benches all build a RunParams from the
options given; `resolve` checks it once, before anything is created (a mistake
costs no topic, table or folder), and returns the run's parameters as they will
run: the experiment's own defaults and the values derived from others filled
in, frozen, so the runner, the faults and the report read one value nobody
changes. The options themselves are declared where they belong (harness/core/options.py
says how): the run's own here, an experiment's in its declaration, a fault's on
its class; `declared()` gathers them.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

from ..core.errors import HarnessError
from ..core.options import Option

# A run keeps every payment id in memory and audits each one: a million is the bound (10**12 ran out of memory).
MAX_MESSAGES = 1_000_000

MESSAGES = Option("messages", int, "Payments to produce.", default=1000, low=1, high=MAX_MESSAGES,
                  why_high="a run keeps every payment id in memory")
AMOUNT = Option("amount", int, "Amount of each payment.", default=100, low=1, high=10 ** 12,
                why_high="the ledger's bigint must hold the total")
CRASH_RATE = Option("crash_rate", float, "Share of payments whose first delivery kills the worker (0..1).",
                    default=0.1, low=0.0, high=1.0)
SEED = Option("seed", int, "Seed of the crash plan: the same seed crashes on the same payments in every experiment.",
              default=25)
COMMIT_EVERY = Option("commit_every", int, "Commit offsets every N records.", default=1, low=1)
PARTITIONS = Option("partitions", int, "Partitions of the input topic.", default=1, low=1, high=1_000,
                    why_high="a local broker on two cores")
WORKERS = Option("workers", int, "Worker processes (each owns a fixed set of partitions).", default=1, low=1,
                 high=64, why_high="each worker is a process with a warm spare")
KILL_MODE = Option("kill_mode", str, "points: workers kill themselves at the named kill point; random: the "
                   "supervisor SIGKILLs them at seeded times.", default="points", choices=("points", "random"))
RESTART_DELAY = Option("restart_delay", float, "A dead worker's successor starts this long after the death (a slow "
                       "restart, a slow redelivery).", shown="at once", low=0.0, high=600,
                       must="a number of seconds between 0 and 600", metavar="SECONDS")
PAYLOAD_BYTES = Option("payload_bytes", int, "Pad each payment's JSON value to about this many bytes.", default=0,
                       low=0, high=100_000, why_high="a broker's default message size is 1 MB")
NO_HISTORY = Option("no_history", bool, "Keep no worker history (each poll, offset commit, send and transaction "
                    "boundary, for the anomaly classes), which are then not checked: to measure what the history "
                    "costs (harness bench throughput).", default=False)
TIME_LIMIT = Option("time_limit", float, "Seconds before a stuck run is stopped and reported as incomplete.",
                    default=600.0, low=0.0, open_low=True, must="a positive number of seconds")

# The run's own options, taken by every experiment (unless its declaration `refuses` one).
RUN_OPTIONS = (MESSAGES, AMOUNT, CRASH_RATE, SEED, COMMIT_EVERY, PARTITIONS, WORKERS, KILL_MODE, RESTART_DELAY,
               PAYLOAD_BYTES, NO_HISTORY, TIME_LIMIT)


@dataclass(frozen=True)
class Declared:
    option: Option
    experiments: tuple = ()      # the experiments that declare it (empty: the run's own, or a fault's)
    faults: tuple = ()           # the fault classes that declare it


@functools.cache
def declared() -> Mapping[str, Declared]:
    """Every run option, by name: the run's own, then the faults', then the experiments' (registry order).
    One name, one declaration: two different declarations of a name are a bug (RuntimeError)."""
    from .. import experiments, faults
    out: dict[str, Declared] = {o.name: Declared(o) for o in RUN_OPTIONS}

    def add(opt: Option, **owner) -> None:
        have = out.get(opt.name)
        if have is not None and have.option != opt:
            raise RuntimeError(f"run option {opt.name} is declared twice, differently")
        have = have or Declared(opt)
        out[opt.name] = Declared(opt, have.experiments + owner.get("experiments", ()),
                                 have.faults + owner.get("faults", ()))
    for cls in faults.FAULTS.values():
        for opt in cls.run_options:
            add(opt, faults=(cls,))
    for exp in experiments.REGISTRY.values():
        for opt in exp.options:
            add(opt, experiments=(exp.name,))
    return MappingProxyType(out)      # read once: the declarations do not change while the harness runs


class RunParams:
    """One run's parameters: the experiment, its `--fault` specs, and a value for every declared option
    (its default when not given). Frozen: `replace` makes a changed copy."""

    __slots__ = ("experiment", "faults", "_values", "_explicit")

    def __init__(self, experiment: str, faults=(), **values):
        every = declared()
        unknown = sorted(set(values) - set(every))
        if unknown:
            raise TypeError(f"unknown run option(s): {', '.join(unknown)}")
        object.__setattr__(self, "experiment", experiment)
        object.__setattr__(self, "faults", tuple(faults or ()))
        object.__setattr__(self, "_values", MappingProxyType(
            {name: (values[name] if values.get(name) is not None else d.option.default) for name, d in every.items()}))
        # What was given (not None), as opposed to a declared default: an experiment's own default, or a
        # value derived from others, fills only what was not.
        object.__setattr__(self, "_explicit", frozenset(k for k, v in values.items() if v is not None))

    def __getattr__(self, name: str):
        if name.startswith("_"):            # during copy or unpickling, before __init__ ran
            raise AttributeError(name)
        try:
            return self._values[name]
        except KeyError:
            raise AttributeError(name) from None

    def __setattr__(self, name, value):
        raise AttributeError("RunParams is frozen: use replace()")

    def __reduce__(self):
        return (_rebuild, (self.experiment, self.faults, dict(self._values), self._explicit))

    def __eq__(self, other) -> bool:
        return isinstance(other, RunParams) and self.as_dict() == other.as_dict()

    def __hash__(self) -> int:
        return hash(json.dumps(self.as_dict(), sort_keys=True, default=str))

    def __repr__(self) -> str:
        return f"RunParams({self.experiment!r}, {self.given()})"

    def replace(self, **changes) -> "RunParams":
        """A copy with these options changed (they count as given)."""
        experiment = changes.pop("experiment", self.experiment)
        faults = changes.pop("faults", self.faults)
        return _rebuild(experiment, faults, {**self._values, **changes}, self._explicit | set(changes))

    def given(self) -> dict:
        """The options whose value is not their declared default."""
        every = declared()
        return {k: v for k, v in self._values.items() if v != every[k].option.default}

    def explicit(self) -> frozenset:
        """The options given a value (whatever it is), as opposed to left to a default."""
        return self._explicit

    def as_dict(self) -> dict:
        """For the report: the experiment, the value of every option that applies to it (not one it refuses,
        nor another experiment's own: a custom run's report listed `commit_every 1`), the fault specs."""
        from .. import experiments
        exp = experiments.REGISTRY.get(self.experiment)
        every = declared()
        refused = exp.refuses if exp is not None else {}

        def applies(name: str) -> bool:
            d = every.get(name)
            if name in refused:
                return False
            return d is None or not d.experiments or exp is None or exp.name in d.experiments
        return {"experiment": self.experiment, **{k: v for k, v in self._values.items() if applies(k)},
                "faults": list(self.faults)}

    def validate(self) -> None:
        """Refuse a bad run in one clear line (see `resolve`)."""
        resolve(self)

    def resolve(self):
        return resolve(self)


def _rebuild(experiment: str, faults, values: dict, explicit) -> RunParams:
    """A RunParams with these values, of which `explicit` were given (replace, pickle, copy)."""
    p = RunParams(experiment, faults, **{k: v for k, v in values.items() if k in explicit})
    object.__setattr__(p, "_values", MappingProxyType({**p._values, **values}))
    return p


@dataclass(frozen=True)
class Resolved:
    """A run as it will run: its parameters (frozen), the experiment as they make it, and its faults."""
    params: RunParams
    exp: object
    faults: tuple


def resolve(params: RunParams) -> Resolved:
    """Check every value and every option's owner, then fill in the experiment's defaults and the values
    derived from others. Raises HarnessError (one line) for the first thing wrong."""
    from .. import experiments
    from .. import faults as faults_mod
    from ..experiments import kill_points_for
    exp = experiments.get(params.experiment)
    every = declared()
    given = params.given()
    for name, why in exp.refuses.items():
        if name in given:
            raise HarnessError(f"{every[name].option.flag} does not apply to {exp.name}: {why}")
    for name in given:
        d = every[name]
        if d.experiments and exp.name not in d.experiments:
            raise HarnessError(f"{d.option.flag} applies to {d.option.applies_to or ', '.join(d.experiments)} only; "
                               f"{exp.name} does not take it")
    for name, d in every.items():
        d.option.check(getattr(params, name))
    values = {}
    for name, default in exp.defaults.items():
        if name not in params.explicit():
            values[name] = default
    for name, d in every.items():
        if d.option.derive and name not in params.explicit():
            values[name] = d.option.derive({**params._values, **values})
    params = params.replace(**values) if values else params
    for rule in exp.rules:
        rule(params, exp)
    exp = exp.resolve(params)
    built = faults_mod.build(params, exp)
    planned = [f for f in built if isinstance(f, faults_mod.PlannedCrash)]
    for f in planned:
        kill_points_for(exp, f.point)
    for name in params.given():
        d = every[name]
        if d.faults and not any(isinstance(f, d.faults) for f in built):
            raise HarnessError(f"{d.option.flag} applies to {d.option.applies_to}; this run has none "
                               f"(its faults: {', '.join(f.name for f in built) or 'none'})")
    return Resolved(params, exp, tuple(built))
