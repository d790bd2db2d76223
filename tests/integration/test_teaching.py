"""Predict first and the reports that teach, on the real stack: guesses on disk before the run, the
scoreboards of guesses in the terminal and the reports, every report kind free of Python reprs."""

import json
import re

from tests.conftest import harness


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
