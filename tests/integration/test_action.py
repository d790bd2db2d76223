"""The GitHub Action (action.yml) run step by step, as a runner would, in a user's repository.

The repository is a temporary git repository holding only the user's consumer
(examples/consumers/python/correct.py or wrong.py, copied there as consumer.py)
and the workflow the CI page (docs/ci.md) gives users to copy; the action gets
that workflow's `with:`, made small (SHORT) and on the local stack. The action's
own shell steps run in order (tests/action_steps.py: bash -eo pipefail, the
step's env with its expressions evaluated, GITHUB_OUTPUT and
GITHUB_STEP_SUMMARY files); the steps that use other actions (setup-python,
the artifacts) are GitHub's. The stack is the action's `stack: local` on the
session's running stack (the compose engine is slow to start; its commands are
the same `harness up`/`down`). The first run installs the harness as the
action does (a virtual environment, pip from the package registry, about half a
minute); the second uses `install: false`, the interpreter of this test.
"""

import re
import shlex
import shutil
import subprocess
import sys

import pytest
import yaml

from tests.action_steps import run_composite
from tests.conftest import ROOT, processes_of

pytestmark = pytest.mark.integration

CONSUMERS = ROOT / "examples" / "consumers" / "python"
# Small: a few kills in a short run are enough for wrong.py (offsets committed every 200 payments) to
# charge payments twice, and for correct.py to show that it does not.
SHORT = {"messages": "1200", "kills": "6", "workers": "2", "partitions": "2"}


# What the user's workflow names in place of this repository (docs/ci.md)
THIS_ACTION = "OWNER/harness@"


def docs_workflow() -> str:
    """The workflow the CI page gives users to copy: its first yaml block."""
    block = re.search(r"```yaml\n(.*?)```", (ROOT / "docs" / "ci.md").read_text(), re.S)
    assert block, "docs/ci.md has no yaml block"
    return block.group(1)


def action_inputs(workflow: str) -> dict:
    """The `with:` of the workflow's one step that uses this repository's action."""
    jobs = yaml.safe_load(workflow)["jobs"].values()
    (step,) = [s for job in jobs for s in job["steps"] if str(s.get("uses", "")).startswith(THIS_ACTION)]
    return {k: str(v) for k, v in step["with"].items()}


def user_repository(tmp_path, consumer: str):
    repo = tmp_path / "user-repo"
    (repo / ".github" / "workflows").mkdir(parents=True)
    shutil.copy(CONSUMERS / consumer, repo / "consumer.py")
    (repo / ".github" / "workflows" / "crash-test.yml").write_text(docs_workflow())
    subprocess.run(["git", "init", "-q", str(repo)], check=True, timeout=60)
    subprocess.run(["git", "-C", str(repo), "add", "."], check=True, timeout=60)
    bin_dir = tmp_path / "bin"      # `python` and `python3` on PATH: this test's interpreter, which has the
    bin_dir.mkdir()                 # consumer's clients (the job's set-up Python; python3 for install: false)
    for name in ("python", "python3"):
        (bin_dir / name).write_text(f"#!/bin/sh\nexec {shlex.quote(sys.executable)} \"$@\"\n")
        (bin_dir / name).chmod(0o755)
    temp = tmp_path / "runner-temp"
    temp.mkdir()
    env = {"PATH": f"{bin_dir}:{subprocess.os.environ['PATH']}", "PYTHONPATH": str(ROOT)}
    return repo, temp, env


def run_action(stack, tmp_path, consumer, install="false", stand_ins=None):
    repo, temp, env = user_repository(tmp_path, consumer)
    workflow = (repo / ".github" / "workflows" / "crash-test.yml").read_text()
    inputs = {**action_inputs(workflow), "stack": "local", "install": install, **SHORT}
    return run_composite(ROOT / "action.yml", inputs, repo, temp, {**env, "HARNESS_HOME": stack["env"]["HARNESS_HOME"]},
                         stand_ins=stand_ins)


def log(run) -> str:
    return "\n".join(f"--- {s.name}: {s.outcome}\n{s.stdout[-1500:]}{s.stderr[-2500:]}" for s in run.steps)


def test_the_action_passes_a_correct_consumer_and_fails_a_wrong_one_naming_its_ids(stack, tmp_path):
    good = run_action(stack, tmp_path / "correct", "correct.py", install="true")
    assert not good.failed, log(good)
    venv = next(tmp_path.glob("correct/runner-temp/harness-venv"))
    assert good.step("Install the harness").stdout.strip().endswith("harness, version " + version()), log(good)
    assert (venv / "bin" / "harness").is_file()
    ran = [s.name for s in good.steps if s.outcome == "success"]
    assert ran == ["Install the harness", "Prepare the state and report folders", "Start Kafka and PostgreSQL",
                   "Crash-test the consumer", "Write the job summary", "Judge the runs"], ran
    assert "reusing the local stack" in good.step("Start Kafka and PostgreSQL").stdout, \
        "a stack that was up is reused, and left running"
    assert good.summary.startswith("# custom: as-predicted"), good.summary[:500]
    assert f"| command | {action_inputs(docs_workflow())['worker-cmd']} |" in good.summary, \
        "the consumer ran as the user's workflow names it"
    assert "- lost (0)" in good.summary and "- duplicated (0)" in good.summary, good.summary
    reports = next(tmp_path.glob("correct/runner-temp/crash-test.*/reports"))

    def previous_artifact(with_):
        shutil.copytree(reports, with_["path"])
        return {"found_artifact": "true"}

    bad = run_action(stack, tmp_path / "wrong", "wrong.py", stand_ins={"previous": previous_artifact})
    judge = bad.step("Judge the runs")
    assert judge.outcome == "failure" and judge.returncode == 1, log(bad)
    assert "fail-on rule" in judge.stdout
    assert [s.name for s in bad.steps if s.outcome == "failure"] == ["Judge the runs"], log(bad)
    assert bad.summary.startswith("# custom: unexpected"), bad.summary[:500]
    import json
    report = json.loads(next(tmp_path.glob("wrong/runner-temp/crash-test.*/reports/custom/report.json")).read_text())
    named = report["verdict_detail"]["differing_ids"]["duplicates"]
    assert named, json.dumps(report["verdict_detail"])
    assert all(str(i) in bad.summary for i in named[:5]), "the summary must name the duplicated ids"
    assert f"- duplicated ({report['anomalies']['duplicates_total']:,})" in bad.summary
    assert "compared with the previous successful run" in bad.summary and "as-predicted" in bad.summary
    # The stack was the session's: reused, not stopped (the action stops only a stack it started).
    assert bad.step("Stop the stack").outcome == "skipped"
    assert processes_of(stack_home_of(stack)), "the session's stack was stopped by the action"


def version() -> str:
    from harness import __version__
    return __version__


def stack_home_of(stack):
    from pathlib import Path
    return Path(stack["env"]["HARNESS_HOME"])
