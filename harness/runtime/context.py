"""What every worker needs: its consumer, its Postgres connection, its kill switch.

Workers use manual `assign()` of a fixed set of partitions per worker slot,
never group subscription. That choice is what makes a killed worker resume in
well under a second: there is no group membership to time out (45 s session
timeout by default) and no rebalance, so a restarted worker simply fetches its
slot's committed offsets and goes on. It also keeps the predictions exact:
without rebalances, only our planned crashes cause redeliveries. Offsets are
still committed to the run's consumer group, where the checker and the
supervisor read them.

With `--assignment group` (the consumer experiments only) workers instead
subscribe as members of the run's group: see group.py, whose GroupMember is
WorkerContext's base class. What a worker leaves for others to read (its
events, its crash record) is evidence.py.
"""

import json
import os
import sys
import time
from pathlib import Path

from ..clients import consume, kafka_client
from .client_faults import ClientFaults
from .crashplan import CrashPlan
from ..core.options import worker_options
from ..workload.sqlnames import table_identifier as table_ident
from .evidence import Events, KillSwitch, ids
from .group import GROUP_SETTINGS, GroupMember
from .history import History
from .kafka_calls import REQUEST_TIMEOUT_S, retrying

# Each poll waits at most this long for records; short, so the end of input is noticed quickly.
POLL_TIMEOUT_S = 0.1
# A partition with records left that yields none for this long is stalled in the client (seen once in CI:
# after its leader was SIGKILLed, a worker's input partition yielded nothing for 10 minutes while the
# cluster served everyone else). The worker then seeks it to its own next offset, which restarts
# librdkafka's fetch state for it without skipping or repeating a record; after STALL_RESEEKS such
# seeks it gives up and exits (an unplanned death, said as one, never a silent hang).
FETCH_STALL_S = 15.0
STALL_RESEEKS = 6


def consumer_settings(args, options: dict, plan, consumer: dict | None = None) -> dict:
    """A worker's consumer config: its run's group and isolation, `options` the experiment declared
    (assignment, group protocol, auto-commit interval), `consumer` the settings an experiment puts
    instead of ours. A worker whose partitions move under it (its group hands them out, or a fault in
    `plan` seeks or moves their leader) keeps idle fetches short (harness/clients/consume.py says why)."""
    group = options.get("assignment") == "group"
    moves = group or (plan is not None and plan.partitions_move)
    conf = kafka_client.config(args.bootstrap, {
        "group.id": args.group, "enable.auto.commit": False, "enable.auto.offset.store": False,
        "auto.offset.reset": "earliest", "fetch.wait.max.ms": consume.fetch_wait_ms(moves),
        "isolation.level": args.isolation, "log_level": 3, **(consumer or {})})
    if options.get("auto_commit_interval_ms"):
        conf["auto.commit.interval.ms"] = options["auto_commit_interval_ms"]
    protocol = options.get("group_protocol")
    if group:
        conf.update(GROUP_SETTINGS[protocol or "classic"])
    elif protocol:                    # fixed partitions (the eos family): the client's protocol alone
        conf["group.protocol"] = protocol
    return conf


class WorkerContext(GroupMember):
    def __init__(self, args, consumer: dict | None = None):
        """`consumer`: settings the experiment declares instead of ours (auto-commit's client defaults)."""
        from confluent_kafka import Consumer

        self.activate(args)
        self.group_mode = self.option("assignment") == "group"
        self.consumer = Consumer(consumer_settings(args, self.options, self.plan, consumer))
        self.high: dict = {}
        self.committed: dict = {}
        self.positions: dict = {}
        self.pending: list = []           # group mode: records applied and not yet committed (the loop's own list)
        self._topic_high: dict = {}       # group mode: every partition's end, to know when the group is done
        self._group_done_checked = 0.0
        self._closing = False             # close() has begun: a rebalance it delivers is not ours to serve
        self._pg = None
        self._first = False
        self._last_record_at = time.monotonic()
        self._reseeks = 0
        self.prepared: dict = {}          # what a warm spare's experiment prepared (Experiment.warm_up)

    def activate(self, args) -> None:
        """Take this attempt's arguments; read the crash log as it is now (a standby reads it late)."""
        self.args = args
        self.options = worker_options(getattr(args, "option", None) or [])
        self.worker = args.worker
        self.attempt = args.attempt
        self.commit_every = args.commit_every
        self.input_topic = args.input_topic
        self.events = Events(Path(args.events), args.worker, args.attempt)
        self.history = History(getattr(args, "history", None), args.worker, args.attempt,
                               transactional_id=getattr(args, "transactional_id", None))
        self._last_record_at = time.monotonic()      # a standby's wait for its turn is no stall
        self.plan = plan = CrashPlan.load(Path(args.crash_plan)) if args.crash_plan else None
        self.kill = KillSwitch(plan, Path(args.crash_log), args.worker, args.attempt, args.experiment)
        self.kill.history = self.history       # its delivery reports written before a planned death
        self.kill.events = self.events
        self.client_faults = ClientFaults(plan, self.events, args.worker, args.attempt)

    def option(self, name: str):
        """A run option the experiment declared for its workers (harness/core/options.py); None when not given."""
        return self.options.get(name)

    def warm_up(self) -> None:
        """What a standby does before it is needed: connect to Kafka and Postgres (no offsets, no fencing)."""
        self.consumer.list_topics(self.input_topic, timeout=REQUEST_TIMEOUT_S)
        if self.args.ledger:
            self.pg.execute("select 1")

    def assign(self) -> None:
        """Fetch this slot's committed offsets and assign its partitions there (group mode: subscribe).

        Transactional workers must call this only after init_transactions(): the
        committed-offset fetch waits for pending transactional offsets (KIP-447),
        and a dead predecessor's open transaction is aborted only by that fencing.
        """
        from confluent_kafka import TopicPartition, OFFSET_BEGINNING
        if self.group_mode:
            return self._subscribe()
        tps = [TopicPartition(self.input_topic, p) for p in self.args.partitions]
        committed = retrying(lambda: self.consumer.committed(tps, timeout=REQUEST_TIMEOUT_S))
        for tp in committed:
            low, high = retrying(lambda: self.consumer.get_watermark_offsets(
                TopicPartition(self.input_topic, tp.partition), timeout=REQUEST_TIMEOUT_S))
            self.high[tp.partition] = high
            self.committed[tp.partition] = tp.offset if tp.offset >= 0 else low
            if tp.offset < 0:
                tp.offset = OFFSET_BEGINNING
        self.consumer.assign(committed)
        self.positions = dict(self.committed)     # next offset to process, per partition
        self.history.positions("assign", self.input_topic, self.committed)
        self.events.emit("started", partitions=list(self.args.partitions),
                         offsets={str(p): o for p, o in self.committed.items()})

    # -- Kafka -----------------------------------------------------------------
    def poll(self, max_messages: int) -> list:
        from confluent_kafka import KafkaException
        msgs = consume.ready(self.consumer, max_messages, POLL_TIMEOUT_S)
        out = []
        for m in msgs:
            if m.error():
                raise KafkaException(m.error())
            out.append(m)
            self.positions[m.partition()] = m.offset() + 1
        if out:
            self.history.poll(self.input_topic, out)
            self._last_record_at = time.monotonic()
            if not self._first:
                self._first = True
                self.events.emit("first_message", message_id=out[0].key().decode())
        elif time.monotonic() - self._last_record_at > FETCH_STALL_S and not self.at_end():
            self._unstall()
        return out

    def _unstall(self) -> None:
        """Seek every partition that has records left to this worker's next offset in it (see FETCH_STALL_S)."""
        from confluent_kafka import KafkaException, TopicPartition
        waited = round(time.monotonic() - self._last_record_at, 1)
        behind = {p: pos for p, pos in self.positions.items() if pos < self.high.get(p, 0)}
        self._reseeks += 1
        self.events.emit("fetch_stalled", seconds=waited, positions={str(p): o for p, o in behind.items()},
                         reseek=self._reseeks)
        print(f"worker {self.worker}: no record for {waited} s with partitions {sorted(behind)} behind their end; "
              f"seeking them to their next offsets ({self._reseeks} of {STALL_RESEEKS})", file=sys.stderr)
        if self._reseeks > STALL_RESEEKS:
            raise RuntimeError(f"partitions {sorted(behind)} yielded no record for {waited} s after "
                               f"{STALL_RESEEKS} seeks: giving up")
        self.history.positions("seek", self.input_topic, behind)
        for p, pos in behind.items():
            try:
                self.consumer.seek(TopicPartition(self.input_topic, p, pos))
            except KafkaException as e:
                print(f"worker {self.worker}: seek of partition {p} refused: {e}", file=sys.stderr)
        self._last_record_at = time.monotonic()

    def deliver(self, msg):
        """Count a record as delivered to this mode's per-record step (the report's `deliveries`)."""
        self.kill.delivered += 1
        return msg

    def offsets_after(self, msgs) -> list:
        from confluent_kafka import TopicPartition
        last = {}
        for m in msgs:
            last[m.partition()] = max(last.get(m.partition(), -1), m.offset())
        return [TopicPartition(self.input_topic, p, o + 1) for p, o in last.items()]

    def commit(self, msgs) -> None:
        """Commit, synchronously, the offsets just past `msgs`."""
        if not msgs:
            return
        offsets = self.offsets_after(msgs)
        asked = {tp.partition: tp.offset for tp in offsets}
        from confluent_kafka import KafkaException
        self.history.positions("commit-begin", self.input_topic, asked)
        try:
            self.consumer.commit(offsets=offsets, asynchronous=False)
        except KafkaException as e:
            self.history.commit_error(self.input_topic, asked, e.args[0])
            if not self.group_mode:
                raise
            # Refused mid-rebalance (the generation moved on): the partition's next owner redelivers them.
            self.events.emit("commit_lost", unacked=ids(msgs), reason=str(e.args[0])[:200])
            return
        self.history.positions("commit", self.input_topic, asked)
        self.mark_committed(offsets)

    def mark_committed(self, offsets) -> None:
        for tp in offsets:
            if tp.partition in self.committed:
                self.committed[tp.partition] = max(self.committed[tp.partition], tp.offset)

    def refresh_committed(self) -> None:
        """Read this slot's committed offsets from the broker (for a consumer that does not commit itself)."""
        from confluent_kafka import TopicPartition
        got = self.consumer.committed([TopicPartition(self.input_topic, p) for p in self.args.partitions],
                                      timeout=REQUEST_TIMEOUT_S)
        for tp in got:
            if tp.error is None and tp.offset >= 0:
                self.committed[tp.partition] = tp.offset

    def finished(self, workers: list[str]) -> bool:
        """True when every named worker slot has said `done` (it finished its work and exits)."""
        if not workers:
            return True
        done = set()
        try:
            with open(self.events.path, "rb") as f:
                for line in f:
                    if b'"done"' in line:
                        try:
                            done.add(json.loads(line).get("worker"))
                        except ValueError:
                            continue
        except OSError:
            return False
        return set(workers) <= done

    def at_end(self) -> bool:
        """Every assigned record has been delivered to this worker."""
        return all(self.positions.get(p, 0) >= h for p, h in self.high.items())

    def caught_up(self) -> bool:
        """Every assigned record is committed: the worker's job is done (group mode: the group's whole input)."""
        if self.group_mode:
            return all(self.committed[p] >= h for p, h in self.high.items()) and self._group_caught_up()
        return all(self.committed[p] >= h for p, h in self.high.items())

    def rewind(self) -> None:
        """Seek back to the committed offsets (after an aborted transaction Kafka does not rewind for us)."""
        from confluent_kafka import TopicPartition
        self.history.positions("seek", self.input_topic, self.committed)
        for p, off in self.committed.items():
            self.consumer.seek(TopicPartition(self.input_topic, p, off))
            self.positions[p] = off

    # -- Postgres --------------------------------------------------------------
    @property
    def pg(self):
        if self._pg is None:
            import psycopg
            self._pg = psycopg.connect(os.environ["HARNESS_WORKER_DSN"], autocommit=True, connect_timeout=10)
        return self._pg

    def _insert_ledger_row(self, msg) -> None:
        from psycopg import sql
        self.pg.execute(sql.SQL("insert into {} (message_id, amount, worker, attempt) values (%s, %s, %s, %s)")
                        .format(table_ident(self.args.ledger)),
                        (msg.key().decode(), amount_of(msg), self.worker, self.attempt))

    def apply_effect(self, msg) -> None:
        """The effect: one ledger row, committed on its own (a charge)."""
        self._insert_ledger_row(msg)

    def apply_effect_deduped(self, msg, inside=None) -> bool:
        """The effect guarded by the dedupe table, both in ONE Postgres transaction. True if applied.
        `inside()` runs between the key and the effect, with the transaction open (a kill point)."""
        from psycopg import sql
        msg_id = msg.key().decode()
        with self.pg.transaction():
            row = self.pg.execute(
                sql.SQL("insert into {} as d (message_id) values (%s) "
                        "on conflict (message_id) do update set hits = d.hits + 1 returning d.hits")
                .format(table_ident(self.args.dedupe)), (msg_id,)).fetchone()
            if row[0] != 0:
                return False
            if inside:
                inside()
            self._insert_ledger_row(msg)
            return True

    def close(self) -> None:
        import resource
        self.events.emit("done", delivered=self.kill.delivered,
                         max_rss_kb=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)
        self._closing = True
        self.history.close()
        try:
            self.consumer.close()
        finally:
            if self._pg is not None:
                self._pg.close()


def amount_of(msg) -> int:
    try:
        return int(json.loads(msg.value())["amount"])
    except (ValueError, KeyError, TypeError):
        return 0
