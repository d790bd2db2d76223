"""The worker side of producer: the paced producer under test, its delivery log, its input commits.
"""

from __future__ import annotations

import os
import time

RATE_PER_S = 50
POLL_BATCH = 100

def producer_loop(ctx) -> None:
    """Consume the payments, produce each (paced) with the producer under test, log every delivery report,
    then commit the input offsets once every report is in."""
    from ...clients import kafka_client
    from ...checker import deliveries

    conf = ctx.option("producer")
    fd = os.open(ctx.args.delivery_log, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW, 0o644)
    # The cluster's client settings (e.g. credentials) under the settings the run tests, which win.
    producer = kafka_client.connected_producer(ctx.args.bootstrap, {"log_level": 3, **conf}, ctx.args.output_topic)

    def report(err, msg):
        deliveries.append(fd, msg.key().decode(), err, msg.partition(), msg.offset())
        ctx.history.on_delivery()(err, msg)    # the send in the history too: the anomaly classes check it

    ctx.assign()
    done: list = []
    next_at = time.monotonic()
    try:
        while not ctx.at_end():
            for msg in ctx.poll(POLL_BATCH):
                ctx.deliver(msg)
                next_at += 1.0 / RATE_PER_S
                while time.monotonic() < next_at:
                    producer.poll(min(0.01, max(0.0, next_at - time.monotonic())))
                while True:
                    try:
                        producer.produce(ctx.args.output_topic, key=msg.key(), value=msg.value(),
                                         partition=msg.partition(), on_delivery=report)
                        break
                    except BufferError:
                        producer.poll(0.05)
                done.append(msg)
        while producer.flush(1.0) > 0:       # every record gets its report: ok, or failed after the message timeout
            pass
        deadline = time.monotonic() + 60
        while True:
            try:
                ctx.commit(done)
                break
            except Exception:  # noqa: BLE001 - a coordinator moving under a broker fault: try again
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.5)
    finally:
        os.close(fd)
