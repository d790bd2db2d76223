"""Which folders are harness state folders: a marker file `harness up` creates, so `down --purge` deletes
only what the harness made.

`harness down --purge` deletes `kafka/`, `postgres/`, passwords and `stack.json` under $HARNESS_HOME.
Pointed at a folder that was never a state folder (a project that happens to have a `kafka/`), it used to
delete those too. Now `up` creates `.harness-state` in the state folder (O_CREAT|O_EXCL|O_NOFOLLOW: a
new file of ours, never a planted one), and purge deletes only in a folder that carries it, as a
regular file owned by the user the harness runs as and writable by nobody else.
"""

import json
import os
import stat
import time
from pathlib import Path

from ..core import safefile
from ..core.errors import HarnessError

MARKER = ".harness-state"


def mark(state: Path, in_the_way: list[Path] = ()) -> None:
    """Mark `state` as a harness state folder (kept when it already is one).

    `in_the_way`: what the folder already holds of the names `down --purge` deletes. A folder marked
    before holds them because the harness made them; in a folder not yet marked they are someone
    else's (a project's own `kafka/`), and marking it would let purge delete them: refused."""
    if in_the_way and why_not_marked(state):
        names = ", ".join(sorted(p.name for p in in_the_way))
        raise HarnessError(f"refusing the state folder {state}: it already holds {names}, which the harness "
                           f"did not make (it has no {MARKER}); set HARNESS_HOME to a new or empty folder")
    try:
        safefile.create_new(state / MARKER, json.dumps({"made_by": "harness up", "at": time.time()}) + "\n",
                            safefile.PRIVATE)
    except OSError as e:
        raise HarnessError(f"cannot write {state / MARKER}: {e.strerror or e}") from None


def why_not_marked(state: Path) -> str | None:
    """None when `state` carries our marker; else why it does not count as a harness state folder."""
    path = state / MARKER
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return f"it has no {MARKER} (which `harness up` creates), so it was never a harness state folder"
    except OSError as e:
        return f"cannot read {path}: {e.strerror or e}"
    if not stat.S_ISREG(st.st_mode) or st.st_uid != os.geteuid() or st.st_mode & 0o022:
        return f"its {MARKER} is not one the harness made (a link, another user's file, or writable by others)"
    return None
