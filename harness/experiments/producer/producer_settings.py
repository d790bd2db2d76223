"""The producer under test's configuration, from the run's options: one pure function that the worker's
loop configures its producer with and the predictor reads its promises from (so the predictor, like the
checker's judging part, imports nothing that connects).
"""

# Finite, so the duplicates one record can gain are bounded (each retry may write one more copy).
RETRIES = 10

# Shorter than a broker-pause's freeze or a latency fault's delay, so a paused or slow leader's requests time
# out and are retried. librdkafka sends request.timeout.ms to the broker only (its ack timeout); its own
# timeout for a request in flight is socket.timeout.ms (60 s by default), so both are set: a response that
# is late by more than this (the scan runs once a second: 1-2 s) is a timeout, and the record is sent again.
REQUEST_TIMEOUT_MS = 1000

# Retries go on for this long before a record is reported failed (never acknowledged).
MESSAGE_TIMEOUT_MS = 120_000
DEFAULT_MAX_IN_FLIGHT = 5


def settings(params) -> dict:
    """The producer under test's configuration, from the run's options."""
    acks = params.acks or "all"
    idempotence = params.idempotence or ("off" if acks in ("0", "1") else "on")
    return {"enable.idempotence": idempotence == "on", "acks": acks,
            "max.in.flight.requests.per.connection": params.max_in_flight or DEFAULT_MAX_IN_FLIGHT,
            "retries": RETRIES, "retry.backoff.ms": 100, "request.timeout.ms": REQUEST_TIMEOUT_MS,
            "socket.timeout.ms": REQUEST_TIMEOUT_MS,
            "message.timeout.ms": MESSAGE_TIMEOUT_MS, "linger.ms": 5}
