"""Where the harness keeps things: the state folder and the download cache.

The state folder (default `.harness/` in the current directory, or
$HARNESS_HOME) holds the running services' data, logs, ports and pids, so a
second `harness up` finds and reuses them and `harness down` can stop them.
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
