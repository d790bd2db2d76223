"""Checks of the nightly GitHub Actions workflow.

actionlint (installed by .ci/install-actionlint.sh) validates the workflow
against GitHub's schema, expression types and the known actions' inputs. The
structural checks below need only PyYAML and make sure the workflow still
does what it is for: start the compose stack, run the suite, compare with the
previous night and always clean up.
"""

import os
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
WORKFLOW = ROOT / ".github" / "workflows" / "nightly.yml"
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


@pytest.fixture(scope="module")
def workflow() -> dict:
    doc = yaml.safe_load(WORKFLOW.read_text())
    assert isinstance(doc, dict)
    return doc


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


def step_running(doc: dict, text: str) -> dict:
    found = [s for s in steps(doc) if text in str(s.get("run", ""))]
    assert found, f"no step runs {text!r}"
    return found[0]


def test_actionlint_accepts_the_workflow():
    actionlint = find_actionlint()
    if actionlint is None:
        pytest.skip(f"actionlint is neither on PATH nor in $(go env GOPATH)/bin; run `bash {INSTALLER}`")
    proc = subprocess.run([actionlint, "-no-color", "-oneline", str(WORKFLOW.relative_to(ROOT))],
                          cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, f"actionlint found problems:\n{proc.stdout}{proc.stderr}"


def test_runs_nightly_and_on_demand(workflow):
    on = triggers(workflow)
    schedule = on.get("schedule")
    assert schedule and all(entry.get("cron") for entry in schedule), "no cron schedule"
    assert "workflow_dispatch" in on


def test_permissions_are_read_only(workflow):
    perms = workflow.get("permissions")
    assert isinstance(perms, dict), "set permissions explicitly at the top level"
    assert perms.get("contents") == "read"
    assert all(v in ("read", "none") for v in perms.values()), perms
    for name, job in workflow["jobs"].items():
        for v in (job.get("permissions") or {}).values():
            assert v in ("read", "none"), f"job {name} asks for {v}"


def test_steps_start_the_stack_run_the_suite_and_compare(workflow):
    runs = "\n".join(str(s.get("run", "")) for s in steps(workflow))
    for text in ("docker compose", "harness suite", "harness compare"):
        assert text in runs, f"no step mentions {text!r}"
    assert "--stack compose" in step_running(workflow, "harness suite")["run"]
    up = step_running(workflow, "up -d --wait")
    assert "compose/docker-compose.yml" in up["run"] or "COMPOSE_YML" in up["run"]


def test_password_is_generated_at_run_time(workflow):
    step = step_running(workflow, "HARNESS_PG_PASSWORD")
    assert "openssl rand" in step["run"] and "GITHUB_ENV" in step["run"]


def test_compare_only_when_a_previous_report_exists(workflow):
    download = [s for s in steps(workflow) if "download-artifact" in str(s.get("uses", ""))]
    assert download, "no step downloads the previous report"
    with_ = download[0].get("with", {})
    assert with_.get("name") == "nightly-report"
    assert with_.get("path") == "reports/previous"
    # The first night has no previous report; that must not fail the run.
    if "dawidd6/action-download-artifact" in download[0]["uses"]:
        assert with_.get("if_no_artifact_found") in ("warn", "ignore")
    compare = step_running(workflow, "harness compare")
    assert "reports/previous" in compare["run"] and "--fail-on unexpected" in compare["run"]
    assert compare.get("if"), "the compare step must be conditional on a previous report"


def test_report_is_uploaded_and_stack_torn_down_always(workflow):
    upload = [s for s in steps(workflow) if "actions/upload-artifact" in str(s.get("uses", ""))]
    assert upload and upload[0].get("if") == "always()"
    assert upload[0]["with"]["name"] == "nightly-report"
    assert upload[0]["with"]["path"] == "reports/nightly"
    down = step_running(workflow, "down -v")
    assert "docker compose" in down["run"] and down.get("if") == "always()"
    assert steps(workflow)[-1] is down, "tearing the stack down should be the last step"


def test_an_optional_step_crash_tests_the_users_own_consumer(workflow):
    step = step_running(workflow, "harness run custom")
    assert "HARNESS_CONSUMER_CMD" in step.get("if", ""), "the step must be optional"
    for text in ("--worker-cmd", "--expect exactly-once", "--stack compose"):
        assert text in step["run"]
    assert "${{" not in step["run"], "the command reaches the shell through env, not by expansion in the script"
    names = [s.get("name") for s in steps(workflow)]
    assert names.index(step["name"]) > names.index("Compare with the previous nightly"), \
        "a violation must not skip the comparison of the suite"
