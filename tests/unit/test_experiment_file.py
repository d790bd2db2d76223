"""Experiment files: every file in experiments/ loads and validates, the schema follows the declarations,
each default file reproduces the run today's suite code builds for its experiment, and a bad file is one
line naming the file and the key (exit 2). No stack: every refusal comes before one would start."""

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest

from harness.run import experiment_file as ef
from harness.run import suite_runner
from harness.cli.commands.run import run as run_cmd
from harness.cli.commands.suite import SUITE_OPTIONS
from harness.core.errors import HarnessError
from harness.faults import FAULTS
from harness.run.params import RunParams, declared, resolve

ROOT = Path(__file__).resolve().parents[2]
FILES = sorted((ROOT / "experiments").rglob("*.toml")) + sorted(
    p for p in (ROOT / "examples").rglob("*.toml") if p.name != "pyproject.toml")   # a project's, not a run's


def test_there_are_files_in_every_suite_group_and_beyond():
    groups = {p.parent.name for p in FILES}
    assert set(suite_runner.groups()) | {"faults", "findings"} <= groups


@pytest.mark.parametrize("path", FILES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_file_loads_validates_and_resolves(path):
    f = ef.load(path)
    jsonschema.Draft202012Validator(ef.schema()).validate(__import__("tomllib").loads(path.read_text()))
    resolve(RunParams(f.experiment, faults=f.faults, **f.options))
    assert f.purpose and "\n" not in f.purpose


def test_the_schema_lists_every_declared_option_kind_and_fault():
    s = ef.schema()
    assert set(s["properties"]["options"]["properties"]) == set(declared())
    messages = s["properties"]["options"]["properties"]["messages"]
    assert messages["type"] == "integer" and messages["minimum"] == 1 and messages["maximum"] == 1_000_000
    assert s["properties"]["options"]["properties"]["kill_mode"]["enum"] == ["points", "random"]
    patterns = [p["pattern"] for p in s["properties"]["faults"]["items"]["anyOf"]]
    assert all(any(re.search(p, name) for p in patterns) for name in FAULTS)
    assert any(re.search(p, "latency:ms=5,jitter=1") for p in patterns)
    assert not any(re.search(p, "latency:jiter=1") for p in patterns)
    jsonschema.Draft202012Validator.check_schema(s)


def _params_of(argv: list[str]) -> RunParams:
    """The resolved parameters `harness run` builds from these arguments (parsed by the command itself)."""
    ctx = run_cmd.make_context("run", list(argv[1:]))
    options = {k: v for k, v in ctx.params.items() if k in declared()}
    target = ctx.params["experiment"]
    if ef.is_file_argument(target):
        values, faults, _ = ef.run_kwargs(ef.load(target), options, ctx.params["fault_specs"])
        return resolve(RunParams(ef.load(target).experiment, faults=faults, **values)).params
    return resolve(RunParams(target, faults=ctx.params["fault_specs"], **options)).params


@pytest.mark.parametrize("name", [n for names in suite_runner.groups().values() for n in names])
def test_each_default_file_gives_the_run_the_suite_code_builds(name, tmp_path):
    group = next(g for g, names in suite_runner.groups().items() if name in names)
    path = ROOT / "experiments" / group / f"{name}.toml"
    common = [x for o in SUITE_OPTIONS for x in (o.flag, str(o.default))]      # today's suite: every default given
    from_code = _params_of(suite_runner.run_command(name, common, tmp_path / name))
    from_file = _params_of(suite_runner.run_command(name, [], tmp_path / name, (path, ef.load(path).experiment)))
    assert from_file.as_dict() == from_code.as_dict()
    assert from_file.experiment == from_code.experiment and from_file.faults == from_code.faults


def test_the_default_suite_runs_its_files_which_are_the_code_groups_runs():
    """`harness suite` and `harness suite --group G` run experiments/<group>/'s files: each group's folder holds
    exactly the runs the declarations put in that group, in the registry's order (the suite report's rows);
    each file's run equals the code's (the test above)."""
    from harness.cli.commands.suite import default_runs
    given = {o.name: None for o in SUITE_OPTIONS}
    for group, names in suite_runner.groups().items():
        got, files, common = default_runs(group, given, None, False)
        assert got == names and common == [], group
        assert {n: kind for n, (_, kind) in files.items()} == {n: n for n in names}
        assert all(path.resolve().parent == (ROOT / "experiments" / group).resolve() for path, _ in files.values())
        assert {p.stem for p in (ROOT / "experiments" / group).glob("*.toml")} == set(names), group
    got, files, _ = default_runs(None, {**given, "seed": 7}, None, False)
    assert got == suite_runner.suite_experiments() == suite_runner.parse_experiments(None)
    got, files, common = default_runs(None, {**given, "seed": 7}, "java", False)
    assert common == ["--seed", "7", "--client", "java"]
    with pytest.raises(HarnessError, match=r"unknown --group 'cor'; did you mean 'core'"):
        default_runs("cor", given, None, False)


def test_a_suites_file_is_named_from_the_folder_it_runs_in_when_it_lies_there(tmp_path, monkeypatch):
    """The runs' command lines and reports name a file under the suite's folder relatively (a reference report
    kept in the repository names experiments/core/dedupe.toml, not one machine's checkout), and any other file
    by its absolute path."""
    from harness.cli.commands.suite import default_runs, file_runs
    given = {o.name: None for o in SUITE_OPTIONS}
    monkeypatch.chdir(ROOT)
    _, files, _ = default_runs("core", given, None, False)
    assert files["dedupe"][0] == Path("experiments/core/dedupe.toml")
    elsewhere = tmp_path / "nightly"
    elsewhere.mkdir()
    (elsewhere / "dedupe.toml").write_text((ROOT / "experiments" / "core" / "dedupe.toml").read_text())
    monkeypatch.chdir(ROOT / "docs")
    _, files, _, _ = file_runs(str(elsewhere), given, None, False)
    assert files["dedupe"][0] == (elsewhere / "dedupe.toml").resolve() and files["dedupe"][0].is_absolute()


def test_flags_beside_a_file_override_it_and_are_named():
    f = ef.load(ROOT / "experiments" / "mistakes" / "auto-commit.toml")
    given = {name: (False if d.option.type is bool else None) for name, d in declared().items()}
    values, faults, over = ef.run_kwargs(f, {**given, "kills": 3, "messages": 50}, ("random-kill",))
    assert values["kills"] == 3 and values["messages"] == 50 and values["auto_commit_interval_ms"] == 100
    assert faults == ("random-kill",) and over == ["--fault", "--kills", "--messages"]
    values, faults, over = ef.run_kwargs(f, given)
    assert values["kills"] == 10 and faults == () and over == []


def test_the_example_consumers_files_are_their_readme_command_lines():
    readme = (ROOT / "examples" / "consumers" / "README.md").read_text()
    for name in ("correct", "wrong"):
        line = next(x for x in readme.splitlines() if f"python/{name}.py](" in x)
        from_readme = _params_of(["run", *shlex.split(line.split("`harness run ")[1].split("`")[0])])
        from_file = _params_of(["run", str(ROOT / "examples" / "consumers" / f"{name}.toml")])
        assert from_file.as_dict() == from_readme.as_dict()


def test_float_options_are_floats_as_from_the_command_line(tmp_path):
    p = tmp_path / "x.toml"
    p.write_text('purpose = "p"\nexperiment = "key-expiry"\n[options]\nrestart_delay = 1\n')
    assert type(ef.load(p).options["restart_delay"]) is float


BAD = {
    "unknown-option": ('[options]\nmesages = 10\n', ["mesages", "did you mean 'messages'"]),
    "unknown-top": ('fault = ["planned-crash"]\n', ["'fault'", "did you mean 'faults'", "valid keys"]),
    "wrong-type": ('[options]\nmessages = "ten"\n', ["options.messages", "a whole number", "'ten'"]),
    "bool-as-int": ('[options]\nmessages = true\n', ["options.messages", "a whole number"]),
    "out-of-range": ('[options]\nmessages = 0\n', ["options.messages", "at least 1", "at most 1,000,000"]),
    "bad-choice": ('[options]\nkill_mode = "randon"\n', ["options.kill_mode", "did you mean 'random'",
                                                          "one of points, random"]),
    "bad-fault": ('faults = ["brokr-kill"]\n', ["faults.0", "did you mean 'broker-kill'", "planned-crash"]),
    "bad-fault-key": ('faults = ["latency:ms=5,jiter=1"]\n', ["faults.0", "'jiter'", "did you mean 'jitter'"]),
    "bad-stack": ('[stack]\nbrokers = 2\n', ["stack.brokers", "one of 1, 3"]),
    "bad-kind": ('experiment = "ofset-after"\n', ["experiment must be one of", "got 'ofset-after'",
                                                  "did you mean 'offset-after'"]),
    "not-toml": ('[options\n', ["not valid TOML"]),
    "wrong-owner": ('[options]\ndedupe_ttl = 1.0\n', ["--dedupe-ttl applies to"]),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_a_bad_file_is_one_line_naming_it_and_exit_2(case, tmp_path):
    body, words = BAD[case]
    path = tmp_path / f"{case}.toml"
    head = "" if body.startswith("experiment") else 'experiment = "offset-after"\n'
    path.write_text('purpose = "a bad file"\n' + head + body)
    env = {**os.environ, "PYTHONPATH": str(ROOT), "HARNESS_HOME": str(tmp_path / "home")}
    env.pop("HARNESS_BOOTSTRAP_SERVERS", None)
    env.pop("HARNESS_POSTGRES_DSN", None)
    proc = subprocess.run([sys.executable, "-m", "harness.cli", "run", str(path)], env=env, capture_output=True,
                          text=True, timeout=120, cwd=tmp_path)
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert lines[0].startswith(f"error: {path}: "), lines[0]
    for word in words:
        assert word in lines[0], (word, lines[0])
    assert not (tmp_path / "home").exists() or not any((tmp_path / "home").rglob("report.json"))


def test_a_large_or_odd_file_is_refused_in_one_line(tmp_path):
    big = tmp_path / "big.toml"
    big.write_text("# " + "x" * ef.MAX_BYTES + "\n")
    with pytest.raises(HarnessError, match="larger than"):
        ef.load(big)
    with pytest.raises(HarnessError, match="not a regular file"):
        ef.load(tmp_path)
    with pytest.raises(HarnessError, match="cannot read"):
        ef.load(tmp_path / "missing.toml")
    (tmp_path / "deep.toml").write_text("x = " + "[" * 30000 + "]" * 30000 + "\n")
    with pytest.raises(HarnessError, match="nested too deeply"):
        ef.load(tmp_path / "deep.toml")
    (tmp_path / "bin.toml").write_bytes(b"\xff\xfe")
    with pytest.raises(HarnessError, match="not UTF-8"):
        ef.load(tmp_path / "bin.toml")


def test_a_group_name_maps_to_its_folder_and_a_wrong_one_names_the_groups():
    assert ef.folder_of("core").resolve() == (ROOT / "experiments" / "core").resolve() or Path("core").is_dir()
    with pytest.raises(HarnessError, match="did you mean 'core'"):
        ef.folder_of("cor")
    assert [p.stem for p in ef.files_in(ROOT / "experiments" / "core")] == ["dedupe", "offset-after", "offset-before"]


def test_the_experiments_command_lists_files_and_prints_the_schema():
    from click.testing import CliRunner
    from harness.cli.commands.experiments import experiments_cmd
    out = CliRunner().invoke(experiments_cmd, [])
    assert out.exit_code == 0 and "core/offset-before.toml  [offset-before]" in out.output
    out = CliRunner().invoke(experiments_cmd, ["--schema"])
    assert out.exit_code == 0 and '"messages"' in out.output


def _cli(tmp_path, *args):
    env = {**os.environ, "PYTHONPATH": str(ROOT), "HARNESS_HOME": str(tmp_path / "home")}
    env.pop("HARNESS_BOOTSTRAP_SERVERS", None)
    env.pop("HARNESS_POSTGRES_DSN", None)
    return subprocess.run([sys.executable, "-m", "harness.cli", *args], env=env, capture_output=True, text=True,
                          timeout=120, cwd=ROOT)


def test_suite_of_a_folder_refuses_a_bad_file_or_group_in_one_line(tmp_path):
    folder = tmp_path / "nightly"
    folder.mkdir()
    (folder / "a.toml").write_text('purpose = "fine"\nexperiment = "dedupe"\n')
    (folder / "b.toml").write_text('purpose = "bad"\nexperiment = "dedupe"\n[options]\nseed = 1.5\n')
    for args, words in ((["suite", str(folder)], [f"{folder / 'b.toml'}: options.seed must be a whole number"]),
                        (["suite", "cor"], ["did you mean 'core'", "groups: "]),
                        (["suite", "core", "--group", "eos"], ["without --experiments and --group"]),
                        (["suite", "core", "--commit-every", "0"], ["--commit-every must be"])):
        proc = _cli(tmp_path, *args)
        lines = proc.stderr.strip().splitlines()
        assert proc.returncode == 2 and len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr
        assert all(w in lines[0] for w in words), lines[0]
    assert not (tmp_path / "home").exists() or not any((tmp_path / "home").rglob("suite.json"))


def test_a_report_names_its_file_and_overrides_escaped_and_valid():
    from harness.reporting import html, markdown
    from harness.reporting.run_report import RunReport
    from tests.unit.sample_report import sample, validate
    d = sample()
    d["source"] = {"file": "nightly/<b>x`y.toml", "purpose": "a *purpose* <script>", "overridden": ["--messages"]}
    validate(d)
    md, page = markdown.render(RunReport(d)), html.render(RunReport(d))
    line = next(x for x in md.splitlines() if x.startswith("*From the experiment file*"))
    assert "``nightly/" in line and line.endswith("flags that overrode it: --messages") and "*purpose*" not in line
    assert "&lt;script&gt;" in page and "<script>" not in page and "nightly/&lt;b&gt;x`y.toml" in page
    d["source"] = {"file": "a.toml", "purpose": "p", "overridden": [], "extra": 1}
    with pytest.raises(Exception):
        validate(d)
    del d["source"]
    validate(d)
    assert "From the experiment file" not in markdown.render(RunReport(d))


def test_a_group_name_is_the_group_even_beside_a_folder_of_that_name(tmp_path, monkeypatch):
    """`harness suite core` in a folder that holds a `core/` of its own (and no experiments/) runs the group
    (it said "core holds no .toml file"); `./core` names the local folder."""
    (tmp_path / "core").mkdir()
    monkeypatch.chdir(tmp_path)
    assert ef.folder_of("core").resolve() == ef.experiments_root().joinpath("core").resolve() != (tmp_path / "core")
    assert ef.folder_of("./core") == Path("./core")
