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
    """A reference of the current schema_version follows it in full; an older one is what `compare` and
    `report` still read (every known field of its type), as the harness's own reader holds it."""
    from harness.reporting.validate import CURRENT, check
    data = json.loads(path.read_text())
    if data.get("schema_version") == CURRENT["report"]:
        validate(data)
    else:
        assert data.get("schema_version") in (1, 2) and check(data, "report", path) == []


def test_reference_suite_follows_the_schema_and_ran_as_predicted():
    s = json.loads((REFERENCE / "suite" / "suite.json").read_text())
    validate_suite(s)
    assert {r["verdict"] for r in s["experiments"]} == {"as-predicted"} and s["exit_code"] == 0
