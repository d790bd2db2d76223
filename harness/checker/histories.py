"""Read the workers' history files (runtime/history.py) as untrusted input, for the anomaly classes.

The files are the workers' own, in the run's folder, written while the run
goes on; the harness still believes nothing it reads: every file is read
without following a link, only if it is a regular file of bounded size, and
every line is checked for its shape (integers bounded, no NaN or Infinity,
partition keys of digits only) before it is believed. A line that is not a
well-formed operation is counted, never guessed at; the anomaly classes are
computed from what remains, the process's unfinished transactions count as
unknown, and the report says how many lines were set aside.
"""

from __future__ import annotations

import json
import math
import os
import re
from dataclasses import dataclass, field
from pathlib import Path

from ..core.errors import HarnessError
from ..core.safefile import read_limited
from .anomalies import Process

# A million payments through an eos worker write about 80 MB of history; beyond this a file is not ours.
MAX_FILE_BYTES = 512 * 1024 * 1024
MAX_FILES = 10_000
FILE_NAME = re.compile(r"^([A-Za-z0-9_.-]{1,64})-([0-9]{1,6})\.jsonl$")
TXN_STEPS = ("begin", "committing", "commit", "abort")
PARTITION = re.compile(r"[0-9]{1,9}")
MAX_INT = 2 ** 63          # offsets, partitions and transaction numbers fit a Kafka int64
MAX_LINE = 1 << 20         # a poll of 500 records writes a few kB


@dataclass
class Histories:
    processes: list = field(default_factory=list)     # anomalies.Process, in file-name order
    bad_lines: int = 0
    problems: list = field(default_factory=list)      # files that could not be read, in words

    def ops(self) -> int:
        return sum(len(p.ops) for p in self.processes)


def _int(x) -> bool:
    return isinstance(x, int) and not isinstance(x, bool) and -MAX_INT <= x < MAX_INT


def _key(k) -> bool:
    return isinstance(k, str) and PARTITION.fullmatch(k) is not None


def _offsets(d) -> bool:
    return isinstance(d, dict) and all(_key(k) and _int(v) for k, v in d.items())


def _runs(d) -> bool:
    return isinstance(d, dict) and all(
        _key(k) and isinstance(v, list)
        and all(isinstance(r, list) and len(r) == 2 and _int(r[0]) and _int(r[1]) and r[0] <= r[1] for r in v)
        for k, v in d.items())


def well_formed(op) -> bool:
    """An operation as runtime/history.py writes it: [t, kind, ...] with the right fields for its kind."""
    if not (isinstance(op, list) and len(op) >= 2 and isinstance(op[0], (int, float)) and isinstance(op[1], str)
            and not isinstance(op[0], bool) and math.isfinite(op[0])):
        return False
    kind, rest = op[1], op[2:]
    if kind in ("assign", "seek", "commit", "join", "commit-begin"):
        return len(rest) == 2 and isinstance(rest[0], str) and _offsets(rest[1])
    if kind == "commit-error":
        return len(rest) == 3 and isinstance(rest[0], str) and _offsets(rest[1]) and isinstance(rest[2], str)
    if kind == "poll":
        return len(rest) == 2 and isinstance(rest[0], str) and _runs(rest[1])
    if kind == "revoke":
        return len(rest) == 2 and isinstance(rest[0], str) and isinstance(rest[1], list) and all(map(_int, rest[1]))
    if kind == "txn":
        return len(rest) == 2 and rest[0] in TXN_STEPS and _int(rest[1])
    if kind == "send":
        return (len(rest) == 5 and isinstance(rest[0], str) and _int(rest[1]) and _int(rest[2])
                and (rest[3] is None or isinstance(rest[3], str)) and (rest[4] is None or _int(rest[4])))
    if kind == "send-error":
        return len(rest) == 4 and isinstance(rest[0], str)
    return False


def parse(text: str, worker: str, attempt: int) -> tuple[Process, int]:
    """One file's operations (the "open" line dropped) and how many lines were not well formed."""
    proc, bad = Process(worker, attempt), 0
    for line in text.splitlines():
        if len(line) > MAX_LINE:
            bad += 1
            continue
        try:
            op = json.loads(line, parse_constant=_refuse)
        except (ValueError, RecursionError):
            bad += 1
            continue
        if isinstance(op, list) and len(op) == 3 and op[1] == "open":
            continue
        if well_formed(op):
            proc.ops.append(op)
        else:
            bad += 1
    proc.lines_lost = bad
    return proc, bad


def _refuse(name: str):
    raise ValueError(f"{name} is not a number a history holds")


def read(folder: Path) -> Histories | None:
    """Every history file in `folder`; None when the run kept none (an older run, or workers not ours)."""
    try:
        names = sorted(os.listdir(folder))
    except (FileNotFoundError, NotADirectoryError):
        return None
    except OSError as e:
        return Histories(problems=[f"cannot list {folder}: {e.strerror or e}"])
    h = Histories()
    for name in names[:MAX_FILES]:
        m = FILE_NAME.match(name)
        if not m:
            h.problems.append(f"not a history file: {name[:80]!r}")
            continue
        try:
            text = read_limited(folder / name, MAX_FILE_BYTES, "history file", follow_links=False).decode(
                errors="replace")
        except HarnessError as e:
            h.problems.append(str(e))
            continue
        proc, bad = parse(text, m.group(1), int(m.group(2)))
        h.processes.append(proc)
        h.bad_lines += bad
    if len(names) > MAX_FILES:
        h.problems.append(f"{len(names) - MAX_FILES} history files beyond the first {MAX_FILES} were not read")
    return h
