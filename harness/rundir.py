"""A run's folder belongs to one run: claimed atomically, never shared, never reused.

Two runs that picked the same folder (the same --out, or one run id for two
runs started in the same second) used to write into each other's files: the
second overwrote the first's crash-plan.json, and a run reusing the folder of
a killed run appended to its crash-log.jsonl, so the report counted the old
crashes as its own. `claim_run_dir` creates the folder if needed and then an
owner file inside it with O_CREAT|O_EXCL, which exactly one process can do;
it refuses a folder that already holds anything, naming a run's files when
it finds some. An existing empty folder may be used. Every refusal and every
file system error is one line.
"""

from __future__ import annotations

import errno
import json
import os
import socket
import tempfile
import time
from pathlib import Path

from .errors import HarnessError

OWNER_FILE = ".run-owner"
# Anything here means another run (finished, killed or still going) used this folder.
RUN_FILES = (OWNER_FILE, "report.json", "report.md", "report.html", "crash-log.jsonl", "crash-plan.json",
             "events.jsonl", "workers", "streams-state")


def claim_run_dir(path: Path) -> Path:
    """Create (or take an empty) run folder and make this process its only owner; return it."""
    path = Path(path)
    if os.path.lexists(path) and not path.is_dir():
        raise HarnessError(f"cannot use {path} as the run folder: it is not a folder")
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise HarnessError(f"cannot create the run folder {path}: {_why(e, path)}") from None
    refuse_used(path)
    try:
        fd = os.open(path / OWNER_FILE, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    except FileExistsError:
        raise HarnessError(f"{path} was just claimed by another run; choose another --out") from None
    except OSError as e:
        raise HarnessError(f"cannot write in the run folder {path}: {_why(e, path)}") from None
    with os.fdopen(fd, "w") as f:
        json.dump({"pid": os.getpid(), "host": socket.gethostname(), "claimed_at": time.time()}, f)
        f.write("\n")
    return path


def refuse_used(path: Path) -> None:
    """Raise unless `path` is empty: a run never shares its folder, least of all with another run's files."""
    try:
        entries = sorted(os.listdir(path))
    except OSError as e:
        raise HarnessError(f"cannot read the run folder {path}: {_why(e, path)}") from None
    if not entries:
        return
    run = [name for name in RUN_FILES if name in entries]
    what = (f"a run's files ({', '.join(run)})" if run
            else f"other files ({', '.join(entries[:3])}{', ...' if len(entries) > 3 else ''})")
    raise HarnessError(f"{path} already holds {what}; a run needs a new or empty folder: choose another --out")


def check_run_dir(path: Path) -> None:
    """Check, without leaving anything behind, that a run folder could be claimed at `path`.

    For the CLI, before any stack is started: a folder that is in use, lies under a regular
    file, or cannot be created (read-only, /proc, no permission) is reported at once.
    """
    path = Path(path).absolute()
    if path.is_dir():
        refuse_used(path)
    check_creatable(path)


def check_creatable(path: Path) -> None:
    """Raise unless `path` is a folder or one could be created there (nothing is left behind)."""
    path = Path(path).absolute()
    if os.path.lexists(path) and not path.is_dir():
        raise HarnessError(f"cannot use {path} as a folder: it is not a folder")
    probe_in = path
    while not probe_in.exists() and probe_in != probe_in.parent:
        probe_in = probe_in.parent
    if not probe_in.is_dir():
        raise HarnessError(f"cannot create the folder {path}: {probe_in} is not a folder")
    try:   # the only sure test of "can I create a folder here" is to do it
        os.rmdir(tempfile.mkdtemp(prefix=".harness-probe-", dir=probe_in))
    except OSError as e:
        where = "" if probe_in == path else f"nothing can be created in {probe_in}: "
        raise HarnessError(f"cannot create the folder {path}: {where}{e.strerror or e}") from None


def _why(e: OSError, path: Path) -> str:
    if e.errno == errno.ENOTDIR:
        return "a part of that path is a file, not a folder"
    where = f" ({e.filename})" if e.filename and str(e.filename) != str(path) else ""
    return (e.strerror or str(e)) + where
