"""Watch an output topic as a read_committed reader would, while the run goes on.

A read_committed consumer cannot read past the first record of an open
transaction (the last stable offset). When a transactional worker dies, its
transaction stays open until someone aborts it: at once, when the restarted
worker fences it with the same transactional.id; only after
transaction.timeout.ms, when the restarted worker uses a fresh id. This
watcher records when each record becomes visible, on which partition, and
which worker wrote it (the `worker` field the workers add to each output
value). Workers write each output record to its input's partition, so a dead
transaction blocks exactly the partition it was working on: the stall of a
crash is measured on the crashed record's partition (other partitions, and
other workers, stay readable meanwhile), or on the crashed worker's records
when the crash names no partition (a supervisor's random kill).

The reader assigns itself every partition from the beginning (no group to
join, no rebalance to wait for) and says when it has reached the end of each
once (`wait_ready`): the run starts its workers only then, so a short run is
not over before the reader has fetched anything. A crash before that moment
(the workers started anyway after a long wait) has no stall: the reader may
still have been catching up.
"""

import json

import threading
import time
import uuid

from ..clients import consume

METADATA_WAIT_S = 15.0


class OutputWatcher:
    def __init__(self, bootstrap: str, topic: str):
        self.bootstrap, self.topic = bootstrap, topic
        # (time visible to us, producer's create time in seconds, worker, partition, offset, key)
        self.seen: list[tuple] = []
        self.failed: str | None = None    # why the reader stopped early, if it did
        self._stop = threading.Event()
        self._ready = threading.Event()   # every partition read to its end once (or the reader failed)
        self.ready_at: float | None = None  # when it was (time.time()); None: never
        self._thread = threading.Thread(target=self._run, name="output-watcher", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        c = None
        try:
            from confluent_kafka import Consumer, KafkaError, OFFSET_BEGINNING, TopicPartition
            from ..clients import kafka_client, kafka_logging
            c = Consumer(kafka_client.config(self.bootstrap, {
                "group.id": f"harness-watch-{uuid.uuid4().hex[:8]}", "isolation.level": "read_committed",
                "enable.auto.commit": False, "fetch.wait.max.ms": consume.FETCH_WAIT_MS, "enable.partition.eof": True,
                **kafka_logging.client_config()}))
            unread = set(self._partitions(c))
            c.assign([TopicPartition(self.topic, p, OFFSET_BEGINNING) for p in sorted(unread)])
            while not self._stop.is_set():
                for m in consume.ready(c, 1000, 0.1):
                    if m.error():
                        if m.error().code() == KafkaError._PARTITION_EOF:
                            unread.discard(m.partition())
                            if not unread and not self._ready.is_set():
                                self.ready_at = time.time()
                                self._ready.set()
                        continue
                    self.seen.append((time.time(), m.timestamp()[1] / 1000.0, _worker(m.value()), m.partition(),
                                      m.offset(), m.key().decode(errors="replace") if m.key() is not None else None))
        except Exception as e:  # noqa: BLE001 - a watcher that fails leaves the stall unknown, never breaks a run
            self.failed = str(e)[:200] or type(e).__name__
        finally:
            self._ready.set()
            if c is not None:
                try:
                    c.close()
                except Exception:  # noqa: BLE001 - closing is all that is left to do
                    pass

    def _partitions(self, c) -> list:
        """The topic's partitions; a topic the metadata does not show yet (a cluster's lagging broker) is
        asked for again until METADATA_WAIT_S has passed."""
        from confluent_kafka import KafkaException
        deadline = time.monotonic() + METADATA_WAIT_S
        while True:
            why = ""
            try:
                t = c.list_topics(self.topic, timeout=2).topics.get(self.topic)     # short: stop() waits 10 s
            except KafkaException as e:
                t, why = None, f" ({str(e)[:120]})"
            if t is not None and t.error is None and t.partitions:
                return sorted(t.partitions)
            if t is not None and t.error is not None:
                why = f" ({t.error.str()})"
            if time.monotonic() >= deadline or self._stop.is_set():
                raise RuntimeError(f"topic {self.topic} not found{why}")
            time.sleep(0.2)

    def wait_ready(self, timeout: float) -> bool:
        """Wait until the reader has read every partition to its end once; False when it has not within
        `timeout` seconds or has failed (the run goes on: the reader only says what it saw)."""
        return self._ready.wait(timeout) and self.failed is None

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=10)

    def placed(self) -> dict | None:
        """{(partition, offset): key} of every record this reader saw during the run (for the anomaly
        classes); None when the reader failed (what it saw is then not all it should have)."""
        return None if self.failed else {(s[3], s[4]): s[5] for s in self.seen}

    def reach(self) -> dict | None:
        """What this reader saw, per partition, for the report (and for `harness audit` to recount)."""
        return reach_of(self.placed())

    def stalls(self, crashes: list[dict]) -> list[float | None]:
        """Per crash: seconds until a record of the crashed worker, produced after it, became visible;
        None for a crash before this reader was ready (it may have seen that record late)."""
        return stalls_after(self.seen, crashes, self.ready_at)


def reach_of(placed: dict | None) -> dict | None:
    """{partition: {"records": distinct offsets seen, "first_offset": the lowest, "last_offset": the
    highest}} of a reader's {(partition, offset): key}; None when it is unknown. A read_committed reader
    from the beginning returns every committed record in offset order, so the records it saw between
    those offsets are exactly the committed records there: `harness audit` counts them again and compares."""
    if placed is None:
        return None
    out: dict = {}
    for p, o in placed:
        r = out.setdefault(str(p), {"records": 0, "first_offset": o, "last_offset": o})
        r["records"] += 1
        r["first_offset"] = min(r["first_offset"], o)
        r["last_offset"] = max(r["last_offset"], o)
    return dict(sorted(out.items(), key=lambda kv: int(kv[0])))


def _worker(value: bytes | None) -> str | None:
    try:
        return json.loads(value).get("worker")
    except (TypeError, ValueError, AttributeError):
        return None


def stalls_after(seen: list[tuple], crashes: list, ready_at: float | None = 0.0) -> list[float | None]:
    """`seen` holds (visible_at, created_at[, worker[, partition]]) tuples; `crashes` crash records (time,
    partition, worker) or bare times. Records written before a crash but read late (a reader catching up)
    say nothing about the crash, so only records created after it count; and only those on the crashed
    record's partition, or of the crashed worker when no partition is known. None where no such record
    was seen (the stall is unknown), and for a crash before `ready_at`, when the reader had first read
    every partition to its end (None: it never had), as it may have been catching up then."""
    out: list = []
    for c in crashes:
        if isinstance(c, (int, float)):
            t, worker, partition = c, None, None
        else:
            t, worker, partition = c.get("time"), c.get("worker"), c.get("partition")
        if t is None or ready_at is None or t < ready_at:
            out.append(None)
            continue
        visible = [s[0] for s in seen if s[1] > t and _same_place(s, worker, partition)]
        out.append(round(min(visible) - t, 3) if visible else None)
    return out


def _same_place(s: tuple, worker, partition) -> bool:
    if partition is not None and len(s) >= 4:
        return s[3] == partition
    return worker is None or len(s) < 3 or s[2] == worker
