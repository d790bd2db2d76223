"""Targets of `harness compare` (and the folder lookup of `harness report` and `harness audit`).

A *target* is whatever names saved results: a run folder, a suite folder, a
report.json or suite.json, a run or suite id under the reports folder, or
`latest`. Each loads as {experiment name: report dict} (a `Target`, which also
knows its label and where it came from).

Apart from comparison.py because this is the part that reads files, and so the
part that must distrust them: every report is validated (reporting/validate.py)
before comparison.py sees it, a suite's reports are read only from inside its
folder and must be the reports of the entries that name them, and `latest`
counts only folders the harness made.
"""

from __future__ import annotations

import re
from pathlib import Path

from ..core.errors import HarnessError
from . import validate
from ..core.escape import within


class Target(dict):
    """{experiment name: report dict}, plus where it came from (a dict, so `load_target` stays simple)."""

    def __init__(self, reports: dict, label: str, path: Path, kind: str, environment: dict | None = None,
                 notes: list[str] | None = None, missing: list[tuple[str, str, str]] | None = None):
        super().__init__(reports)
        self.label = label              # the column header: folder name, run id or suite id
        self.path = path                # the report.json or suite.json it was read from
        self.kind = kind                # "run" or "suite"
        self.environment = environment or {}   # a suite's own environment block
        self.notes = notes or []        # listed experiments without a report, newer schema...
        self.missing = missing or []    # (experiment, suite.json's verdict, why) of those without a report


TIMESTAMPED = re.compile(r"^\d{8}T\d{6}")


def find_folder(arg: str, reports_root: Path | None = None) -> Path:
    """Resolve a target argument to an existing path (folder or file), or raise one clear HarnessError."""
    root = Path(reports_root) if reports_root is not None else _default_root()
    p = Path(arg).expanduser()
    if p.exists():
        return p
    if arg == "latest":
        return _latest(root)
    if "/" in arg:
        raise HarnessError(f"unknown target {arg!r}: no such file or folder")
    if (root / arg).exists():
        return root / arg
    raise HarnessError(f"unknown target {arg!r}: not a run folder, suite folder or report.json, "
                       f"and no run or suite id {arg!r} under {root}")


def _default_root() -> Path:
    from ..core.paths import reports_dir
    return reports_dir()


def _latest(root: Path) -> Path:
    """The newest report folder: run and suite ids start with a timestamp, so the largest name wins.

    Folders not named by a timestamp (committed reference runs) count only when there is no other.
    A folder named by a timestamp counts only when the harness made it (`rundir.made_by_harness`):
    anyone who can create a folder there could otherwise name the newest one.
    """
    from ..core.rundir import made_by_harness
    if not root.is_dir():
        raise HarnessError(f"no target 'latest': the reports folder {root} does not exist")
    found = [d for d in root.iterdir()
             if d.is_dir() and ((d / "report.json").is_file() or (d / "suite.json").is_file())]
    found = [d for d in found if not TIMESTAMPED.match(d.name) or made_by_harness(d)]
    if not found:
        raise HarnessError(f"no target 'latest': {root} has no folder with a report.json or suite.json "
                           f"that the harness made")
    stamped = [d for d in found if TIMESTAMPED.match(d.name) and made_by_harness(d)]
    return max(stamped or found, key=lambda d: d.name)


def load_target(arg: str, reports_root: Path | None = None) -> dict[str, dict]:
    """Load a run or suite as {experiment: report dict} (a `Target`, which also knows its label).

    `arg` is a run folder, a suite folder, a report.json or suite.json, a run or suite id under
    `reports_root` (default: harness.core.paths.reports_dir()), or `latest`.
    """
    p = find_folder(str(arg), reports_root)
    if p.is_dir():
        if (p / "suite.json").is_file():
            return _load_suite(p / "suite.json", read_json(p / "suite.json"))
        if (p / "report.json").is_file():
            return _load_run(p / "report.json", read_json(p / "report.json"))
        raise HarnessError(f"{p} has neither report.json nor suite.json: not a run or suite folder")
    data = read_json(p)
    if isinstance(data.get("experiments"), list):
        return _load_suite(p, data)
    return _load_run(p, data)


def read_json(path: Path) -> dict:
    """A JSON object from a file, or one clear HarnessError (missing, unreadable, too large, invalid or
    not strict JSON, not an object): see reporting/validate.py."""
    return validate.read_json(path)


def check_report(path: Path, data: dict) -> list[str]:
    """Raise unless `data` is a run report that follows docs/report.schema.json; return notes (a newer
    schema) for the warnings."""
    if not isinstance(data.get("experiment"), str):
        raise HarnessError(f"{validate.term(str(path))} is not a run report (it has no 'experiment' field)")
    return validate.check(data, "report", path)


def _label_of(path: Path) -> str:
    """A folder's name for report.json / suite.json, else the file's stem."""
    return path.parent.name if path.name in ("report.json", "suite.json") else path.stem


def _load_run(path: Path, data: dict) -> Target:
    notes = check_report(path, data)
    return Target({data["experiment"]: data}, _label_of(path), path, "run", notes=notes)


def _load_suite(path: Path, data: dict) -> Target:
    base, label = path.parent, _label_of(path)
    if not isinstance(data.get("experiments"), list):
        raise HarnessError(f"{validate.term(str(path))} is not a suite (it has no 'experiments' list)")
    notes = validate.check(data, "suite", path)
    entries = [e for e in data["experiments"] if isinstance(e, dict)]
    names = [e.get("experiment") for e in entries]
    reports, missing, seen = {}, [], {}
    for entry in entries:
        exp = entry.get("experiment")
        rel = entry.get("report") or (f"{exp}/report.json" if exp else None)
        if not rel:
            notes.append(f"{label}: an entry of suite.json names no experiment and no report; skipped")
            continue
        if not within(base, str(rel)):   # `../../etc/passwd`, `/etc/shadow`, a link out of the folder
            raise HarnessError(f"{validate.term(str(path))}: the report of experiment {validate.term(str(exp))[:80]!r} "
                               f"is not inside the suite folder; nothing was read")
        rpath = base / rel
        if not rpath.is_file():
            why = entry.get("error") or entry.get("reason") or f"{rpath} is missing"
            notes.append(f"{label}: {exp or rel} has no report ({why})")
            missing.append((exp or rel, str(entry.get("verdict") or "failed"), why))
            continue
        real = rpath.resolve()
        if real in seen:
            raise HarnessError(f"{validate.term(str(path))}: experiments {validate.term(str(seen[real]))[:80]!r} and "
                               f"{validate.term(str(exp))[:80]!r} name the same report; nothing was compared")
        seen[real] = exp
        rep = read_json(rpath)
        notes += check_report(rpath, rep)
        # The entry's report must be of that entry: one run's report read for another experiment gates nothing.
        for field_name in ("experiment", "run_id"):
            said = entry.get(field_name)
            if isinstance(said, str) and rep.get(field_name) != said:
                raise HarnessError(f"{validate.term(str(path))}: the entry for {validate.term(str(exp))[:80]!r} names "
                                   f"{validate.term(str(rpath))}, whose {field_name} is "
                                   f"{validate.term(str(rep.get(field_name)))[:80]!r}; nothing was compared")
        # The same experiment twice in a suite (say eos at several commit intervals): key by run folder.
        key = exp or rep["experiment"]
        if names.count(key) > 1 or key in reports:
            key = rpath.parent.name
        key, n = (key, 2) if key not in reports else (f"{key}#2", 3)
        while key in reports:
            key, n = f"{key.rsplit('#', 1)[0]}#{n}", n + 1
        reports[key] = rep
    if not reports:
        raise HarnessError(f"suite {label} ({path}) lists no experiment with a readable report.json")
    return Target(reports, label, path, "suite",
                  environment=data.get("environment") if isinstance(data.get("environment"), dict) else {},
                  notes=notes, missing=missing)
