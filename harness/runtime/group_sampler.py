"""The consumer group's own timeline, sampled: its members and their partitions, its committed offsets, new effects.

A consumer that subscribes through the group decides itself which partitions
it reads; only the group knows who owns what. A thread asks the broker a few
times a second (the admin API's describe-consumer-groups, and the committed
offsets through a consumer that never subscribes: it must not join the group) and reads the ledger rows inserted since its last look (their insert
times, by partition: an effect shows work before its offset is committed).
Each sample is one JSON line of `group.jsonl` in the run folder, read back by
checker/group_timeline.py for the report; the supervisor's thread reads the
samples live to decide which workers a random kill may strike.

Sampling is best effort: a call that fails or times out leaves that part of
the sample None (unknown), and the next sample asks again.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

from . import crashlog

SAMPLE_EVERY_S = 0.2
CALL_TIMEOUT_S = 5.0
LEDGER_BATCH = 20_000


def append(path: Path, entry: dict) -> None:
    """One line of the timeline (two threads append: crashlog's single write keeps lines whole), not fsynced."""
    crashlog.append(path, entry, sync=False)


class GroupSampler:
    def __init__(self, admin_config: dict, group: str, topic: str, partitions: int, path: Path,
                 ledger_reader=None):
        from confluent_kafka import Consumer
        from confluent_kafka.admin import AdminClient
        self.group, self.topic, self.partitions, self.path = group, topic, partitions, path
        self.admin = AdminClient(admin_config)
        self.reader = Consumer({**admin_config, "group.id": group, "enable.auto.commit": False,
                                "isolation.level": "read_uncommitted"})
        self.ledger_reader = ledger_reader          # after_id -> [(row id, partition, epoch seconds)] or None
        self.samples: list[dict] = []
        self.protocol: str | None = None
        self._effects: dict[int, float] = {}
        self._ledger_id = 0
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="group-sampler", daemon=True)

    def start(self) -> "GroupSampler":
        self._thread.start()
        return self

    def snapshot(self, start: int = 0) -> list[dict]:
        """The samples from index `start` on (the supervisor's loop asks for the new ones only)."""
        with self._lock:
            return self.samples[start:]

    def _members(self):
        got = self.admin.describe_consumer_groups([self.group], request_timeout=CALL_TIMEOUT_S)[self.group]
        d = got.result(timeout=CALL_TIMEOUT_S + 1)
        kind = getattr(getattr(d, "type", None), "name", None)
        if kind and kind != "UNKNOWN":
            self.protocol = kind.lower()
        members = [{"member": m.member_id, "client": m.client_id,
                    "partitions": sorted(tp.partition for tp in (m.assignment.topic_partitions or [])
                                         if tp.topic == self.topic)} for m in d.members]
        return members, getattr(getattr(d, "state", None), "name", None)

    def _committed(self) -> dict:
        # A consumer of the group that never subscribes (so never a member), not the admin API's
        # list-consumer-group-offsets: librdkafka 2.16's admin client crashed the process (SIGSEGV in
        # rd_kafka_cgrp_op, from its OffsetFetch response handler) when a fresh broker answered it
        # "coordinator load in progress". read_uncommitted: never wait for pending transactional offsets.
        from confluent_kafka import TopicPartition
        got = self.reader.committed([TopicPartition(self.topic, p) for p in range(self.partitions)],
                                    timeout=CALL_TIMEOUT_S)
        if any(tp.error for tp in got):
            raise RuntimeError("offsets unreadable")
        return {tp.partition: max(0, tp.offset) for tp in got}

    def _new_effects(self) -> dict | None:
        if self.ledger_reader is None:
            return None
        rows = self.ledger_reader(self._ledger_id, LEDGER_BATCH)
        if rows is None:
            return None
        for row_id, partition, t in rows:
            self._ledger_id = max(self._ledger_id, row_id)
            if partition is not None and t is not None and t > self._effects.get(partition, 0.0):
                self._effects[partition] = t
        return dict(self._effects)

    def sample(self) -> dict:
        t = time.time()
        out: dict = {"t": round(t, 4), "members": None, "state": None, "committed": None, "effects": None}
        # The commits first, right after `t`: the sample a death wakes must show where the dead worker's
        # commits stood before its successor (which starts after the death) commits anything.
        try:
            out["committed"] = self._committed()
        except Exception:  # noqa: BLE001 - unknown for this sample; asked again at the next
            pass
        try:
            out["members"], out["state"] = self._members()
        except Exception:  # noqa: BLE001
            pass
        out["protocol"] = self.protocol
        try:
            out["effects"] = self._new_effects()
        except Exception:  # noqa: BLE001
            pass
        with self._lock:
            self.samples.append(out)
        try:
            append(self.path, out)
        except OSError:
            pass
        return out

    def poke(self) -> None:
        """Sample now (a worker just died: the sample right after its death holds all its commits)."""
        self._wake.set()

    def _loop(self) -> None:
        while not self._stop.is_set():
            began = time.monotonic()
            self._wake.clear()
            self.sample()
            self._wake.wait(max(0.0, SAMPLE_EVERY_S - (time.monotonic() - began)))

    def session_timeout_ms(self) -> int | None:
        """The broker's session timeout for the consumer protocol (KIP-848: the broker owns it); None for the
        classic protocol, whose session timeout each client chooses and the admin API does not show."""
        if self.protocol != "consumer":
            return None
        from confluent_kafka.admin import ConfigResource
        try:
            broker = next(iter(self.admin.list_topics(timeout=CALL_TIMEOUT_S).brokers))
            res = ConfigResource(ConfigResource.Type.BROKER, str(broker))
            got = self.admin.describe_configs([res], request_timeout=CALL_TIMEOUT_S)[res].result(CALL_TIMEOUT_S + 1)
            return int(got["group.consumer.session.timeout.ms"].value)
        except Exception:  # noqa: BLE001 - unknown
            return None

    def close(self) -> None:
        """Stop, and take one last sample: the commits after the last kill."""
        self._stop.set()
        self._wake.set()
        self._thread.join(timeout=2 * CALL_TIMEOUT_S + 5)
        if not self._thread.is_alive():
            self.sample()
            try:
                append(self.path, {"session_timeout_ms": self.session_timeout_ms(), "protocol": self.protocol})
            except OSError:
                pass
            self.reader.close()
