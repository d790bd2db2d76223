"""A worker as a member of a share group (KIP-932): acquire, acknowledge, and know when the queue is done.

A share consumer commits no offsets. Each record it polls is *acquired* under a
time lock; the worker acknowledges it (ACCEPT, RELEASE, REJECT) and commits the
acknowledgements. A record whose lock expires (its worker SIGKILLed) is acquired
again by any member, its delivery count one higher. So the consumer-group story
of the other experiments holds with new words: the ACCEPT is the offset commit.

The worker keeps the run's evidence as every worker does: a crash record at each
kill point (runtime/evidence.py) and events. `accepted` names the (partition,
offset) of each record whose acknowledgement the broker confirmed, with its
delivery count. A crash record also lists what the dying worker `held`: every
record it had acquired and not settled, with its delivery count. They all come
back after their locks, each delivery count one higher, and a record held at the
group's delivery-count limit is archived instead: never delivered again. A queue
is done when the events and the crash log account for every record of the input.

The broker acquires whole record batches whatever the consumer's max.poll.records
(librdkafka 2.16 has no `share.acquire.mode=record_limit`): a crash would hold,
and count a delivery of, every record of the batch. The family's input is
therefore produced one record a batch, and a poll acquires at most a few
(share_facts.py holds these numbers). An acknowledgement the broker refuses (its lock had expired: the
record went to another member) is `commit_lost`, as in a consumer group: its
records come again with no crash record, and the numbers they touch become bounds.

The group's settings are set by the supervisor (share_launcher.py) before the workers join
(share_facts.GROUP_CONFIG): locks of LOCK_MS instead of Kafka's 30 s default, sessions of
SESSION_MS instead of 45 s, earliest start. The broker must allow them
(`group.share.min.record.lock.duration.ms`, `group.share.min.session.timeout.ms`:
the local stack lowers both floors, stack/local_kafka.py).
"""

import sys
import time

from ...clients import kafka_client
from ...runtime.crashlog import crashed_ids
from ...runtime.kafka_calls import REQUEST_TIMEOUT_S, retrying
from ...workload.naming import share_group_of
from .share_facts import POLL_RECORDS, POLL_TIMEOUT_S, QUIET_S, archived_records, limit_of, settled_records

SETTLED_EVENT = {"ACCEPT": "accepted", "RELEASE": "released", "REJECT": "rejected"}   # verb -> its event


class ShareWorker:
    """The share consumer of one worker process, beside the WorkerContext `ctx` it takes its run, events,
    kill switch and Postgres from."""

    def __init__(self, ctx):
        from confluent_kafka import ShareConsumer
        self.ctx = ctx
        self.group = share_group_of(ctx.args.group)
        self.total = self._input_size()
        self.consumer = ShareConsumer(kafka_client.config(ctx.args.bootstrap, {
            "group.id": self.group, "share.acknowledgement.mode": "explicit", "max.poll.records": POLL_RECORDS,
            "log_level": 3}))
        self.held: dict = {}              # (partition, offset) -> record: acquired here, not yet settled
        self.consumer.subscribe([ctx.input_topic])
        self._last_record_at = time.monotonic()
        self._done_checked = 0.0
        ctx.events.emit("started", partitions=[], assignment="share", share_group=self.group)

    def _input_size(self) -> int:
        from confluent_kafka import TopicPartition
        c, topic = self.ctx.consumer, self.ctx.input_topic
        parts = c.list_topics(topic, timeout=REQUEST_TIMEOUT_S).topics[topic].partitions
        total = 0
        for p in parts:
            low, high = retrying(lambda: c.get_watermark_offsets(TopicPartition(topic, p), timeout=REQUEST_TIMEOUT_S))
            total += high - low
        return total

    def poll(self) -> list:
        """The records this poll acquired (each counted as a delivery); a record whose first delivery crashed
        a worker is no planned crash any more, whoever acquires it next."""
        from confluent_kafka import KafkaException
        out = []
        for m in self.consumer.poll(POLL_TIMEOUT_S):
            if m.error():
                raise KafkaException(m.error())
            out.append(m)
        if out:
            self._last_record_at = time.monotonic()
            kill = self.ctx.kill
            if any(kill.planned(m.key().decode()) for m in out):
                kill.already = crashed_ids(kill.log_path)     # another member's crash on it since we started
        for m in out:
            self.ctx.deliver(m)
            self.held[(m.partition(), m.offset())] = m
        return out

    def held_now(self) -> dict:
        """For a crash record: payment id -> [partition, offset, delivery count] of every record held."""
        return {m.key().decode(): [p, o, m.delivery_count()] for (p, o), m in self.held.items()}

    def at(self, point: str, msg, **lists) -> None:
        """The kill switch's `at`, with what this member holds (`held`, read only when it crashes)."""
        self.ctx.kill.at(point, msg, held=self.held_now, **lists)

    def acknowledge(self, msgs, verb: str = "ACCEPT") -> list:
        """Acknowledge `msgs` with `verb` and commit the acknowledgements; the records the broker took.
        Those it refused come again (to any member): a `commit_lost` event names them."""
        from confluent_kafka import AcknowledgeType, KafkaException
        if not msgs:
            return []
        kind = getattr(AcknowledgeType, verb)
        for m in msgs:
            self.consumer.acknowledge(m, kind)
        try:
            result = self.consumer.commit_sync(REQUEST_TIMEOUT_S)
            refused = {tp.partition for tp, err in (result or {}).items() if err is not None}
            why = "; ".join(str(err) for err in (result or {}).values() if err is not None)
        except KafkaException as e:
            refused, why = {m.partition() for m in msgs}, str(e.args[0])
        for m in msgs:
            self.held.pop((m.partition(), m.offset()), None)     # refused: another member's now
        lost = [m for m in msgs if m.partition() in refused]
        done = [m for m in msgs if m.partition() not in refused]
        if lost:
            self.ctx.events.emit("commit_lost", unacked=[m.key().decode() for m in lost], reason=why[:200],
                                 verb=verb)
        if done:
            self.ctx.events.emit(SETTLED_EVENT[verb],
                                 records=[[m.partition(), m.offset(), m.delivery_count()] for m in done])
        return done

    def done(self) -> bool:
        """Every record of the input is acknowledged, by the events of all members (read at most once a
        second); or this worker has polled nothing for QUIET_S and stops waiting (said in an event)."""
        now = time.monotonic()
        if now - self._done_checked < 1.0:
            return False
        self._done_checked = now
        settled = settled_records(self.ctx.events.path) | archived_records(self.ctx.kill.log_path,
                                                                           limit_of(self.ctx.options))
        if len(settled) >= self.total:
            return True
        if now - self._last_record_at > QUIET_S:
            self.ctx.events.emit("queue_quiet", settled=len(settled), total=self.total, seconds=round(QUIET_S, 1))
            print(f"worker {self.ctx.worker}: no record for {QUIET_S:.0f} s with {len(settled)} of {self.total} "
                  f"acknowledgements announced; leaving", file=sys.stderr)
            return True
        return False

    def close(self) -> None:
        try:
            self.consumer.close()
        except Exception as e:  # noqa: BLE001 - closing after the work is done: said, not fatal
            print(f"worker {self.ctx.worker}: share consumer close: {e}", file=sys.stderr)
