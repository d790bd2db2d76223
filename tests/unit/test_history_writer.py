"""A worker's history file as runtime/history.py writes it, read back by checker/histories.py."""

import json
import os

import pytest

from harness.checker.anomalies import ABORTED, COMMITTED, sends_of
from harness.checker.histories import read
from harness.runtime.history import History, ranges


class Msg:
    def __init__(self, key, partition, offset, topic="out"):
        self._k, self._p, self._o, self._t = key, partition, offset, topic

    def key(self):
        return self._k.encode() if self._k is not None else None

    def partition(self):
        return self._p

    def offset(self):
        return self._o

    def topic(self):
        return self._t


def test_ranges_keep_consecutive_offsets_together_in_the_order_given():
    assert ranges([3, 4, 5, 9, 10, 2]) == [[3, 5], [9, 10], [2, 2]] and ranges([]) == []


def test_a_history_is_written_at_once_and_read_back_with_its_transactions(tmp_path):
    h = History(str(tmp_path), "w0", 2, transactional_id="t-0")
    assert not list(tmp_path.iterdir())               # nothing written yet: no file (a spare never used)
    h.positions("assign", "in", {0: 5})
    h.poll("in", [Msg("a", 0, 5, "in"), Msg("b", 0, 6, "in"), Msg("c", 1, 0, "in")])
    h.txn("begin")
    late = h.on_delivery()                             # produced in transaction 1
    h.on_delivery()(None, Msg("a", 0, 10))
    h.txn("abort")
    late(None, Msg("b", 0, 11))                        # its report comes after the abort: still transaction 1's
    h.txn("begin")
    h.on_delivery()(None, Msg("c", 0, 13))
    h.on_delivery()("_MSG_TIMED_OUT", Msg("d", 0, -1))
    h.txn("committing")
    h.txn("commit")
    h.positions("commit", "in", {0: 7})
    h.close()
    lines = [json.loads(line) for line in (tmp_path / "w0-2.jsonl").read_text().splitlines()]
    assert lines[0][1] == "open" and lines[0][2]["transactional_id"] == "t-0" and lines[0][2]["pid"] == os.getpid()
    assert lines[2][1:] == ["poll", "in", {"0": [[5, 6]], "1": [[0, 0]]}]
    got = read(tmp_path)
    assert got.bad_lines == 0 and [p.name for p in got.processes] == ["w0/2"]
    assert [(s.key, s.offset, s.outcome) for s in sends_of(got.processes[0])] == [
        ("a", 10, ABORTED), ("b", 11, ABORTED), ("c", 13, COMMITTED)]


def test_a_send_acknowledged_without_an_offset_is_a_well_formed_line_with_no_place(tmp_path):
    """acks=0: the delivery report has no offset (None); the line must still be read, not set aside."""
    h = History(str(tmp_path), "w0", 1)
    h.on_delivery()(None, Msg("a", 0, None))
    h.on_delivery()(None, Msg("b", 0, 7))
    h.close()
    got = read(tmp_path)
    assert got.bad_lines == 0
    assert [(s.key, s.offset) for s in sends_of(got.processes[0])] == [("b", 7)]      # no place: not judged


def test_a_link_planted_where_the_history_goes_is_not_followed(tmp_path):
    target = tmp_path / "victim"
    target.write_text("keep\n")
    (tmp_path / "w0-1.jsonl").symlink_to(target)
    h = History(str(tmp_path), "w0", 1)
    with pytest.raises(OSError):
        h.txn("begin")
    assert target.read_text() == "keep\n"


def test_without_a_folder_nothing_is_written(tmp_path):
    h = History(None, "w0", 1)
    h.txn("begin")
    h.poll("in", [Msg("a", 0, 0)])
    h.on_delivery()(None, Msg("a", 0, 0))
    h.close()
    assert not list(tmp_path.iterdir())
