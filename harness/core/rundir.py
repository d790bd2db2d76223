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

A folder others can write in (or another user's) is refused (`safefile.check_folder`):
anyone could plant a link there under a name the run is about to write. And the
owner file is what tells a folder the harness made from one merely named like a
run id: `made_by_harness` is what `latest` goes by.
"""

from __future__ import annotations

import errno
import json
import os
import socket
import tempfile
import time
from pathlib import Path

from . import safefile
from .errors import HarnessError

OWNER_FILE = ".run-owner"
SUITE_OWNER_FILE = ".suite-owner"
# Anything here means another run (finished, killed or still going) used this folder.
RUN_FILES = (OWNER_FILE, "report.json", "report.md", "report.html", "crash-log.jsonl", "crash-plan.json",
             "events.jsonl", "workers", "streams-state")


def claim_run_dir(path: Path) -> Path:
    """Create (or take an empty) run folder and make this process its only owner; return it."""
    path = Path(path)
    if os.path.lexists(path) and not path.is_dir():
        raise HarnessError(f"cannot use {path} as the run folder: it is not a folder")
    refuse_foreign_link(path)
    try:
        safefile.make_folder(path)
    except OSError as e:
        raise HarnessError(f"cannot create the run folder {path}: {_why(e, path)}") from None
    check_safe(path)
    refuse_used(path)
    try:
        fd = os.open(path / OWNER_FILE, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
    except FileExistsError:
        raise HarnessError(f"{path} was just claimed by another run; choose another --out") from None
    except OSError as e:
        raise HarnessError(f"cannot write in the run folder {path}: {_why(e, path)}") from None
    try:
        with os.fdopen(fd, "w") as f:
            json.dump({"pid": os.getpid(), "host": socket.gethostname(), "claimed_at": time.time()}, f)
            f.write("\n")
    except OSError as e:       # a full disk: the folder stays claimed (the file exists), the run does not start
        raise HarnessError(f"cannot write in the run folder {path}: {_why(e, path)}") from None
    return path


def refuse_foreign_link(path: Path) -> None:
    """Raise when a link on the way to `path` is another user's, or sits in a folder another user owns:
    that user could point it at a folder of ours (or re-point it mid-run), and the run would claim that
    folder (`safefile.foreign_link`)."""
    why = safefile.foreign_link(path)
    if why:
        raise HarnessError(f"refusing the run folder {path}: {why}; choose an --out that only you can write")


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
        check_safe(path)
        refuse_used(path)
    check_creatable(path)


# A run writes logs, a crash log and its report (a few hundred KiB); less free space than this means
# the report would not fit, and the run would be for nothing.
MIN_FREE_BYTES = 4 * 1024 * 1024


def check_space(path: Path) -> None:
    """Raise one line when the file system that would hold `path` is (nearly) full."""
    probe = Path(path).absolute()
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    try:
        st = os.statvfs(probe)
    except OSError:
        return
    free = st.f_bavail * st.f_frsize
    if free < MIN_FREE_BYTES or (st.f_files and st.f_favail < 16):
        raise HarnessError(f"no room for a run in {path}: {free // 1024:,} KiB free on its file system "
                           f"(a run needs at least {MIN_FREE_BYTES // (1024 * 1024)} MiB)")


def check_safe(path: Path) -> None:
    """Raise one line when others could plant files in the run folder `path` (see `safefile.check_folder`)."""
    safefile.check_folder(path, "the run folder", "choose an --out that only you can write")


def made_by_harness(folder: Path) -> bool:
    """Whether `folder` was claimed by a run (or a suite) of the harness: it holds our owner file, a regular
    file (not a link) of the user the harness runs as that nobody else may write. A folder merely named
    like a run id, or holding a copied report.json, is not."""
    import stat
    if os.path.islink(folder):
        return False
    for name in (OWNER_FILE, SUITE_OWNER_FILE):
        try:
            st = os.lstat(Path(folder) / name)
        except OSError:
            continue
        if stat.S_ISREG(st.st_mode) and st.st_uid == os.geteuid() and not st.st_mode & 0o022:
            return True
    return False


def mark_suite_dir(path: Path) -> None:
    """A suite's folder: claim it as the harness's own (for `made_by_harness`), refusing an unsafe one."""
    try:
        safefile.make_folder(path)
    except OSError as e:
        raise HarnessError(f"cannot create the suite folder {path}: {_why(e, path)}") from None
    safefile.check_folder(path, "the suite folder", "choose an --out that only you can write")
    try:
        safefile.create_new(path / SUITE_OWNER_FILE, json.dumps({"pid": os.getpid(), "claimed_at": time.time()}) + "\n")
    except OSError as e:
        raise HarnessError(f"cannot write in the suite folder {path}: {_why(e, path)}") from None


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
    check_space(path)


def _why(e: OSError, path: Path) -> str:
    if e.errno == errno.ENOTDIR:
        return "a part of that path is a file, not a folder"
    where = f" ({e.filename})" if e.filename and str(e.filename) != str(path) else ""
    return (e.strerror or str(e)) + where
