"""A worker slot's log with a size cap: a consumer that floods its output cannot fill the disk.

A user's consumer writes what it likes to stdout and stderr; written straight to its log file, one
that prints in a loop filled a 200 MB file system in 10 s and the run ended with no report. So its
output goes to a pipe, and a thread of the supervisor copies it into the slot's log until the file
holds `CAP_BYTES`; past that, it keeps reading (the consumer never blocks on a full pipe) but counts
and drops the bytes. When the process's output ends, one marker line says how many bytes of it were
dropped, and the slot's total is in the report (`worker_logs`). A write the disk refuses (full) is
counted as dropped too: the run goes on and its report is still written. The harness's own forked
workers (forkserver.py) write to such a pipe as well: their output is the experiment code's, which a
flag or a bug can make as loud as any consumer's.
"""

import os
import threading
from pathlib import Path

from ..core import safefile

CAP_BYTES = 5 * 1024 * 1024          # per slot, every attempt of it together
CHUNK = 1 << 16
JOIN_TIMEOUT_S = 10.0


class CappedLog:
    """One slot's log file: `pipe()` gives each of its processes a stdout that ends up here, capped."""

    def __init__(self, path: Path, cap: int = CAP_BYTES):
        self.path, self.cap = path, cap
        self.dropped = 0
        self._lock = threading.Lock()
        self._threads: list[threading.Thread] = []
        with safefile.open_log(path):       # made now (not through a link): the slot's log exists from its start
            pass

    def pipe(self) -> int:
        """A pipe's write end for a process's stdout and stderr; the caller closes it once the process has it."""
        r, w = os.pipe()
        os.set_inheritable(r, False)
        t = threading.Thread(target=self._pump, args=(r,), name=f"log {self.path.name}", daemon=True)
        t.start()
        self._threads.append(t)
        return w

    def _pump(self, r: int) -> None:
        dropped, log = 0, None
        try:
            try:
                log = safefile.open_log(self.path)
            except OSError:
                log = None             # the log cannot be opened: everything is dropped, still read
            while chunk := os.read(r, CHUNK):
                lost = self._write(log, chunk) if log else len(chunk)
                dropped += lost
                with self._lock:
                    self.dropped += lost
            if dropped and log:
                self._write(log, (f"[harness] {dropped} bytes of this process's output dropped: the log of a "
                                  f"slot is capped at {self.cap} bytes\n").encode(), marker=True)
        finally:
            os.close(r)
            if log:
                log.close()

    def _write(self, log, data: bytes, marker: bool = False) -> int:
        """Write what fits under the cap (all of a marker); the number of bytes dropped. A write the disk
        refuses (full, a quota) drops the rest of the chunk."""
        written = 0
        with self._lock:
            fd = log.fileno()
            try:
                room = len(data) if marker else max(0, self.cap - os.fstat(fd).st_size)
                while written < min(room, len(data)):
                    written += os.write(fd, data[written:room])
            except OSError:
                pass
        return 0 if marker else len(data) - written

    def join(self) -> int | None:
        """Wait (bounded) for every process's output to end; the bytes dropped, or None (unknown) while a
        process still holds its pipe (a descendant the run could not end)."""
        for t in self._threads:
            t.join(timeout=JOIN_TIMEOUT_S)
        return None if any(t.is_alive() for t in self._threads) else self.dropped
