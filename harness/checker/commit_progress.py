"""The run's progress as its consumer group commits it, sampled beside the supervisor.

The progress bar and the report's timeline come from the committed offsets of the run's group, read
here in a thread of their own: the supervisor's loop must never wait for a broker.
"""

from __future__ import annotations

import threading
import time

from ..clients import kafka_client, kafka_logging
from ..stack.stack import Stack
from ..workload.naming import RunNames


class Progress:
    """Samples the run group's committed offsets in a thread: drives the progress bar and the timeline.

    The sampling runs beside the supervisor, never inside its loop: a committed-offset fetch waits
    for pending transactional offsets (KIP-447), so it can block for as long as a dead
    transaction stays open, and the supervisor must keep reacting meanwhile.
    """

    SAMPLE_EVERY_S = 0.5

    def __init__(self, stack: Stack, names: RunNames, partitions: int, total: int, ui=None):
        from confluent_kafka import Consumer, TopicPartition
        self.c = Consumer(kafka_client.config(stack.bootstrap_servers, {
            "group.id": names.group, "enable.auto.commit": False, **kafka_logging.client_config()}))
        self.tps = [TopicPartition(names.input_topic, p) for p in range(partitions)]
        self.total, self.ui, self.samples, self.t0 = total, ui, [], time.time()
        self.done = 0
        self.committed: dict | None = None     # partition -> committed offset, at the last good sample
        self.first_commit_at: float | None = None   # when a sample first saw any committed offset
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, name="progress", daemon=True)
        self._thread.start()

    def _take_sample(self) -> None:
        try:
            got = self.c.committed(self.tps, timeout=5)
        except Exception:  # noqa: BLE001 - progress is best effort
            return
        if any(tp.error for tp in got):
            return
        now = time.time()
        self.committed = {tp.partition: max(0, tp.offset) for tp in got}
        self.done = sum(self.committed.values())
        if self.done and self.first_commit_at is None:
            self.first_commit_at = now
        self.samples.append([round(time.time() - self.t0, 3), self.done])

    def _sample(self) -> None:
        while not self._stop.wait(self.SAMPLE_EVERY_S):
            self._take_sample()

    def __call__(self, info: dict) -> None:
        if self.ui:
            self.ui(self.done, self.total, info.get("crashes", 0), info.get("restarts", 0))

    def close(self) -> None:
        """Stop sampling and take a final sample; `committed` is None if it could not be read."""
        self._stop.set()
        self._thread.join(timeout=10)
        self.committed = None
        self._take_sample()
        self.c.close()


class NoProgress:
    """Stands in for Progress when the run stopped before it started."""
    samples: list = []
    committed = None
    t0 = time.time()

    def __call__(self, info: dict) -> None:
        pass

    def close(self) -> None:
        pass
