"""harness hunt for real: two tiny offset-after runs on the session's stack, one `harness run` each, seed after
seed, each with its report, the line per run, hunt.json and the exit status."""

import json

import pytest

from tests.conftest import harness
from tests.unit.sample_report import validate

pytestmark = pytest.mark.integration


def test_two_seeded_runs_each_with_its_report(stack, tmp_path):
    out = tmp_path / "hunt"
    proc = harness("hunt", "offset-after", "--messages", "50", "--seed", "7", "--runs", "2", "--out", str(out),
                   env=stack["env"], timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.strip().splitlines()[-1] == str(out)
    s = json.loads((out / "hunt.json").read_text())
    assert [(r["seed"], r["verdict"]) for r in s["runs"]] == [(7, "as-predicted"), (8, "as-predicted")]
    assert s["invalid_seeds"] == [] and s["first_invalid"] is None and s["exit_code"] == 0
    for r in s["runs"]:
        d = json.loads((out / r["folder"] / "report.json").read_text())
        validate(d)
        assert d["params"]["seed"] == r["seed"] and d["params"]["messages"] == 50
        assert r["duplicates"] == d["counts"]["duplicates"] == r["crashes"] > 0 and r["lost"] == 0
        assert f"seed {r['seed']}: as-predicted, lost 0, duplicates {r['duplicates']}, crashes {r['crashes']}" \
            in proc.stderr
    assert "runs: 2 of 2 finished (until-invalid); invalid: 0" in proc.stderr
    assert "| [8](seed-8/report.md) | as-predicted |" in (out / "hunt.md").read_text()
