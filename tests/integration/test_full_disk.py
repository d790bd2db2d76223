"""A run on the real stack whose report folder fills up while it runs: one line, the report written to
$HARNESS_HOME/unwritten-reports/<run-id>/ (the last line printed), no temporary file left, exit 3 (1
would read as `unexpected`).

The report folder is a small tmpfs (we run as root), filled to the last byte once the workers are done
(their `done` event), so what meets the full disk is certain: the report. Filled earlier, at any
instant (the crash plan, the workers' logs), the run must still end in one line, exit 3.
"""

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from tests.conftest import ROOT
from tests.unit.test_hostile_files import fill, small_tmpfs, temps_in

pytestmark = pytest.mark.integration


def _run_filling(stack, tmp_path, fs, ready) -> tuple[subprocess.CompletedProcess, Path]:
    """`harness run` into `fs`, which is filled once `ready(out)` holds."""
    state, out = tmp_path / "state", fs / "run"

    def fill_when_ready():
        deadline = time.monotonic() + 300
        while not ready(out) and time.monotonic() < deadline:
            time.sleep(0.01)
        fill(fs)
    filler = threading.Thread(target=fill_when_ready, daemon=True)
    filler.start()
    env = {**os.environ, **stack["env"], "HARNESS_HOME": str(state)}
    proc = subprocess.run([sys.executable, "-m", "harness.cli", "run", "offset-after", "--messages", "50",
                           "--quiet", "--out", str(out)], capture_output=True, text=True, env=env, cwd=ROOT,
                          timeout=600)
    filler.join(10)
    assert "Traceback" not in proc.stderr, proc.stderr[-3000:]
    assert proc.returncode == 3, (proc.returncode, proc.stderr[-3000:])
    assert temps_in(out) == []
    return proc, state


def _workers_done(out) -> bool:
    try:
        return '"event": "done"' in (out / "events.jsonl").read_text()
    except OSError:
        return False


def _kept(proc, state) -> Path:
    """The folder the report was written to instead of the full --out: one error line says why, and the
    last line on stdout is that folder."""
    errors = [line for line in proc.stderr.splitlines() if line.startswith("error: ")]
    kept = list((state / "unwritten-reports").iterdir())
    assert len(errors) == 1 and len(kept) == 1, proc.stderr[-3000:]
    assert "No space left on device" in errors[0] and str(kept[0]) in errors[0], errors[0]
    assert proc.stdout.splitlines()[-1] == str(kept[0])
    return kept[0]


def test_a_run_whose_folder_fills_up_writes_its_report_in_the_state_folder_and_exits_3(stack, tmp_path):
    with small_tmpfs("8m") as fs:
        proc, state = _run_filling(stack, tmp_path, fs, _workers_done)
        assert "cannot write the report" in proc.stderr
    kept = _kept(proc, state)
    assert json.loads((kept / "report.json").read_text())["experiment"] == "offset-after"
    assert (kept / "report.html").exists() and (kept / "report.md").exists()


def test_a_run_whose_folder_fills_up_as_soon_as_it_is_claimed_still_ends_with_a_report(stack, tmp_path):
    """Filled as soon as the folder is claimed (before: an OSError traceback, exit 1; then one line, exit 3,
    and no report anywhere): the run stops where the disk met it, is audited, and its report is written
    elsewhere. Where exactly it met it depends on the machine's timing (the crash plan, a worker's log, the
    report), so the report's verdict is not asserted here."""
    with small_tmpfs("8m") as fs:
        proc, state = _run_filling(stack, tmp_path, fs, lambda out: (out / ".run-owner").exists())
    report = json.loads((_kept(proc, state) / "report.json").read_text())
    assert report["experiment"] == "offset-after" and report["verdict"], report.get("verdict")


def test_a_consumer_flooding_stdout_cannot_fill_the_report_folder(stack, tmp_path):
    """Issue 53 case 2 re-made: a consumer whose helper writes 200 MB to stdout, with the run folder on a
    32 MB file system. Its slot's log stops at the cap, the rest is counted, and the run ends as it would
    have without the flood: as-predicted, its report in `--out`."""
    from harness.workers.logcap import CAP_BYTES
    correct = ROOT / "examples" / "consumers" / "python" / "correct.py"
    cmd = f"sh -c 'yes flooding-the-log | head -c 200000000 & exec {sys.executable} {correct}'"
    with small_tmpfs("32m") as fs:
        out = fs / "run"
        env = {**os.environ, **stack["env"], "HARNESS_HOME": str(tmp_path / "state")}
        proc = subprocess.run([sys.executable, "-m", "harness.cli", "run", "custom", "--worker-cmd", cmd,
                               "--kills", "1", "--messages", "200", "--quiet", "--out", str(out)],
                              capture_output=True, text=True, env=env, cwd=ROOT, timeout=600)
        assert proc.returncode == 0, proc.stderr[-3000:]
        d = json.loads((out / "report.json").read_text())
        assert d["verdict"] == "as-predicted"
        dropped = d["worker_logs"]["dropped_bytes"]["w0"]
        # more than the folder holds was written past the cap (how much of the 200 MB the harness read before
        # the run ended depends on the machine's pace, so not all of it is asserted)
        assert dropped is not None and dropped > 32 * 1024 * 1024, d["worker_logs"]
        assert (out / "workers" / "w0.log").stat().st_size < CAP_BYTES + 4096
        assert "bytes of this process's output dropped" in (out / "workers" / "w0.log").read_text(errors="replace")
