"""Where the harness keeps things: the state folder and the download cache.

The state folder (default `.harness/` in the current directory, or
$HARNESS_HOME) holds the running services' data, logs, ports and pids, so a
second `harness up` finds and reuses them and `harness down` can stop them.
It is the stack's alone: an output folder (a run's, a suite's, a bench's)
inside it, or holding it, is refused (`refuse_overlap`), since Kafka and
PostgreSQL refuse a foreign file in their data and `down --purge` deletes it.
The cache ($HARNESS_CACHE, default ~/.cache/harness) keeps resolved Kafka jars
between state folders, so only the very first `up` on a machine downloads.
"""

import os
from pathlib import Path


def state_dir() -> Path:
    """The state folder's real path (links resolved): the marks a service's process must show are
    built from it, so one folder has one name however it was reached.

    A link on the way that another user made (or may re-point) is refused, in one line: the harness
    would otherwise write its marker, lock, passwords and data wherever that user points it."""
    from . import safefile
    from .errors import HarnessError
    raw = os.environ.get("HARNESS_HOME", ".harness")
    why = safefile.foreign_link(raw)
    if why:
        raise HarnessError(f"refusing the state folder {raw}: {why}; set HARNESS_HOME to a folder of your own")
    return Path(raw).resolve()


def cache_dir() -> Path:
    default = Path.home() / ".cache" / "harness"
    return Path(os.environ.get("HARNESS_CACHE", default)).absolute()


def reports_dir() -> Path:
    return Path(os.environ.get("HARNESS_REPORTS", "reports")).absolute()


def refuse_overlap(folder, option: str = "--out") -> None:
    """Raise one line when the output folder `folder` is the state folder, lies inside it, or holds it
    (links followed on both sides), before anything is created.

    Inside it, a report would be a foreign file in Kafka's or PostgreSQL's data (the next `up` fails) and
    `harness down --purge` would delete it. Holding it, the report folder (an artifact a CI job uploads)
    would carry the stack's data and passwords, and a run never shares its folder anyway."""
    from .errors import HarnessError
    from .escape import term
    state = state_dir()
    try:
        out = Path(folder).resolve()
    except (OSError, RuntimeError) as e:
        raise HarnessError(f"cannot use {term(folder)} for {option}: {e}") from None
    if out == state or state in out.parents:
        where = "is" if out == state else "is inside"
        raise HarnessError(f"refusing {option} {term(folder)}: it {where} the state folder {term(state)} "
                           f"($HARNESS_HOME), which the stack owns and `harness down --purge` deletes; "
                           f"choose a folder outside it")
    if out in state.parents:
        raise HarnessError(f"refusing {option} {term(folder)}: it holds the state folder {term(state)} "
                           f"($HARNESS_HOME), whose data and passwords would end up in the report folder; "
                           f"choose a folder that does not hold it")
