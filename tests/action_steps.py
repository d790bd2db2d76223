"""Runs a composite action's `run:` steps in order, as a GitHub runner would, on this machine.

GitHub is not reachable from the tests, so the action's own shell steps are run here with what the
runner gives them: bash with `-eo pipefail`, the step's `env:` (its `${{ }}` expressions evaluated
against the inputs, the earlier steps' outputs and outcomes, and the runner's folders), and the
GITHUB_OUTPUT, GITHUB_ENV and GITHUB_STEP_SUMMARY files. Steps that `uses:` another action
(setup-python, the artifacts) are GitHub's part and are skipped, as outcome `skipped`.

The expression evaluator knows only what action.yml uses: context lookups (`inputs.x`,
`steps.id.outputs.y`, `steps.id.outcome`, `runner.temp`, `github.action_path`), string literals,
`==`, `!=`, `&&`, `||`, `!`, parentheses and `always()`, `success()`, `failure()`. Anything else
raises, so the test fails instead of guessing.
"""

from __future__ import annotations

import os
import re
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

import yaml

TOKEN = re.compile(r"\s*(?:(?P<str>'(?:[^']|'')*')|(?P<op>==|!=|&&|\|\||!|\(|\))|(?P<name>[A-Za-z_][\w.-]*(?:\(\))?))")
EXPR = re.compile(r"\$\{\{(.*?)\}\}")
# A step of the action may start a stack or run a suite: minutes, not hours.
STEP_TIMEOUT_S = 1800


@dataclass
class StepResult:
    name: str
    outcome: str            # success, failure or skipped
    returncode: int | None = None
    stdout: str = ""
    stderr: str = ""


@dataclass
class ActionRun:
    steps: list[StepResult] = field(default_factory=list)
    summary: str = ""

    def step(self, name: str) -> StepResult:
        return next(s for s in self.steps if s.name == name)

    @property
    def failed(self) -> bool:
        return any(s.outcome == "failure" for s in self.steps)


class Evaluator:
    def __init__(self, context: dict, failed: bool):
        self.context, self.failed = context, failed

    def __call__(self, expr: str):
        self.tokens = [next(m.group(k) for k in ("str", "op", "name") if m.group(k) is not None)
                       for m in TOKEN.finditer(expr)]
        if "".join(self.tokens).replace(" ", "") != re.sub(r"\s+", "", expr):
            raise ValueError(f"expression not understood: {expr!r}")
        self.pos = 0
        value = self.or_()
        if self.pos != len(self.tokens):
            raise ValueError(f"expression not understood: {expr!r}")
        return value

    def peek(self):
        return self.tokens[self.pos] if self.pos < len(self.tokens) else None

    def take(self):
        self.pos += 1
        return self.tokens[self.pos - 1]

    def or_(self):
        v = self.and_()
        while self.peek() == "||":
            self.take()
            right = self.and_()
            v = v or right
        return v

    def and_(self):
        v = self.cmp()
        while self.peek() == "&&":
            self.take()
            right = self.cmp()
            v = v and right
        return v

    def cmp(self):
        v = self.unary()
        while self.peek() in ("==", "!="):
            op, right = self.take(), self.unary()
            v = (str(v) == str(right)) if op == "==" else (str(v) != str(right))
        return v

    def unary(self):
        if self.peek() == "!":
            self.take()
            return not self.unary()
        if self.peek() == "(":
            self.take()
            v = self.or_()
            assert self.take() == ")"
            return v
        tok = self.take()
        if tok.startswith("'"):
            return tok[1:-1].replace("''", "'")
        if tok.endswith("()"):
            return {"always()": True, "success()": not self.failed, "failure()": self.failed}[tok]
        value = self.context
        for part in tok.split("."):
            if not isinstance(value, dict):
                raise ValueError(f"{tok} is not in the context")
            value = value.get(part, {})
        return "" if value == {} else value         # a missing name is empty, as on GitHub


def expand(text: str, evaluate: Evaluator) -> str:
    return EXPR.sub(lambda m: str(evaluate(m.group(1))), str(text))


def run_composite(action_yml: Path, inputs: dict, cwd: Path, temp: Path, env: dict,
                  stand_ins: dict | None = None) -> ActionRun:
    """Every step of `action_yml` in order, in `cwd`, with `inputs` over the declared defaults.

    `stand_ins` maps the id of a `uses:` step to a function of the step's evaluated `with:` that does its
    part here and returns its outputs (the previous run's artifact, copied from a folder)."""
    action = yaml.safe_load(action_yml.read_text())
    declared = action.get("inputs") or {}
    unknown = set(inputs) - set(declared)
    if unknown:
        raise ValueError(f"inputs the action does not declare: {sorted(unknown)}")
    values = {name: str(inputs.get(name, spec.get("default", ""))) for name, spec in declared.items()}
    summary, output_dir = temp / "step_summary.md", temp / "outputs"
    summary.write_text("")
    output_dir.mkdir(exist_ok=True)
    steps_ctx: dict = {}
    context = {"inputs": values, "steps": steps_ctx, "runner": {"temp": str(temp)},
               "github": {"action_path": str(action_yml.parent), "event": {"repository": {"default_branch": "main"}}}}
    run = ActionRun()
    base = {**os.environ, **env, "GITHUB_ACTION_PATH": str(action_yml.parent), "RUNNER_TEMP": str(temp),
            "GITHUB_STEP_SUMMARY": str(summary), "GITHUB_WORKSPACE": str(cwd), "CI": "true", "GITHUB_ACTIONS": "true"}
    for i, step in enumerate(action["runs"]["steps"]):
        name = step.get("name", f"step {i}")
        evaluate = Evaluator(context, run.failed)
        cond = step.get("if")
        wanted = evaluate(cond) if cond is not None else not run.failed
        if isinstance(cond, str) and not re.search(r"always\(\)|failure\(\)", cond) and run.failed:
            wanted = False          # GitHub adds success() to a condition without a status function
        if "uses" in step and wanted and step.get("id") in (stand_ins or {}):
            with_ = {k: expand(v, evaluate) for k, v in (step.get("with") or {}).items()}
            run.steps.append(StepResult(name, "success"))
            _record(steps_ctx, step, "success", stand_ins[step["id"]](with_))
            continue
        if "uses" in step or not wanted:
            run.steps.append(StepResult(name, "skipped"))
            _record(steps_ctx, step, "skipped", {})
            continue
        out_file = output_dir / f"{i}.out"
        out_file.write_text("")
        step_env = {k: expand(v, evaluate) for k, v in (step.get("env") or {}).items()}
        script = temp / f"step-{i}.sh"
        script.write_text(step["run"])
        assert step.get("shell") == "bash", f"step {name!r} has no `shell: bash`"
        proc = subprocess.run(["bash", "--noprofile", "--norc", "-eo", "pipefail", str(script)], cwd=cwd,
                              env={**base, **step_env, "GITHUB_OUTPUT": str(out_file)},
                              capture_output=True, text=True, timeout=STEP_TIMEOUT_S)
        outcome = "success" if proc.returncode == 0 else "failure"
        outputs = dict(line.split("=", 1) for line in out_file.read_text().splitlines() if "=" in line)
        run.steps.append(StepResult(name, outcome, proc.returncode, proc.stdout, proc.stderr))
        _record(steps_ctx, step, outcome, outputs)
    run.summary = summary.read_text()
    return run


def _record(steps_ctx: dict, step: dict, outcome: str, outputs: dict) -> None:
    if step.get("id"):
        steps_ctx[step["id"]] = {"outcome": outcome, "conclusion": outcome, "outputs": outputs}
