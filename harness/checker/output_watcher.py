"""Watch an output topic as a read_committed reader would, while the run goes on.

A read_committed consumer cannot read past the first record of an open
transaction (the last stable offset). When a transactional worker dies, its
transaction stays open until someone aborts it: at once, when the restarted
worker fences it with the same transactional.id; only after
transaction.timeout.ms, when the restarted worker uses a fresh id. This
watcher records when each record becomes visible, and which worker wrote it
(the `worker` field the transactional workers add to each output value), so
the report can say how long readers of the crashed worker's own records
stalled after each crash: with several workers, another worker's records stay
visible while the crashed one's partitions are blocked.
"""

import json

import threading
import time
import uuid


class OutputWatcher:
    def __init__(self, bootstrap: str, topic: str):
        self.bootstrap, self.topic = bootstrap, topic
        self.seen: list[tuple] = []   # (time visible to us, producer's create time in seconds, worker)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="output-watcher", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            from confluent_kafka import Consumer
            from .. import kafka_logging
            c = Consumer({"bootstrap.servers": self.bootstrap, "group.id": f"harness-watch-{uuid.uuid4().hex[:8]}",
                          "isolation.level": "read_committed", "auto.offset.reset": "earliest",
                          "enable.auto.commit": False, "fetch.wait.max.ms": 10, **kafka_logging.client_config()})
            c.subscribe([self.topic])
            while not self._stop.is_set():
                for m in c.consume(num_messages=1000, timeout=0.1):
                    if not m.error():
                        self.seen.append((time.time(), m.timestamp()[1] / 1000.0, _worker(m.value())))
            c.close()
        except Exception:  # noqa: BLE001 - a watcher that fails leaves the stall unknown, never breaks a run
            pass

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=10)

    def stalls(self, crashes: list[dict]) -> list[float | None]:
        """Per crash: seconds until a record of the crashed worker, produced after it, became visible."""
        return stalls_after(self.seen, crashes)


def _worker(value: bytes | None) -> str | None:
    try:
        return json.loads(value).get("worker")
    except (TypeError, ValueError, AttributeError):
        return None


def stalls_after(seen: list[tuple], crashes: list) -> list[float | None]:
    """`seen` holds (visible_at, created_at[, worker]) tuples; `crashes` crash records (time, worker) or bare
    times. Records written before a crash but read late (a reader catching up) say nothing about the
    crash, so only records created after it count; and only the crashed worker's own, when known.
    None where no such record was seen (the stall is unknown)."""
    out: list = []
    for c in crashes:
        t, worker = (c, None) if isinstance(c, (int, float)) else (c.get("time"), c.get("worker"))
        if t is None:
            out.append(None)
            continue
        visible = [s[0] for s in seen if s[1] > t and (worker is None or len(s) < 3 or s[2] == worker)]
        out.append(round(min(visible) - t, 3) if visible else None)
    return out
