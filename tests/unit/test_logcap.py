"""A flooding worker cannot fill the disk (workers/logcap.py): a real child writes 50 MB to its stdout,
the slot's log keeps the cap and one marker line, and every byte past the cap is counted."""

import os
import subprocess
import sys

from harness.workers import logcap
from harness.workers.logcap import CAP_BYTES, CappedLog

FLOOD = 50 * 1000 * 1000
FLOODER = f"import sys\nfor _ in range({FLOOD // 1000}):\n    sys.stdout.write('x' * 999 + '\\n')\n"


def run_into(log: CappedLog, code: str) -> int:
    w = log.pipe()
    try:
        proc = subprocess.Popen([sys.executable, "-c", code], stdout=w, stderr=subprocess.STDOUT)
    finally:
        os.close(w)
    return proc.wait(timeout=120)


def test_a_flood_keeps_the_cap_and_one_marker_and_counts_the_rest(tmp_path):
    path = tmp_path / "w0.log"
    log = CappedLog(path)
    assert run_into(log, FLOODER) == 0
    assert log.join() == FLOOD - CAP_BYTES
    data = path.read_bytes()
    head, marker = data[:CAP_BYTES], data[CAP_BYTES:]
    assert head == (b"x" * 999 + b"\n") * (CAP_BYTES // 1000) + b"x" * (CAP_BYTES % 1000)
    assert marker == (f"[harness] {FLOOD - CAP_BYTES} bytes of this process's output dropped: the log of a "
                      f"slot is capped at {CAP_BYTES} bytes\n").encode()


def test_the_cap_is_per_slot_across_attempts_and_a_quiet_process_writes_everything(tmp_path):
    path = tmp_path / "w0.log"
    log = CappedLog(path, cap=100)
    assert run_into(log, "print('a' * 59)") == 0          # 60 bytes: under the cap, nothing dropped
    assert log.join() == 0 and path.read_bytes() == b"a" * 59 + b"\n"
    assert run_into(log, "print('b' * 59)") == 0          # the second attempt has 40 bytes of room left
    assert log.join() == 20
    assert path.read_bytes().startswith(b"a" * 59 + b"\n" + b"b" * 40 + b"[harness] 20 bytes")


def test_a_process_still_holding_its_pipe_leaves_the_count_unknown(tmp_path, monkeypatch):
    monkeypatch.setattr(logcap, "JOIN_TIMEOUT_S", 0.2)
    log = CappedLog(tmp_path / "w0.log", cap=10)
    w = log.pipe()
    try:
        assert log.join() is None
    finally:
        os.close(w)
    assert log.join() == 0
