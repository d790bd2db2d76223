"""The committed reference reports follow the schemas they document."""

import json
from pathlib import Path

import pytest

from tests.unit.sample_report import validate, validate_suite

REFERENCE = Path(__file__).resolve().parents[2] / "reports" / "reference"
RUNS = sorted(REFERENCE.rglob("report.json"))


def test_there_are_reference_runs():
    assert len(RUNS) >= 8


@pytest.mark.parametrize("path", RUNS, ids=lambda p: str(p.relative_to(REFERENCE)))
def test_reference_run_follows_the_schema(path):
    validate(json.loads(path.read_text()))


def test_reference_suite_follows_the_schema_and_ran_as_predicted():
    s = json.loads((REFERENCE / "suite" / "suite.json").read_text())
    validate_suite(s)
    assert {r["verdict"] for r in s["experiments"]} == {"as-predicted"} and s["exit_code"] == 0
