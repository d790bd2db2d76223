"""The Kafka requests a worker makes outside its poll loop, and how long it gives each.

A worker asks the broker for committed offsets, watermarks and metadata when it
starts, when the group assigns it partitions, and when it checks whether the
group is done. Each has REQUEST_TIMEOUT_S; `retrying` repeats one after a
retriable error (a leader that just moved while a broker is down) until that
time has passed. Apart from context.py because both the WorkerContext and its
group membership (group.py) make these calls.
"""

import time

# Metadata and committed-offset requests to a healthy local broker take milliseconds.
REQUEST_TIMEOUT_S = 15


def retrying(call, within_s: float = REQUEST_TIMEOUT_S):
    """`call()`, again after a retriable error (a leader that just moved: NOT_LEADER_FOR_PARTITION while a
    broker is down) until `within_s` has passed; then the error is raised."""
    from confluent_kafka import KafkaError, KafkaException
    passing = {KafkaError.NOT_LEADER_FOR_PARTITION, KafkaError.LEADER_NOT_AVAILABLE, KafkaError._TIMED_OUT,
               KafkaError.REQUEST_TIMED_OUT, KafkaError.NOT_COORDINATOR, KafkaError.COORDINATOR_NOT_AVAILABLE,
               KafkaError.COORDINATOR_LOAD_IN_PROGRESS, KafkaError._TRANSPORT, KafkaError._WAIT_COORD,
               KafkaError._DESTROY_BROKER}
    deadline = time.monotonic() + within_s
    while True:
        try:
            return call()
        except KafkaException as e:
            err = e.args[0]
            if not (err.retriable() or err.code() in passing) or time.monotonic() > deadline:
                raise
            time.sleep(0.2)
