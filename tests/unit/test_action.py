"""Checks of the composite GitHub Action (action.yml) and of every `uses:` pin.

actionlint validates workflows, not an action's metadata, so the action's
structure is checked here: each input declared with a description and used,
each expression names an input or an earlier step that exists, each `run:` step
has its shell and takes inputs only through env (an input expanded inside a
script is shell injection), the steps after the runs still run when a run
failed, and the stack is stopped only when the action started it.
tests/integration/test_action.py runs the steps themselves.

Pins: each `uses:` of another repository's action names a release (its exact tag) that
was checked against that action's published releases, and says which in a
comment on its line; CONFIRMED is the record of that check.
"""

import re
import shlex
import sys
from pathlib import Path

import pytest
import yaml

from tests.action_steps import Evaluator, run_composite

ROOT = Path(__file__).resolve().parents[2]
ACTION = ROOT / "action.yml"
# The workflows, the action, and the workflow the CI page gives users to copy
PINNED_FILES = [ACTION, *sorted((ROOT / ".github" / "workflows").glob("*.yml")), ROOT / "docs" / "ci.md"]
# What a user's workflow names in place of this repository (docs/ci.md)
THIS_ACTION = "OWNER/harness"
# action -> (the pin used, the release it resolves to, as the comment names it). Checked against each
# action's published releases: actions/checkout v6.0.0 to v6.0.3, actions/setup-python v6.0.0,
# actions/upload-artifact v6.0.0, dawidd6/action-download-artifact v21 (v20...v21 in its changelog).
# Checked again on 2026-12-07 against the tags of each repository: v6 and v6.1.0 of actions/checkout are
# one commit, as are v6 and v6.3.0 of actions/setup-python, and v6 and v6.0.0 of actions/upload-artifact;
# dawidd6/action-download-artifact's newest tag is v21. Each of the first three also has a v7 by then.
CONFIRMED = {
    "actions/checkout": ("v6.1.0", "v6.1.0"),          # v6 pointed at v6.1.0 when checked, not v6.0.3
    "actions/setup-python": ("v6.3.0", "v6.3.0"),      # v6 pointed at v6.3.0, not v6.0.0
    "actions/upload-artifact": ("v6.0.0", "v6.0.0"),
    "dawidd6/action-download-artifact": ("v21", "v21"),
}
EXPR = re.compile(r"\$\{\{(.*?)\}\}")


@pytest.fixture(scope="module")
def action() -> dict:
    doc = yaml.safe_load(ACTION.read_text())
    assert isinstance(doc, dict)
    return doc


def expressions(node) -> list[str]:
    if isinstance(node, dict):
        return [e for v in node.values() for e in expressions(v)]
    if isinstance(node, list):
        return [e for v in node for e in expressions(v)]
    return [m.group(1).strip() for m in EXPR.finditer(str(node))]


def conditions(doc: dict) -> list[str]:
    return [s["if"] for s in doc["runs"]["steps"] if "if" in s]


def test_is_a_composite_action_with_described_inputs(action):
    assert action.get("name") and action.get("description")
    assert action["runs"]["using"] == "composite"
    for name, spec in action["inputs"].items():
        assert re.fullmatch(r"[a-z][a-z0-9-]*", name), f"input {name!r}: name it like the CLI's option"
        assert spec.get("description"), f"input {name!r} has no description"
        assert "default" in spec or spec.get("required"), f"input {name!r} has neither a default nor required"
    for option in ("worker-cmd", "expect", "experiments", "group", "kafka-version", "messages", "kills",
                   "workers", "partitions", "fail-on", "python-version", "stack"):
        assert option in action["inputs"], f"no input {option}"
    assert action["inputs"]["stack"]["default"] == "compose"


def test_every_input_and_step_named_in_an_expression_exists(action):
    inputs, seen, used = set(action["inputs"]), set(), set()
    for step in action["runs"]["steps"]:
        for expr in expressions({k: v for k, v in step.items() if k != "if"}) + [step.get("if", "")]:
            for name in re.findall(r"\binputs\.([\w-]+)", expr):
                assert name in inputs, f"step {step['name']!r} uses undeclared input {name!r}"
                used.add(name)
            for sid in re.findall(r"\bsteps\.([\w-]+)\.", expr):
                assert sid in seen, f"step {step['name']!r} reads step {sid!r}, which is not an earlier step"
        if step.get("id"):
            seen.add(step["id"])
    for expr in expressions(action.get("outputs", {})):
        for sid in re.findall(r"\bsteps\.([\w-]+)\.", expr):
            assert sid in seen
    assert used == inputs, f"inputs declared but never used: {sorted(inputs - used)}"


def test_run_steps_have_a_shell_and_take_inputs_only_through_env(action):
    for step in action["runs"]["steps"]:
        assert ("run" in step) != ("uses" in step), f"step {step.get('name')!r}: one of run or uses"
        assert step.get("name"), "every step has a name"
        if "run" in step:
            assert step.get("shell") == "bash", f"step {step['name']!r} has no shell"
            assert "${{" not in step["run"], f"step {step['name']!r} expands an expression inside its script"
            for name, value in (step.get("env") or {}).items():
                assert re.fullmatch(r"[A-Z][A-Z0-9_]*", name), name


def test_every_condition_parses_and_the_steps_after_the_runs_always_run(action):
    context = {"inputs": {k: "" for k in action["inputs"]}, "steps": {}}
    for cond in conditions(action):
        Evaluator(context, failed=False)(cond)       # raises on what tests/action_steps.py cannot run
    names = [s["name"] for s in action["runs"]["steps"]]
    after = names[names.index("Run the suite") + 1:]
    for step in action["runs"]["steps"]:
        if step["name"] in after:
            assert "always()" in step.get("if", ""), f"{step['name']!r} would be skipped after a failed run"
    assert names[-1] == "Stop the stack"
    assert names.index("Judge the runs") > names.index("Upload the report"), \
        "the report is uploaded before the judgement fails the step"


def test_the_runs_keep_their_exit_status_for_the_judge(action):
    by_name = {s["name"]: s for s in action["runs"]["steps"]}
    for name in ("Crash-test the consumer", "Run the suite"):
        script = by_name[name]["run"]
        assert "set +e" in script and 'echo "exit=$?" >> "$GITHUB_OUTPUT"' in script, name
    judge = by_name["Judge the runs"]["run"]
    assert "harness.cli compare" in judge and 'exit "$status"' in judge


def test_the_stack_is_stopped_only_when_the_action_started_it(action):
    by_name = {s["name"]: s for s in action["runs"]["steps"]}
    up, stop = by_name["Start Kafka and PostgreSQL"], by_name["Stop the stack"]
    assert "harness.cli status" in up["run"] and "harness.cli up" in up["run"]
    assert up["run"].index("started=true") < up["run"].index("harness.cli up"), \
        "recorded before the start: a half-started stack is stopped too"
    assert stop["if"] == "always() && steps.up.outputs.started == 'true'"
    assert "down --purge" in stop["run"]


def test_the_compose_password_is_generated_masked_and_private(action):
    prepare = next(s for s in action["runs"]["steps"] if s.get("id") == "prepare")["run"]
    assert "openssl rand" in prepare and "umask 077" in prepare and "::add-mask::" in prepare
    assert "compose.password" in prepare


def uses_lines() -> list[tuple[Path, int, str]]:
    found = []
    for path in PINNED_FILES:
        for n, line in enumerate(path.read_text().splitlines(), 1):
            m = re.match(r"\s*(?:-\s+)?uses:\s*(\S+)(.*)", line)
            if m:
                found.append((path, n, line))
    return found


def test_every_pin_names_a_confirmed_release_in_a_comment():
    lines = uses_lines()
    assert len(lines) >= 6
    for path, n, line in lines:
        m = re.match(r"\s*(?:-\s+)?uses:\s*(\S+)(.*)", line)
        target, rest = m.group(1), m.group(2)
        where = f"{path.relative_to(ROOT)}:{n}"
        if target.startswith(("./", f"{THIS_ACTION}@", f"{THIS_ACTION}/")):
            continue                      # this repository's own workflow or action
        repo, _, ref = target.partition("@")
        assert repo in CONFIRMED, f"{where}: {repo} has no confirmed release (add it to CONFIRMED once checked)"
        pin, release = CONFIRMED[repo]
        assert ref == pin, f"{where}: {repo}@{ref}, but the confirmed release is {pin}"
        assert re.search(rf"#\s*release {re.escape(release)}\b", rest), \
            f"{where}: say in a comment which release the pin is (# release {release})"


def test_the_evaluator_of_the_step_runner_reads_conditions_as_github_does():
    ctx = {"inputs": {"a": "", "b": "x"}, "steps": {"up": {"outputs": {"started": "true"}, "outcome": "success"}}}
    ev = Evaluator(ctx, failed=True)
    assert ev("inputs.a != '' || inputs.b != ''") is True
    assert ev("inputs.a != ''") is False
    assert ev("always() && steps.up.outputs.started == 'true'") is True
    assert ev("!failure()") is False
    assert ev("steps.nope.outputs.x == ''") is True          # an unknown step's output is empty, as on GitHub
    with pytest.raises((ValueError, KeyError)):
        ev("contains(inputs.a, 'x')")


def run_with(tmp_path, **inputs):
    """The action's steps with `inputs`, install: false (`python3` on PATH: this interpreter)."""
    bin_dir, temp, work = tmp_path / "bin", tmp_path / "temp", tmp_path / "work"
    for d in (bin_dir, temp, work):
        d.mkdir()
    (bin_dir / "python3").write_text(f"#!/bin/sh\nexec {shlex.quote(sys.executable)} \"$@\"\n")
    (bin_dir / "python3").chmod(0o755)
    import os
    env = {"PATH": f"{bin_dir}:{os.environ['PATH']}", "PYTHONPATH": str(ROOT), "HARNESS_HOME": str(tmp_path / "state")}
    return run_composite(ACTION, {"install": "false", **inputs}, work, temp, env)


def test_nothing_to_run_is_one_clear_error_and_starts_nothing(tmp_path):
    run = run_with(tmp_path)
    prepare = run.step("Prepare the state and report folders")
    assert prepare.outcome == "failure" and prepare.returncode == 2
    assert prepare.stdout.strip() == "::error::nothing to crash-test: set worker-cmd (your consumer), experiments or group"
    assert all(s.outcome == "skipped" for s in run.steps[run.steps.index(prepare) + 1:]), \
        [(s.name, s.outcome) for s in run.steps]
    assert not (tmp_path / "state").exists(), "a stack's state folder made for nothing"


def test_a_wrong_install_value_is_one_clear_error(tmp_path):
    run = run_with(tmp_path, install="yes", **{"worker-cmd": "python3 consumer.py"})
    install = run.step("Install the harness")
    assert install.outcome == "failure" and install.returncode == 2
    assert "install must be true or false" in install.stderr and "Traceback" not in install.stderr
    assert [s.outcome for s in run.steps[run.steps.index(install) + 1:]] == ["skipped"] * (len(run.steps) - 2)
