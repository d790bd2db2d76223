"""Faults: the protocol (base) and each fault in its own module (planned crashes, random kills, the
zombie pause, kills on a beat, broker faults, a rolling upgrade, a transactional client's own aborts and
pauses, two deliveries overlapping, requests of one Kafka API delayed, failed or sent twice). `build` turns
a run's options into its list of faults; the supervisor (harness/workers/) ticks them, and the crash plan
and crash log they share with the workers are in harness/runtime/."""

from ..core.errors import HarnessError, did_you_mean
from .base import Fault, parse_spec
from .broker import BrokerKill, BrokerPause, LeaderKill
from .client import Abort, ClientPause
from .kill_every import KillEvery
from .network import ClientCut, Latency, Partition
from .overlap import Overlap
from .planned import PlannedCrash
from .protocol import DelayRequest, DuplicateRequest, FailRequest
from .random_kill import RandomKill
from .upgrade import RollingUpgrade
from .zombie import ZombiePause

FAULTS = {f.name: f for f in (PlannedCrash, RandomKill, ZombiePause, KillEvery, BrokerKill, BrokerPause, LeaderKill,
                              RollingUpgrade, Partition, ClientCut, Latency, Abort, ClientPause, Overlap,
                              DelayRequest, FailRequest, DuplicateRequest)}


def help_text() -> str:
    return "\n".join(f"  {name:<14} " + "; ".join(f"{k}: {v}" for k, v in f.options.items())
                     for name, f in FAULTS.items())


def build(params, exp) -> list[Fault]:
    """The run's faults: `--fault` specs when given, else the experiment's defaults, where
    `--kill-mode random` turns the planned crashes into the supervisor's random kills, and
    `--kill-every S` adds kills on a beat (alone, unless --kill-mode random or --kills asks for both)."""
    specs = list(params.faults or [])
    if not specs:
        specs = ["random-kill" if name == "planned-crash" and params.kill_mode == "random" else name
                 for name in exp.default_faults]
        if params.kill_every is not None:
            if params.kill_mode != "random" and params.kills is None:
                specs = [s for s in specs if s != "random-kill"]
            specs.append("kill-every")
    out = []
    for spec in specs:
        name, opts = parse_spec(spec)
        cls = FAULTS.get(name)
        if cls is None:
            raise HarnessError(f"unknown --fault {name!r}; {did_you_mean(name, FAULTS)}choose one of: {', '.join(FAULTS)}")
        fault = cls.from_options(spec, opts, params)
        if opts:
            raise HarnessError(f"--fault {spec}: unknown option(s) {', '.join(opts)}; "
                               f"{name} takes: {', '.join(cls.options)}")
        missing = fault.unmet(exp)
        if missing:
            raise HarnessError(f"--fault {name} needs {missing}; {exp.name} has none")
        out.append(fault)
    names = [f.name for f in out]
    if len(set(names)) != len(names):
        raise HarnessError(f"each fault may be given once; got {', '.join(names)}")
    for f in out:
        for other, why in f.excludes.items():
            if other in names and other != f.name:
                raise HarnessError(f"--fault {f.name} cannot run with {other}: {why}")
    return out
