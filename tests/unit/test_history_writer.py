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


@pytest.mark.parametrize("key", ["pay-00000001", 'a "quoted" \\ key', "ünïcode ✓", "\x00\n", "", None])
@pytest.mark.parametrize("n", [None, 0, 17])
@pytest.mark.parametrize("offset", [-1, 0, 2**40])
def test_a_send_line_written_fast_reads_back_as_the_general_encoder_writes_it(key, n, offset):
    from harness.runtime.history import _line, _send_line
    us = 1_764_700_000_000_000 + 1_234     # a time with leading zeros in its fraction
    fast = json.loads(_send_line(us, 'out "t"', 3, offset, key, n))
    general = json.loads(_line(us / 1e6, "send", 'out "t"', 3, offset, key, n))
    assert fast == general and fast[0] == 1_764_700_000.001234


def test_delivery_reports_wait_in_memory_and_are_written_before_the_next_line_in_their_order(tmp_path):
    h = History(str(tmp_path), "w0", 1)
    h.txn("begin")
    for i in range(3):
        h.on_delivery()(None, Msg(f"k{i}", 0, 10 + i))
    assert len((tmp_path / "w0-1.jsonl").read_text().splitlines()) == 2     # open, begin: no write per report
    h.txn("committing")
    ops = [json.loads(line)[1:] for line in (tmp_path / "w0-1.jsonl").read_text().splitlines()]
    assert [op[0] for op in ops] == ["open", "txn", "send", "send", "send", "txn"]
    assert [op[4] for op in ops[2:5]] == ["k0", "k1", "k2"] and ops[-1] == ["txn", "committing", 1]
    times = [json.loads(line)[0] for line in (tmp_path / "w0-1.jsonl").read_text().splitlines()]
    assert times[2:] == sorted(times[2:])                 # each report at the time it came, before the next line


def test_a_planned_crash_writes_the_reports_that_came_before_the_process_dies(tmp_path):
    """KillSwitch.crash SIGKILLs its own process: it must write what the process knew first."""
    import subprocess
    import sys
    code = f"""
import sys
sys.path.insert(0, {str(os.getcwd())!r})
from pathlib import Path
from harness.runtime.evidence import KillSwitch
from harness.runtime.history import History
class Msg:
    def __init__(s, k, o): s.k, s.o = k, o
    def key(s): return s.k.encode()
    def partition(s): return 0
    def offset(s): return s.o
    def topic(s): return "out"
h = History({str(tmp_path)!r}, "w0", 1)
h.txn("begin")
h.on_delivery()(None, Msg("a", 5))
kill = KillSwitch(None, Path({str(tmp_path / 'crash.jsonl')!r}), "w0", 1, "eos")
kill.history = h
kill.crash("after-produce", Msg("a", 5))
"""
    proc = subprocess.run([sys.executable, "-c", code], timeout=60)
    assert proc.returncode == -9                          # it really died by SIGKILL
    got = read(tmp_path)
    assert [(s.key, s.offset) for s in sends_of(got.processes[0])] == [("a", 5)]


@pytest.mark.parametrize("how", ["sys.exit(3)", "raise RuntimeError('fenced')"])
def test_a_process_that_exits_without_closing_writes_the_reports_that_came(tmp_path, how):
    """A fenced worker leaves by sys.exit, a failing one by an exception: neither closes its history."""
    import subprocess
    import sys
    code = f"""
import sys
sys.path.insert(0, {str(os.getcwd())!r})
from harness.runtime.history import History
class Msg:
    def key(s): return b"a"
    def partition(s): return 0
    def offset(s): return 9
    def topic(s): return "out"
h = History({str(tmp_path)!r}, "w0", 1)
h.on_delivery()(None, Msg())
{how}
"""
    proc = subprocess.run([sys.executable, "-c", code], timeout=60, capture_output=True)
    assert proc.returncode != 0 and proc.returncode != -9
    assert [(s.key, s.offset) for s in sends_of(read(tmp_path).processes[0])] == [("a", 9)]


def test_offset_commits_asked_for_and_refused_are_read_back_and_a_malformed_one_is_set_aside(tmp_path):
    h = History(str(tmp_path), "w0", 1)
    h.positions("commit-begin", "in", {0: 5})
    h.commit_error("in", {0: 5}, "KafkaError{code=REQUEST_TIMED_OUT}")
    h.positions("commit-begin", "in", {0: 5})
    h.positions("commit", "in", {0: 5})
    h.close()
    with open(tmp_path / "w0-1.jsonl", "a") as f:
        f.write('[9.0,"commit-error","in",{"0":5},{"not":"a string"}]\n[9.1,"commit-begin","in",{"x":1}]\n')
    got = read(tmp_path)
    assert [op[1] for op in got.processes[0].ops] == ["commit-begin", "commit-error", "commit-begin", "commit"]
    assert got.bad_lines == 2


def test_reports_that_keep_coming_are_written_once_the_oldest_has_waited_its_longest(tmp_path, monkeypatch):
    """A producer draining its last reports writes no other line: they must not wait for the end."""
    import harness.runtime.history as history
    now = [1_000_000_000_000_000]
    monkeypatch.setattr(history.time, "time_ns", lambda: now[0])
    h = History(str(tmp_path), "w0", 1)
    h.positions("assign", "in", {0: 0})
    h.on_delivery()(None, Msg("a", 0, 1))
    now[0] += int(history.MAX_WAIT_S * 1e9) // 2
    h.on_delivery()(None, Msg("b", 0, 2))
    assert len((tmp_path / "w0-1.jsonl").read_text().splitlines()) == 2       # open, assign: both still wait
    now[0] += int(history.MAX_WAIT_S * 1e9)
    h.on_delivery()(None, Msg("c", 0, 3))
    assert [json.loads(line)[5] for line in (tmp_path / "w0-1.jsonl").read_text().splitlines()[2:]] == ["a", "b", "c"]


def test_flush_all_writes_every_live_history_and_forgets_closed_ones(tmp_path):
    from harness.runtime.history import _LIVE, flush_all
    a, b = History(str(tmp_path), "w0", 1), History(str(tmp_path), "w1", 1)
    a.on_delivery()(None, Msg("a", 0, 1))
    b.on_delivery()(None, Msg("b", 0, 2))
    flush_all()
    assert all(len((tmp_path / f).read_text().splitlines()) == 2 for f in ("w0-1.jsonl", "w1-1.jsonl"))
    a.close()
    b.close()
    assert a not in _LIVE and b not in _LIVE
