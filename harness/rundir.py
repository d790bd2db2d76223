"""A run's folder: claimed by one run only, never reused.

Two runs started in the same second, or a second run given the `--out` of an
earlier (perhaps killed) one, must not write into each other's files: the
crash log is append-only and would mix two runs. The folder is created
atomically; an existing folder is accepted only when it is empty.
"""

import os
from pathlib import Path

from .errors import HarnessError


def claim_run_dir(path: Path) -> Path:
    path = Path(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        os.mkdir(path)
    except FileExistsError:
        if not path.is_dir():
            raise HarnessError(f"{path} exists and is not a folder; choose another --out")
        if any(path.iterdir()):
            raise HarnessError(f"{path} already holds files (another run's?); choose another --out")
    except OSError as e:
        raise HarnessError(f"cannot create the report folder {path}: {e.strerror or e}")
    return path
