"""Watch an output topic as a read_committed reader would, while the run goes on.

A read_committed consumer cannot read past the first record of an open
transaction (the last stable offset). When a transactional worker dies, its
transaction stays open until someone aborts it: at once, when the restarted
worker fences it with the same transactional.id; only after
transaction.timeout.ms, when the restarted worker uses a fresh id. This
watcher records when each record becomes visible, so the report can say how
long readers stalled after each crash.
"""

import threading
import time
import uuid


class OutputWatcher:
    def __init__(self, bootstrap: str, topic: str):
        self.bootstrap, self.topic = bootstrap, topic
        self.seen: list[tuple[float, float]] = []   # (time visible to us, producer's create time), seconds
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="output-watcher", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            from confluent_kafka import Consumer
            c = Consumer({"bootstrap.servers": self.bootstrap, "group.id": f"harness-watch-{uuid.uuid4().hex[:8]}",
                          "isolation.level": "read_committed", "auto.offset.reset": "earliest",
                          "enable.auto.commit": False, "fetch.wait.max.ms": 10, "log_level": 3})
            c.subscribe([self.topic])
            while not self._stop.is_set():
                for m in c.consume(num_messages=1000, timeout=0.1):
                    if not m.error():
                        self.seen.append((time.time(), m.timestamp()[1] / 1000.0))
            c.close()
        except Exception:  # noqa: BLE001 - a watcher that fails leaves the stall unknown, never breaks a run
            pass

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=10)

    def stalls(self, crash_times: list[float]) -> list[float]:
        """Per crash: seconds until a record produced after it became visible to read_committed readers."""
        return stalls_after(self.seen, crash_times)


def stalls_after(seen: list[tuple[float, float]], crash_times: list[float]) -> list[float]:
    """`seen` holds (visible_at, created_at) pairs. Records written before a crash but read late (a
    reader catching up) say nothing about the crash, so only records created after it count."""
    out = []
    for t in crash_times:
        visible = [v for v, created in seen if created > t]
        if visible:
            out.append(round(min(visible) - t, 3))
    return out
