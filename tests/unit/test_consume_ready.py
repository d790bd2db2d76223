"""consume.ready: records that have arrived come back at once, never after a wait for a full batch."""

from harness import consume


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


def test_with_nothing_fetched_the_first_arrival_is_returned_with_what_came_with_it():
    c = FakeConsumer(arriving=["a", "b"])
    assert consume.ready(c, 500, 0.1) == ["a", "b"] and c.waited == 0


def test_nothing_at_all_waits_the_timeout_once_and_returns_nothing():
    c = FakeConsumer()
    assert consume.ready(c, 500, 0.1) == [] and c.waited == 0.1


def test_never_more_than_asked():
    c = FakeConsumer(fetched=list("abcdef"))
    assert consume.ready(c, 4, 0.1) == list("abcd")
    c = FakeConsumer(arriving=list("abcdef"))
    assert consume.ready(c, 1, 0.1) == ["a"]
