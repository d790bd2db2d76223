"""The crash log: one JSON line per crash, fsynced before the worker dies.

A worker about to SIGKILL itself first appends what it had done but not
acknowledged (`unacked`), then fsyncs: the record survives the kill, so the
checker can predict the damage from it. A record is written with a single
O_APPEND write, so concurrent workers never interleave lines. Reading skips
torn or foreign lines instead of failing.

What is measured from the crash log alone (with the workers' events), such as
how long each crashed slot took to run again, lives here too: the supervisor
that writes the events and the report that shows the measure both sit above
this module, so neither has to import the other.
"""

import json
import os
from pathlib import Path


def append(path: Path, entry: dict, sync: bool = True) -> None:
    """One line, one O_APPEND write (writers never interleave), never through a link; fsynced unless
    `sync` is False (a record that need not survive the machine, only the process)."""
    line = (json.dumps(entry, separators=(",", ":")) + "\n").encode()
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW, 0o644)
    try:
        os.write(fd, line)
        if sync:
            os.fsync(fd)
    finally:
        os.close(fd)


def read(path: Path) -> list[dict]:
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return []
    return parse(text)


def parse(text: str | bytes) -> list[dict]:
    """The JSON objects of these lines; torn or foreign lines are skipped."""
    out = []
    for line in text.splitlines():
        try:
            d = json.loads(line)
        except ValueError:
            continue
        if isinstance(d, dict):
            out.append(d)
    return out


def tail(path: Path, pos: int) -> tuple[bytes, int]:
    """The complete lines appended to `path` since byte `pos`, and where the next read starts: a line still
    being written waits for the next read. (b"", pos) when the file cannot be read."""
    try:
        with open(path, "rb") as f:
            f.seek(pos)
            data = f.read()
    except OSError:
        return b"", pos
    end = data.rfind(b"\n") + 1
    return data[:end], pos + end


def crashed_ids(path: Path) -> set[str]:
    return {e["message_id"] for e in read(path) if isinstance(e.get("message_id"), str)}


def restart_seconds(crashes: list[dict], events: list[dict]) -> list[float | None]:
    """Per crash, in the crashes' order: seconds from the kill to the next record processed by the same
    worker slot, or None when that slot processed no record after it (nothing was left for it)."""
    firsts: dict[str, list[float]] = {}
    for ev in events:
        if ev.get("event") == "first_message":
            firsts.setdefault(ev.get("worker"), []).append(ev.get("t", 0.0))
    out: list = []
    for c in crashes:
        t = c.get("time")
        later = [f for f in firsts.get(c.get("worker"), []) if t is not None and f > t]
        out.append(round(min(later) - t, 3) if later else None)
    return out
