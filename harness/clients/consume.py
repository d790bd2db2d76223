"""How the harness's consumers take records from librdkafka: what has arrived, at once.

`Consumer.consume(n, timeout)` returns when it has n records or the timeout has passed, so a batch
that cannot fill (the end of a partition, a trickle) waits out the whole timeout with records in hand:
a worker near the end of its partition lost 100 ms per poll (after every crash there), an audit half
a second per topic, and the output watcher saw each record up to 100 ms late, which its stall times
would have counted. `ready` returns what is there now, else the first record as soon as it comes,
else nothing after the timeout.

Every record it returns comes from one librdkafka call. A call may run the rebalance callback
(on_revoke: the worker commits what it applied and forgets the partition), and librdkafka drops a
revoked partition's records only from the call that revoked it: a record taken by an earlier call
and handed out after that callback would be applied by a worker that no longer owns its partition,
and processed again by the new owner. So what arrived with the first record waits for the next
call, which returns it at once.

How long the broker may hold a fetch that finds nothing new (`fetch.wait.max.ms`) depends on whether
the consumer ever moves its own position. A held fetch is answered as soon as a record arrives, or, for a
read_committed reader, as soon as a commit marker raises the last stable offset; but librdkafka keeps one
fetch in flight per broker, so after a seek, or partitions assigned mid-life, the next fetch waits for
the held one to come back. So:
- `FETCH_WAIT_MS`, librdkafka's default 500 ms, for a consumer that only reads forward from where it was
  placed (the workers of a fixed assignment, the output watcher). Their input is all produced before they
  start, so librdkafka soon fetches to its end and then asks again every wait: with 20 ms (workers) and
  10 ms (the watcher) the idle fetches of a default suite cost the broker 28.7-31.6 CPU-seconds against
  24.7-25.3 with 500 ms (two pairs of suites side by side), and the restart and read_committed stall
  medians stayed the same.
- `FETCH_WAIT_MOVING_MS`, 20 ms, for a worker that seeks (the abort fault rewinds after each abort) or
  whose group hands it partitions: with 500 ms, `harness run eos --fault abort` took 121 s against 10 s,
  each rewind waiting out a held fetch.
(The bench's bare worker keeps its 20 ms, so its reference numbers still compare.)
"""

FETCH_WAIT_MS = 500
FETCH_WAIT_MOVING_MS = 20


def fetch_wait_ms(moves_itself: bool) -> int:
    """fetch.wait.max.ms for a consumer that seeks or is assigned partitions mid-life (True), or not."""
    return FETCH_WAIT_MOVING_MS if moves_itself else FETCH_WAIT_MS


def ready(consumer, n: int, timeout: float) -> list:
    """Up to `n` records: those already fetched, else the first to arrive within `timeout` seconds."""
    msgs = consumer.consume(num_messages=max(1, n), timeout=0)
    if msgs:
        return msgs
    first = consumer.poll(timeout)
    return [] if first is None else [first]
