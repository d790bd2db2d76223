"""--assignment group on hand-made data: options, the revocation commit, lost commits as bounds, the story."""

import json
from types import SimpleNamespace

import pytest

from harness.checker.predict import predict
from harness.core.errors import HarnessError
from harness.experiments import get
from harness.run.params import RunParams
from harness.runtime import context, evidence, group
from harness.runtime.history import History
from harness.reporting.build import group_story


@pytest.mark.parametrize("opts, says", [
    ({"experiment": "eos", "assignment": "group"}, "--assignment applies to offset-before, offset-after, dedupe only"),
    ({"experiment": "offset-after", "assignment": "group", "group_protocol": "x"}, "one of classic, consumer"),
])
def test_group_options_are_checked_in_one_line(opts, says):
    with pytest.raises(HarnessError, match=says):
        RunParams(**opts).validate()


def test_group_settings_per_protocol():
    assert group.GROUP_SETTINGS["classic"]["group.protocol"] == "classic"
    # KIP-848: the broker owns sessions and assignment; the client may not set them
    assert group.GROUP_SETTINGS["consumer"] == {"group.protocol": "consumer"}


class Msg:
    def __init__(self, key, partition, offset):
        self._k, self._p, self._o = key, partition, offset

    def key(self):
        return self._k.encode()

    def partition(self):
        return self._p

    def offset(self):
        return self._o


def group_ctx(tmp_path, commit=None):
    ctx = context.WorkerContext.__new__(context.WorkerContext)
    ctx.input_topic, ctx.group_mode = "in", True
    ctx.events = evidence.Events(tmp_path / "events.jsonl", "w0", 1)
    ctx.history = History(str(tmp_path), "w0", 1)
    ctx.pending = [Msg("a", 0, 5), Msg("b", 1, 7), Msg("c", 0, 6)]
    ctx.high, ctx.committed, ctx.positions = {0: 10, 1: 10}, {0: 5, 1: 7}, {0: 7, 1: 8}
    ctx.consumer = SimpleNamespace(commit=commit or (lambda **kw: None))
    return ctx


def events(tmp_path):
    return [json.loads(l) for l in (tmp_path / "events.jsonl").read_text().splitlines()]


def test_a_revocation_commits_what_was_applied_on_the_revoked_partitions(tmp_path):
    done = []
    ctx = group_ctx(tmp_path, commit=lambda offsets, asynchronous: done.append(offsets))
    ctx._on_revoke(ctx.consumer, [SimpleNamespace(partition=0)])
    assert [(tp.partition, tp.offset) for tp in done[0]] == [(0, 7)]
    assert [m.key() for m in ctx.pending] == [b"b"] and 0 not in ctx.high
    ev = events(tmp_path)
    assert ev[-1]["event"] == "revoked" and ev[-1]["partitions"] == [0] and ev[-1]["committed_on_revoke"] == 2
    # the history says the same: the commit of what was applied, then the partition taken away
    ops = [json.loads(l) for l in (tmp_path / "w0-1.jsonl").read_text().splitlines()]
    assert [op[1:] for op in ops[1:]] == [["commit-begin", "in", {"0": 7}], ["commit", "in", {"0": 7}],
                                       ["revoke", "in", [0]]]


def test_an_assignment_delivered_while_the_worker_closes_is_not_served(tmp_path):
    """A finished worker leaving the group got one last assignment inside consumer.close(); fetching its
    committed offsets raised _DESTROY and the worker exited 1 (an unplanned death that made the run's
    prediction a bound)."""
    from confluent_kafka import KafkaError, KafkaException

    def destroyed(partitions, timeout):
        raise KafkaException(KafkaError(KafkaError._DESTROY, "Broker handle destroyed for termination"))
    ctx = group_ctx(tmp_path)
    ctx.consumer = SimpleNamespace(committed=destroyed, close=lambda: ctx._on_assign(ctx.consumer, [
        SimpleNamespace(partition=1)]))
    ctx._pg = None
    ctx.kill = SimpleNamespace(delivered=0)
    ctx.close()
    assert [e["event"] for e in events(tmp_path)] == ["done"]
    # while it runs, the same error is still an error: nothing is silently dropped
    ctx._closing = False
    import pytest
    with pytest.raises(KafkaException):
        ctx._on_assign(ctx.consumer, [SimpleNamespace(partition=1)])


def test_a_commit_refused_mid_rebalance_is_logged_with_the_ids_that_come_again(tmp_path):
    def refuse(**kw):
        raise RuntimeError("Broker: Specified group generation id is not valid")
    ctx = group_ctx(tmp_path, commit=refuse)
    ctx._on_revoke(ctx.consumer, [SimpleNamespace(partition=0)])
    lost = [e for e in events(tmp_path) if e["event"] == "commit_lost"]
    assert lost and lost[0]["unacked"] == ["a", "c"]
    ctx._on_lost(ctx.consumer, [SimpleNamespace(partition=1)])
    assert [e["unacked"] for e in events(tmp_path) if e["event"] == "commit_lost"][-1] == ["b"]


def test_lost_commits_turn_the_numbers_they_touch_into_bounds():
    aborts = [{"event": "commit_lost", "unacked": ["a", "c"]}]
    p = predict(get("offset-before"), [], aborts=aborts)
    e = {x.metric: (x.op, x.value) for x in p.expectations}
    assert not p.exact and e["ledger.duplicates"] == ("<=", 3)      # even where no kill point duplicates
    assert e["ledger.lost"] in (("==", 0), ("<=", 0))        # a lost commit loses nothing


def test_the_group_story_counts_assignments_and_revocations():
    ev = [{"event": "assigned", "t": 1.0, "worker": "w0", "attempt": 1, "partitions": [0, 1]},
          {"event": "revoked", "t": 2.0, "worker": "w0", "attempt": 1, "partitions": [0, 1]},
          {"event": "revoked", "t": 2.5, "worker": "w1", "attempt": 1, "partitions": []},
          {"event": "revoked", "t": 3.0, "worker": "w1", "attempt": 2, "partitions": [2], "lost": True},
          {"event": "commit_lost", "t": 3.0, "unacked": ["x", "y"]}]
    g = group_story("classic", ev, 0.5)
    assert (g["assignments"], g["revocations"], g["revoked_partitions"], g["lost_assignments"]) == (1, 2, 3, 1)
    assert g["commits_lost"] == 1 and g["redelivered_at_most"] == 2 and g["events"][0]["t"] == 0.5


def test_a_partition_that_yields_nothing_while_behind_is_sought_to_the_next_offset_then_given_up(tmp_path,
                                                                                                    monkeypatch):
    """A worker whose input partition stalled in the client after its leader was killed polled nothing for
    10 minutes with records left (CI). Now it seeks the partition to its own next offset after
    FETCH_STALL_S, says so, and after STALL_RESEEKS seeks exits instead of hanging."""
    clock = [1000.0]
    monkeypatch.setattr(context.time, "monotonic", lambda: clock[0])
    monkeypatch.setattr(context.consume, "ready", lambda consumer, n, timeout: [])
    sought = []
    ctx = group_ctx(tmp_path)
    ctx.consumer = SimpleNamespace(seek=lambda tp: sought.append((tp.partition, tp.offset)))
    ctx.high, ctx.positions = {0: 10, 1: 8}, {0: 7, 1: 8}          # partition 0 behind, 1 at its end
    ctx._last_record_at, ctx._reseeks, ctx._first, ctx.worker = clock[0], 0, False, "w0"
    assert ctx.poll(10) == [] and sought == []                  # not yet: a quiet moment is not a stall
    for n in range(1, context.STALL_RESEEKS + 1):
        clock[0] += context.FETCH_STALL_S + 1
        ctx.poll(10)
        assert sought == [(0, 7)] * n                           # only the partition with records left
    stalls = [e for e in events(tmp_path) if e["event"] == "fetch_stalled"]
    assert [e["positions"] for e in stalls] == [{"0": 7}] * context.STALL_RESEEKS
    clock[0] += context.FETCH_STALL_S + 1
    import pytest
    with pytest.raises(RuntimeError, match=r"partitions \[0\] yielded no record"):
        ctx.poll(10)
    # at its end, a worker that gets nothing is not stalled
    ctx2 = group_ctx(tmp_path)
    ctx2.consumer = SimpleNamespace(seek=lambda tp: sought.append("no"))
    ctx2.high, ctx2.positions, ctx2._last_record_at, ctx2._reseeks = {0: 7}, {0: 7}, 0.0, 0
    ctx2.poll(10)
    assert "no" not in sought
