"""The fault protocol: every way the harness breaks a run is one small object.

As Jepsen's nemeses, a fault is told when the run is set up, is ticked by the
supervisor's loop (about every 10 ms), can hold the run open while its story
is not finished (`busy`), and finally says what it did: one entry per fault
that happened, each with its time and target, for the report's `faults` list,
plus any observations the checker judges (`fault.zombie.fenced`).

Faults are chosen with a repeatable `--fault NAME[:key=value,...]` (see
`FAULTS`), or by an experiment's declaration (`default_faults`) with the
classic options (`--crash-rate`, `--kill-point`, `--kill-mode random --kills`).
"""

from __future__ import annotations

import math

from ..core.errors import HarnessError


class Fault:
    name = "fault"
    options: dict = {}          # --fault NAME:option -> help
    run_options: tuple = ()     # the `harness run` options (harness.core.options.Option) that set this fault up
    excludes: dict = {}         # faults it cannot run with -> why, in a few words
    setup_order = 0             # faults set up in this order (a fault whose plan avoids another's comes later)
    # True when the fault moves where a worker fetches (a seek after an abort, a partition's new leader): the
    # workers then keep idle fetches short, as one held at the end of the log delays the next (harness/clients/consume.py)
    moves_partitions = False

    def unmet(self, exp) -> str | None:
        """What this fault needs that the experiment lacks (None: it can run there)."""
        return None

    def check_stack(self, stack) -> None:
        """Before anything is created: raise one clear line when this stack cannot take the fault."""

    def setup(self, run) -> None:
        """Before any worker starts (e.g. write the crash plan)."""

    def tick(self, sup) -> None:
        """Called by the supervisor's loop; may signal workers."""

    def busy(self) -> bool:
        """True while the fault is mid-story: the run is not over even if every worker finished."""
        return False

    def stops_run(self) -> str | None:
        """Why the run cannot go on because of what this fault did (a node that never came back), in one
        line; None while it can. The supervisor then ends the run as incomplete, at once."""
        return None

    run_end: tuple | None = None       # (status, reason) of the supervisor as it stopped

    def finish(self, sup) -> None:
        """The supervisor stops (done, timed out or interrupted): undo what must not outlive the run."""

    def release(self) -> None:
        """What must not outlive the run even when the supervisor never ran (set-up failed, the run stopped
        before its workers): undone here too. Called after `finish` as well, so it must be idempotent."""

    def entries(self, crashes: list[dict], events: list[dict]) -> list[dict]:
        """What happened, one dict per fault occurrence: {fault, time, target, ...}."""
        return []

    def story(self, events: list[dict]) -> dict | None:
        """Details worth a section of the report (None: nothing beyond the entries)."""
        return None

    def observed(self, story: dict | None) -> dict:
        """Metrics for the checker, named `fault.<name>.<metric>`."""
        return {}

    def sentence(self, story: dict | None) -> str:
        return ""

    def shortfall(self, crashes: list[dict], story: dict | None) -> str:
        """A sentence when the fault did less than it was asked to (fewer kills than requested)."""
        return ""

    def missed_because(self) -> str:
        """Why what the fault planned for later never came: the workers finished first only when the run
        completed; otherwise the run stopped first, and how (`run_end`, set by the supervisor as it stops)."""
        status, reason = self.run_end or ("complete", None)
        if status == "complete":
            return "the workers finished first"
        return f"the run stopped first, {status}" + (f": {reason}" if reason else "")

    def bounds_aborts(self, story: dict | None) -> bool:
        """True when what this fault did can abort transactions no crash record describes (a broker
        fault): the aborted copies (and what an abort redoes) become bounds, from the abort events."""
        return False

    def interruptions(self, story: dict | None) -> int:
        """Workers this fault stopped at an instant of its choosing without a crash record (their in-flight
        records are unknown, so the predictions they touch become bounds)."""
        return 0

    def describe(self) -> dict:
        return {"fault": self.name, **{k: getattr(self, k) for k in self.options}}


def parse_spec(spec: str) -> tuple[str, dict]:
    """`name:key=value,key=value` -> (name, {key: value}); values stay strings."""
    name, _, rest = spec.partition(":")
    opts = {}
    for part in filter(None, (p.strip() for p in rest.split(","))):
        key, eq, value = part.partition("=")
        if not eq or not key.strip():
            raise HarnessError(f"--fault {spec!r}: options are key=value pairs separated by commas")
        if key.strip() in opts:
            raise HarnessError(f"--fault {spec!r}: {key.strip()} is given twice")
        opts[key.strip()] = value.strip()
    return name.strip(), opts


def number(spec: str, key: str, value, kind=float, low: float = 0.0, high: float | None = None):
    """A fault option as a number in [low, high], or one clear line."""
    try:
        v = kind(value)
    except (TypeError, ValueError):
        raise HarnessError(f"--fault {spec}: {key} must be a {'whole ' if kind is int else ''}number, got {value!r}")
    if isinstance(v, float) and not math.isfinite(v) or v < low or (high is not None and v > high):
        raise HarnessError(f"--fault {spec}: {key} must be between {low:g} and "
                           f"{'infinity' if high is None else f'{high:g}'}, got {value!r}")
    return v
