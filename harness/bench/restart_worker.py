"""One consumer process of the restart benchmark: `python -m harness.bench.restart_worker ...`.

Started and SIGKILLed only by harness.bench.restart. It joins (or assigns) the
benchmark's one-partition topic with the settings of one restart strategy,
processes `--process` records, committing each one synchronously, then pauses
and idles (still a live member of its group) until it is killed. Its command
line contains both `harness` and `worker`, it dies with its parent, and it
writes JSON lines to `--events`:

  started  the consumer object exists (interpreter, imports and client set-up done)
  first    its first record: offset, and the time it was received
  ready    it has processed and committed its records: `committed` is the next offset to read
"""

import argparse
import json
import os
import sys
import time

POLL_TIMEOUT_S = 0.05
REQUEST_TIMEOUT_S = 15


def emit(path: str, event: str, **fields) -> None:
    line = json.dumps({"event": event, "pid": os.getpid(), "t": time.time(), **fields}) + "\n"
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW, 0o644)
    try:
        os.write(fd, line.encode())
    finally:
        os.close(fd)


def _retrying(call, seconds: float = 30.0):
    """Retry a group request while the coordinator is moving or loading (a freshly started broker)."""
    from confluent_kafka import KafkaException
    deadline = time.monotonic() + seconds
    while True:
        try:
            return call()
        except KafkaException as e:
            if time.monotonic() > deadline or not (e.args[0].retriable() or "coordinator" in str(e).lower()):
                raise
            time.sleep(0.1)


def parse(argv=None):
    ap = argparse.ArgumentParser(prog="harness-bench-restart-worker")
    ap.add_argument("--strategy", required=True)
    ap.add_argument("--bootstrap", required=True)
    ap.add_argument("--topic", required=True)
    ap.add_argument("--group", required=True)
    ap.add_argument("--events", required=True)
    ap.add_argument("--process", type=int, default=5)
    ap.add_argument("--config", default="{}", help="JSON object of librdkafka settings for this strategy")
    ap.add_argument("--manual-assign", action="store_true")
    return ap.parse_args(argv)


def main(argv=None) -> int:
    from ..core.procs import die_with_parent
    die_with_parent()
    args = parse(argv)
    from confluent_kafka import Consumer, KafkaException, TopicPartition, OFFSET_BEGINNING

    from ..clients import kafka_client
    conf = kafka_client.config(args.bootstrap, {
        "group.id": args.group, "enable.auto.commit": False, "enable.auto.offset.store": False,
        "auto.offset.reset": "earliest", "log_level": 3, **json.loads(args.config)})
    c = Consumer(conf)
    emit(args.events, "started")
    tp = TopicPartition(args.topic, 0)
    if args.manual_assign:
        # What the harness workers do: fetch the group's committed offset and the partition's
        # watermarks, assign the partition at the committed offset.
        # The watermark query (the workers use it to know where input ends) also loads the topic's
        # metadata; without it, librdkafka may wait for its 1 s topic scan before the first fetch.
        committed = _retrying(lambda: c.committed([tp], timeout=REQUEST_TIMEOUT_S))[0]
        c.get_watermark_offsets(tp, timeout=REQUEST_TIMEOUT_S)
        if committed.offset < 0:
            committed.offset = OFFSET_BEGINNING
        c.assign([committed])
    else:
        c.subscribe([args.topic])

    done, first = 0, True
    while done < args.process:
        msg = c.poll(POLL_TIMEOUT_S)
        if msg is None:
            continue
        if msg.error():
            raise KafkaException(msg.error())
        if first:
            emit(args.events, "first", offset=msg.offset(), partition=msg.partition())
            first = False
        c.commit(offsets=[TopicPartition(args.topic, msg.partition(), msg.offset() + 1)], asynchronous=False)
        done += 1
        last = msg.offset() + 1
    c.pause(c.assignment())
    emit(args.events, "ready", committed=last, processed=done)
    while True:                   # a live, idle member until the benchmark kills it
        c.poll(0.2)


if __name__ == "__main__":
    sys.exit(main())
