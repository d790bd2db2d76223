"""`--assignment group`: a worker as a member of the run's consumer group (the consumer experiments only).

Instead of assigning its slot's partitions, the worker subscribes as a member
of the run's group (`--group-protocol classic`, eager range assignment with a
1 s session, or `consumer`, KIP-848), so partitions move when workers die and
return. Each assignment and revocation is an event; on revocation the worker
first commits what it applied on the revoked partitions (at-least-once done
right), and what it could not commit (a lost assignment, a commit refused
mid-rebalance) is logged as `commit_lost` with those ids: they come again
without a crash record, so the predictions they touch become bounds (see
predictors.py).

`GroupMember` holds these methods of WorkerContext (its one base class), apart
from context.py so that the assigned-partition worker and the group member
read as two stories. They use the WorkerContext's consumer, events, topic and
offsets.
"""

import time

from .evidence import ids
from .kafka_calls import REQUEST_TIMEOUT_S, retrying

# --assignment group: how a member joins. Classic: eager range assignment, a dead member noticed after 1 s
# (the broker allows 500 ms). Consumer (KIP-848): the broker owns session and assignment.
GROUP_SETTINGS = {
    "classic": {"group.protocol": "classic", "session.timeout.ms": 1000, "heartbeat.interval.ms": 250,
                "partition.assignment.strategy": "range"},
    "consumer": {"group.protocol": "consumer"},
}


class GroupMember:
    """The group-membership methods of WorkerContext. They use what WorkerContext sets up: consumer,
    input_topic, events, high, committed, positions, pending, _topic_high, _group_done_checked, _closing
    and offsets_after()."""

    def _subscribe(self) -> None:
        from confluent_kafka import TopicPartition
        md = self.consumer.list_topics(self.input_topic, timeout=REQUEST_TIMEOUT_S).topics[self.input_topic]
        for p in md.partitions:
            self._topic_high[p] = retrying(lambda: self.consumer.get_watermark_offsets(
                TopicPartition(self.input_topic, p), timeout=REQUEST_TIMEOUT_S))[1]
        self.consumer.subscribe([self.input_topic], on_assign=self._on_assign, on_revoke=self._on_revoke,
                                on_lost=self._on_lost)
        self.events.emit("started", partitions=[], assignment="group")

    def _on_assign(self, consumer, partitions) -> None:
        if getattr(self, "_closing", False):
            # An assignment that close() delivers while it leaves the group: nothing will be read from it,
            # and the handle being destroyed refuses every request (a worker that had finished died here
            # with _DESTROY, an exit 1 counted as an unplanned death).
            return
        got = retrying(lambda: consumer.committed(partitions, timeout=REQUEST_TIMEOUT_S)) if partitions else []
        for tp in got:
            self.high[tp.partition] = self._topic_high[tp.partition]
            self.committed[tp.partition] = tp.offset if tp.offset >= 0 else 0
            self.positions[tp.partition] = self.committed[tp.partition]
        # "join": where the group's consumer may start at the earliest (it fetches its offsets again itself)
        self.history.positions("join", self.input_topic, {tp.partition: self.committed[tp.partition] for tp in got})
        self.events.emit("assigned", partitions=sorted(tp.partition for tp in partitions))

    def _on_revoke(self, consumer, partitions) -> None:
        gone = {tp.partition for tp in partitions}
        mine = [m for m in self.pending if m.partition() in gone]
        if mine:
            offsets = self.offsets_after(mine)
            asked = {tp.partition: tp.offset for tp in offsets}
            self.history.positions("commit-begin", self.input_topic, asked)
            try:
                consumer.commit(offsets=offsets, asynchronous=False)
            except Exception as e:  # noqa: BLE001 - the new owner redelivers them: say which
                self.history.commit_error(self.input_topic, asked, e.args[0] if e.args else e)
                self.events.emit("commit_lost", unacked=ids(mine), reason=str(e)[:200])
            else:
                self.history.positions("commit", self.input_topic, asked)
        self._forget(gone, mine)
        self.events.emit("revoked", partitions=sorted(gone), committed_on_revoke=len(mine))

    def _on_lost(self, consumer, partitions) -> None:
        gone = {tp.partition for tp in partitions}
        mine = [m for m in self.pending if m.partition() in gone]
        if mine:
            self.events.emit("commit_lost", unacked=ids(mine), reason="assignment lost")
        self._forget(gone, mine)
        self.events.emit("revoked", partitions=sorted(gone), lost=True)

    def _forget(self, gone: set, mine: list) -> None:
        self.history.revoked(self.input_topic, gone)
        for m in mine:
            self.pending.remove(m)
        for p in gone:
            self.high.pop(p, None)
            self.committed.pop(p, None)
            self.positions.pop(p, None)

    def _group_caught_up(self) -> bool:
        """Group mode: the whole input is committed by the group (checked at most twice a second)."""
        from confluent_kafka import TopicPartition
        now = time.monotonic()
        if now - self._group_done_checked < 0.5:
            return False
        self._group_done_checked = now
        try:
            got = self.consumer.committed([TopicPartition(self.input_topic, p) for p in self._topic_high],
                                          timeout=REQUEST_TIMEOUT_S)
        except Exception:  # noqa: BLE001 - asked again at the next check
            return False
        return all(tp.offset >= self._topic_high[tp.partition] for tp in got)
