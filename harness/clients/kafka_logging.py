"""librdkafka's log lines from the harness's own Kafka clients: all to a file, a trickle to stderr.

During a broker outage every client logs each failed connect, about ten
lines a second in all, which buries the harness's own messages and the
progress bar. confluent_kafka accepts a `logging.Logger` as the `logger`
entry of a client's config; `client_config()` returns such an entry for a
logger that writes every line to a file (kafka-clients.log under the state
folder, or wherever `configure` points it) and lets at most one line per
distinct message per `every_s` seconds reach stderr, saying how many like it
were held back. Messages that differ only in numbers (broker ids, counters,
milliseconds, client names like rdkafka#producer-3) count as the same message.

The lines reach the logger only when the client is polled (poll, flush,
consume), from the polling thread, so nothing is printed from librdkafka's
own threads.
"""

from __future__ import annotations

import logging
import os
import re
import sys
import threading
import time
from pathlib import Path

LOGGER_NAME = "harness.kafka"
DEFAULT_EVERY_S = 30.0
FILE_NAME = "kafka-clients.log"
# librdkafka's syslog level for the clients: info and worse reach the file, warnings and worse stderr.
CLIENT_LOG_LEVEL = 6
MAX_KEYS = 1000          # distinct messages remembered; the oldest is forgotten past this
# Warnings that are a client's normal retry, not a problem: the file has them, the terminal does not (a fresh
# broker still loading its coordinators answers the first producer so, and librdkafka words it as an error; a
# producer fencing a stopped worker's transactional.id is told so while the broker aborts that transaction).
ROUTINE = ("Coordinator load in progress: retrying",
           "another concurrent operation on the same transaction was ongoing: retrying")

_lock = threading.RLock()


def message_key(text: str) -> str:
    """What makes two lines "the same message": their text with every number replaced."""
    return re.sub(r"\d+", "#", text)


class RateLimitedHandler(logging.Handler):
    """Writes a record to `stream` unless a line with the same key was written less than `every_s` ago.

    The next line of a key that had lines held back says how many; `close()` reports what is
    still held back, so no count is lost at exit.
    """

    def __init__(self, stream=None, every_s: float = DEFAULT_EVERY_S, clock=time.monotonic,
                 level: int = logging.WARNING, prefix: str = "kafka: ", where: str | None = None):
        super().__init__(level)
        self._stream, self.every_s, self.clock, self.prefix, self.where = stream, every_s, clock, prefix, where
        self._seen: dict[str, list] = {}     # key -> [time last shown, held back since, last text held back]

    @property
    def stream(self):
        return self._stream if self._stream is not None else sys.stderr

    def emit(self, record: logging.LogRecord) -> None:
        try:
            text = record.getMessage()
            if any(r in text for r in ROUTINE):
                return
            key, now = message_key(text), self.clock()
            seen = self._seen.get(key)
            if seen is not None and now - seen[0] < self.every_s:
                seen[1] += 1
                seen[2] = text
                return
            line = self.prefix + text
            if seen is not None and seen[1]:
                line += f" ({self._held(seen[1], now - seen[0])})"
            self._seen.pop(key, None)
            self._seen[key] = [now, 0, None]
            while len(self._seen) > MAX_KEYS:
                self._seen.pop(next(iter(self._seen)))
            self.stream.write(line + "\n")
            self.stream.flush()
        except Exception:  # noqa: BLE001 - logging must never break a client
            pass

    def _held(self, n: int, seconds: float) -> str:
        s = f"{n} more like this held back in the last {seconds:.0f} s"
        return s + (f"; all lines are in {self.where}" if self.where else "")

    def pending(self) -> list[str]:
        """One line per message that has lines held back since it was last shown."""
        now = self.clock()
        return [f"{self.prefix}{text} ({self._held(n, now - shown)})"
                for shown, n, text in self._seen.values() if n]

    def close(self) -> None:
        self.acquire()
        try:
            lines = self.pending()
            self._seen.clear()
            if lines:
                try:
                    self.stream.write("\n".join(lines) + "\n")
                    self.stream.flush()
                except Exception:  # noqa: BLE001 - stderr may already be closed at exit
                    pass
        finally:
            self.release()
        super().close()


class _FileHandler(logging.FileHandler):
    """A FileHandler that creates its folder on the first line and goes quiet if it cannot write."""

    def __init__(self, path: Path):
        super().__init__(path, delay=True, encoding="utf-8")
        self.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(message)s"))
        self._broken = False

    def _open(self):
        """The log file, opened without following a link planted under its name."""
        fd = os.open(self.baseFilename, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
        return open(fd, self.mode, encoding=self.encoding)

    def emit(self, record: logging.LogRecord) -> None:
        if self._broken:
            return
        try:
            if self.stream is None:
                Path(self.baseFilename).parent.mkdir(parents=True, exist_ok=True)
            super().emit(record)
        except OSError:
            self._broken = True

    def handleError(self, record) -> None:  # noqa: N802 - logging's name
        self._broken = True


def default_log_file() -> Path:
    from ..core.paths import state_dir
    return state_dir() / "logs" / FILE_NAME


def configure(log_file: Path | None = None, every_s: float = DEFAULT_EVERY_S, stream=None,
              clock=time.monotonic) -> logging.Logger:
    """(Re)configure the shared logger: every line to `log_file`, a rate-limited trickle to `stream`."""
    log_file = Path(log_file) if log_file is not None else default_log_file()
    logger = logging.getLogger(LOGGER_NAME)
    with _lock:
        for h in list(logger.handlers):
            logger.removeHandler(h)
            h.close()
        logger.setLevel(logging.DEBUG)
        logger.propagate = False
        logger.addHandler(_FileHandler(log_file))
        logger.addHandler(RateLimitedHandler(stream, every_s, clock, where=str(log_file)))
    return logger


def kafka_logger() -> logging.Logger:
    """The shared logger, configured with the defaults on first use."""
    logger = logging.getLogger(LOGGER_NAME)
    with _lock:
        return logger if logger.handlers else configure()


def client_config() -> dict:
    """Entries to merge into a confluent_kafka client's config: `{**base, **client_config()}`."""
    return {"logger": kafka_logger(), "log_level": CLIENT_LOG_LEVEL}
