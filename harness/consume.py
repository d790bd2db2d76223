"""How the harness's consumers take records from librdkafka: what has arrived, at once.

`Consumer.consume(n, timeout)` returns when it has n records or the timeout has passed, so a batch
that cannot fill (the end of a partition, a trickle) waits out the whole timeout with records in hand:
a worker near the end of its partition lost 100 ms per poll (after every crash there), an audit half
a second per topic, and the output watcher saw each record up to 100 ms late, which its stall times
would have counted. `ready` returns what is there now, else the first record as soon as it comes
(with whatever arrived with it), else nothing after the timeout.
"""


def ready(consumer, n: int, timeout: float) -> list:
    """Up to `n` records: those already fetched, else the first to arrive within `timeout` seconds."""
    n = max(1, n)
    msgs = consumer.consume(num_messages=n, timeout=0)
    if msgs:
        return msgs
    first = consumer.poll(timeout)
    if first is None:
        return []
    return [first] + (consumer.consume(num_messages=n - 1, timeout=0) if n > 1 else [])
