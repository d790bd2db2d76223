"""consume.ready: records that have arrived come back at once, never after a wait for a full batch."""

from harness.clients import consume


class FakeConsumer:
    """librdkafka's batch semantics: consume(n, timeout) returns n records, or what it has once the
    timeout passed (recorded as waited); poll(timeout) returns the first record to arrive."""

    def __init__(self, fetched=(), arriving=()):
        self.fetched, self.arriving, self.waited = list(fetched), list(arriving), 0.0

    def consume(self, num_messages, timeout):
        if len(self.fetched) < num_messages:
            self.waited += timeout
        out, self.fetched = self.fetched[:num_messages], self.fetched[num_messages:]
        return out

    def poll(self, timeout):
        if not self.arriving:
            self.waited += timeout
            return None
        self.fetched += self.arriving[1:]
        first, self.arriving = self.arriving[0], []
        return first


def test_a_part_batch_already_fetched_comes_back_without_waiting():
    c = FakeConsumer(fetched=["a", "b", "c"])
    assert consume.ready(c, 500, 0.1) == ["a", "b", "c"] and c.waited == 0


def test_with_nothing_fetched_the_first_arrival_is_returned_and_what_came_with_it_at_the_next_call():
    c = FakeConsumer(arriving=["a", "b"])
    assert consume.ready(c, 500, 0.1) == ["a"] and c.waited == 0
    assert consume.ready(c, 500, 0.1) == ["b"] and c.waited == 0


def test_nothing_at_all_waits_the_timeout_once_and_returns_nothing():
    c = FakeConsumer()
    assert consume.ready(c, 500, 0.1) == [] and c.waited == 0.1


def test_never_more_than_asked():
    c = FakeConsumer(fetched=list("abcdef"))
    assert consume.ready(c, 4, 0.1) == list("abcd")
    c = FakeConsumer(arriving=list("abcdef"))
    assert consume.ready(c, 1, 0.1) == ["a"]


class Rec:
    def __init__(self, partition, value):
        self.p, self.value = partition, value

    def partition(self):
        return self.p


class RebalancingConsumer:
    """librdkafka's queue, rebalances included: each call serves the queue in order; a revocation runs
    the application's on_revoke callback (which commits what was applied and forgets the partitions)
    and drops that call's records of the revoked partitions (the version barrier does), but not
    records an earlier call has already handed out."""

    def __init__(self, arriving):
        self.queue, self.arriving, self.revoked = [], list(arriving), []

    def _serve(self, n):
        out = []
        while self.queue and len(out) < n:
            item = self.queue.pop(0)
            if isinstance(item, tuple) and item[0] == "revoke":
                self.revoked.append(item[1])          # on_revoke: commit pending, forget the partition
                out = [r for r in out if r.partition() != item[1]]
            else:
                out.append(item)
        return out

    def consume(self, num_messages, timeout):
        return self._serve(num_messages)

    def poll(self, timeout):
        self.queue += self.arriving
        self.arriving = []
        got = self._serve(1)
        return got[0] if got else None


def test_no_record_comes_back_from_a_partition_revoked_while_it_was_being_taken():
    """A record already taken from librdkafka when a later call in the same `ready` runs the revocation
    would reach the worker after its on_revoke committed and forgot that partition: the new owner
    processes it too, an unpredicted duplicate. Records must come from one call only."""
    c = RebalancingConsumer(arriving=[Rec(0, "a"), Rec(0, "b"), ("revoke", 0)])
    got = consume.ready(c, 500, 0.1)
    assert all(r.partition() not in c.revoked for r in got), (
        f"{[r.value for r in got]} handed out after partition(s) {c.revoked} were revoked")
