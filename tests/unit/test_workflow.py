"""Checks of the GitHub Actions workflows: the nightly and the reusable crash-test workflow.

actionlint (installed by .ci/install-actionlint.sh) validates the workflows
against GitHub's schema, expression types and the known actions' inputs. The
structural checks below need only PyYAML and make sure each still does what it
is for: the nightly runs the harness's suite through the same reusable workflow
and action other repositories use (tests/unit/test_action.py checks the action,
tests/integration/test_action.py runs it), and the reusable workflow hands
every input to the action unchanged.
"""

import os
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
WORKFLOWS = ROOT / ".github" / "workflows"
WORKFLOW = WORKFLOWS / "nightly.yml"
REUSABLE = WORKFLOWS / "crash-test.yml"
ACTION = ROOT / "action.yml"
INSTALLER = ".ci/install-actionlint.sh"


def find_actionlint() -> str | None:
    """actionlint on PATH, else in `go env GOBIN` or `go env GOPATH`/bin."""
    found = shutil.which("actionlint")
    if found:
        return found
    go = shutil.which("go")
    if go is None:
        return None
    try:
        proc = subprocess.run([go, "env", "GOBIN", "GOPATH"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.SubprocessError):
        return None
    lines = proc.stdout.splitlines() if proc.returncode == 0 else []
    dirs = []
    if lines and lines[0].strip():
        dirs.append(Path(lines[0].strip()))
    for entry in (lines[1] if len(lines) > 1 else "").strip().split(os.pathsep):
        if entry:
            dirs.append(Path(entry) / "bin")
    for d in dirs:
        candidate = d / "actionlint"
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return str(candidate)
    return None


def load(path: Path) -> dict:
    doc = yaml.safe_load(path.read_text())
    assert isinstance(doc, dict), f"{path.name} is not a mapping"
    return doc


@pytest.fixture(scope="module")
def workflow() -> dict:
    return load(WORKFLOW)


@pytest.fixture(scope="module")
def reusable() -> dict:
    return load(REUSABLE)


def triggers(doc: dict) -> dict:
    # YAML 1.1 (PyYAML) reads the bare key `on` as the boolean True.
    on = doc.get("on", doc.get(True))
    if isinstance(on, str):
        return {on: None}
    if isinstance(on, list):
        return {name: None for name in on}
    return on or {}


def steps(doc: dict) -> list[dict]:
    return [step for job in doc["jobs"].values() for step in job.get("steps", [])]


@pytest.mark.parametrize("path", [WORKFLOW, REUSABLE], ids=lambda p: p.name)
def test_actionlint_accepts_the_workflow(path):
    actionlint = find_actionlint()
    if actionlint is None:
        pytest.skip(f"actionlint is neither on PATH nor in $(go env GOPATH)/bin; run `bash {INSTALLER}`")
    proc = subprocess.run([actionlint, "-no-color", "-oneline", str(path.relative_to(ROOT))],
                          cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, f"actionlint found problems:\n{proc.stdout}{proc.stderr}"


def test_runs_nightly_and_on_demand(workflow):
    on = triggers(workflow)
    schedule = on.get("schedule")
    assert schedule and all(entry.get("cron") for entry in schedule), "no cron schedule"
    assert "workflow_dispatch" in on


@pytest.mark.parametrize("name", ["nightly", "reusable"])
def test_permissions_are_read_only(name, workflow, reusable):
    doc = workflow if name == "nightly" else reusable
    perms = doc.get("permissions")
    assert isinstance(perms, dict), "set permissions explicitly at the top level"
    assert perms.get("contents") == "read" and perms.get("actions") == "read", \
        "reading the previous run's artifact needs actions: read"
    assert all(v in ("read", "none") for v in perms.values()), perms
    for job_name, job in doc["jobs"].items():
        for v in (job.get("permissions") or {}).values():
            assert v in ("read", "none"), f"job {job_name} asks for {v}"


def test_the_nightly_runs_the_suite_through_the_reusable_workflow(workflow):
    (job,) = workflow["jobs"].values()
    assert job["uses"] == "./.github/workflows/crash-test.yml"
    with_ = job["with"]
    assert with_["experiments"] == "all" and with_["stack"] == "compose"
    assert with_["fail-on"] == "unexpected"
    # The previous night's artifact is found by this name.
    assert with_["report-name"] == "nightly-report"
    # The optional consumer: off (an empty command) unless the repository sets the variable.
    assert with_["worker-cmd"] == "${{ vars.HARNESS_CONSUMER_CMD }}"
    assert set(with_) <= set(triggers(load(REUSABLE))["workflow_call"]["inputs"])


def test_the_reusable_workflow_is_called_and_hands_every_input_to_the_action(reusable):
    inputs = triggers(reusable)["workflow_call"]["inputs"]
    action_inputs = load(ACTION)["inputs"]
    (call,) = [s for s in steps(reusable) if s.get("uses") == "./.harness-action"]
    # install is the action's own (the reusable workflow always installs).
    assert set(action_inputs) - {"install"} <= set(inputs), "an action input the workflow does not offer"
    assert set(call["with"]) == set(action_inputs) - {"install"}
    for name, value in call["with"].items():
        assert value == f"${{{{ inputs.{name} }}}}", f"{name} is not passed through unchanged: {value}"
    checkout = [s for s in steps(reusable) if s.get("with", {}).get("path") == ".harness-action"]
    assert checkout and "actions/checkout" in checkout[0]["uses"], "the action is checked out before it is used"
    for s in steps(reusable):
        assert "${{" not in str(s.get("run", "")), f"step {s.get('name')!r} expands an expression in its script"
        if s.get("uses", "").startswith("actions/checkout"):
            assert s["with"].get("persist-credentials") is False
