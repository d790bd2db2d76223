"""A run on the real stack whose report folder fills up while it runs: one line, the report kept in the
state folder, no temporary file left, exit 3 (1 would read as `unexpected`).

The report folder is a small tmpfs (we run as root), filled to the last byte as soon as the run has
claimed it: everything after that (logs, crash log, the report) meets a full disk.
"""

import json
import os
import subprocess
import sys
import threading
import time

import pytest

from tests.conftest import ROOT
from tests.unit.test_hostile_files import fill, small_tmpfs, temps_in

pytestmark = pytest.mark.integration


def test_a_run_whose_folder_fills_up_keeps_its_report_in_the_state_folder_and_exits_3(stack, tmp_path):
    state = tmp_path / "state"
    with small_tmpfs("8m") as fs:
        out = fs / "run"

        def fill_once_claimed():
            deadline = time.monotonic() + 300
            while not (out / ".run-owner").exists() and time.monotonic() < deadline:
                time.sleep(0.01)
            fill(fs)
        filler = threading.Thread(target=fill_once_claimed, daemon=True)
        filler.start()
        env = {**os.environ, **stack["env"], "HARNESS_HOME": str(state)}
        proc = subprocess.run([sys.executable, "-m", "harness.cli", "run", "offset-after", "--messages", "50",
                               "--quiet", "--out", str(out)], capture_output=True, text=True, env=env, cwd=ROOT,
                              timeout=600)
        filler.join(10)
        assert "Traceback" not in proc.stderr, proc.stderr[-3000:]
        assert proc.returncode == 3, (proc.returncode, proc.stderr[-3000:])
        errors = [line for line in proc.stderr.splitlines() if line.startswith("error: ")]
        assert len(errors) == 1 and "cannot write the report" in errors[0], proc.stderr[-3000:]
        assert temps_in(out) == []
    kept = list((state / "unwritten-reports").glob("*.report.json"))
    assert len(kept) == 1 and str(kept[0]) in errors[0]
    assert json.loads(kept[0].read_text())["experiment"] == "offset-after"
