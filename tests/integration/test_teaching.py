"""Predict first and the reports that teach, on the real stack: guesses on disk before the run, the
scoreboards of guesses in the terminal and the reports, every report kind free of Python reprs."""

import json
import re

from tests.conftest import harness
from harness.reporting.summary import whole


def test_a_runs_guesses_are_recorded_before_it_starts_and_scored(stack, tmp_path):
    out = tmp_path / "run"
    proc = harness("run", "offset-after", "--messages", "100", "--predict", "duplicates=10,lost=0,deliveries=200",
                   "--out", str(out), env=stack["env"])
    assert proc.returncode == 0, proc.stderr[-2000:]
    on_disk = json.loads((out / "guesses.json").read_text())
    assert on_disk["guesses"] == {"duplicates": 10, "lost": 0, "deliveries": 200}
    # written before the crash plan, the first file of the run itself
    assert (out / "guesses.json").stat().st_mtime_ns <= (out / "crash-plan.json").stat().st_mtime_ns
    report = json.loads((out / "report.json").read_text())
    assert report["guesses"]["guesses"] == on_disk["guesses"]
    assert "your predictions" in proc.stderr and "2 of 3 guesses close enough" in proc.stderr
    md = (out / "report.md").read_text()
    assert "| duplicates | 10 | 10 | yes |" in md and "| deliveries | 200 | 110 | no |" in md


def test_a_class_runs_the_core_worksheet(stack, tmp_path):
    sheet = harness("worksheet", env=stack["env"], check=True).stdout
    answers = iter(["10", "0", "10", "110"])
    sheet = re.sub(r'"\?"', lambda _m: next(answers), sheet)
    (tmp_path / "w.toml").write_text(sheet)
    out = tmp_path / "suite"
    proc = harness("suite", "--group", "core", "--messages", "100", "--predict", str(tmp_path / "w.toml"),
                   "--out", str(out), env=stack["env"])
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert json.loads((out / "guesses.json").read_text())["guesses"]["offset-before"] == {"lost": 10}
    md = (out / "suite.md").read_text()
    assert "| offset-after | duplicates | 10 | 10 | yes |" in md and "| offset-before | lost | 10 | 10 | yes |" in md
    assert "4 of 4 guesses close enough" in md and "4 of 4 guesses close enough" in proc.stderr
    assert "Your predictions" in (out / "suite.html").read_text()


def test_ctrl_c_is_acknowledged_at_once_and_the_stops_transaction_is_fenced(stack, tmp_path):
    """A suite interrupted while eos runs: 'stopping: ...' within a second, and the transaction the stop left
    open (it SIGKILLs the busy worker) is fenced, never reported as the system's hanging transaction."""
    import signal
    import subprocess
    import sys
    import threading
    import time
    from tests.conftest import ROOT
    from harness.core.procs import die_with_parent
    import os
    out = tmp_path / "suite"
    proc = subprocess.Popen([sys.executable, "-m", "harness.cli", "suite", "--experiments", "eos", "--messages", "5000",
                             "--out", str(out)], env={**os.environ, **stack["env"]}, cwd=ROOT, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, preexec_fn=die_with_parent)
    lines = []
    threading.Thread(target=lambda: [lines.append((time.monotonic(), x)) for x in proc.stderr], daemon=True).start()
    deadline = time.monotonic() + 120
    while not (out / "eos" / "crash-log.jsonl").exists() and time.monotonic() < deadline:
        time.sleep(0.2)
    time.sleep(3)                        # crashes under way: a worker is inside a transaction most of the time
    t0 = time.monotonic()
    proc.send_signal(signal.SIGINT)
    assert proc.wait(timeout=300) == 130
    # the suite's report is written and, as after any suite, its folder is the last line of stdout
    assert proc.stdout.read().splitlines()[-1] == str(out) and (out / "suite.html").exists()
    said = [t for t, x in lines if x.startswith("stopping:")]
    assert said and said[0] - t0 < 1.0, lines[-5:]
    report = json.loads((out / "eos" / "report.json").read_text())
    assert report["verdict"] == "interrupted"
    stopped = report["verdict_detail"]["killed_at_stop"]
    assert all(x.get("transaction") == "fenced" for x in stopped), stopped
    assert "Forbidden anomalies: hanging-transaction" not in whole(report)
    assert report["anomaly_classes"]["classes"]["hanging-transaction"]["count"] in (0, None)
