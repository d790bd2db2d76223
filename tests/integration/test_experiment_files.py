"""An experiment file runs exactly as its command line: two short runs on the session stack, one from
experiments/core/offset-after.toml and one from the equivalent flags, give the same report but for ids and
times; the file's run records the file and the flag that overrode it."""

import json

import pytest

from harness.run.runner import EXIT_CODES
from tests.conftest import ROOT, harness
from tests.unit.sample_report import validate

pytestmark = pytest.mark.integration

# What differs between two runs of the same parameters: their ids (in names of topics, tables, groups) and
# their times (wall clock, durations, restart and stall times, the progress samples).
VOLATILE = {"run_id", "stack", "environment", "timings", "timeline", "restarts", "source", "history"}
TIME_WORDS = ("seconds", "_at", "time", "_ms", "_s", "_ts", "t0", "wall", "elapsed", "pid")


def stable(value):
    """The report without its ids and times."""
    if isinstance(value, dict):
        return {k: stable(v) for k, v in value.items()
                if k not in VOLATILE and not any(w in k for w in TIME_WORDS)}
    if isinstance(value, list):
        return [stable(v) for v in value]
    return value


def run_report(stack, tmp_path, name, *args) -> dict:
    out = tmp_path / name
    proc = harness("run", *args, "--quiet", "--out", str(out), env=stack["env"], timeout=600)
    assert proc.returncode == EXIT_CODES["as-predicted"], proc.stderr[-3000:]
    d = json.loads((out / "report.json").read_text())
    validate(d)
    return d


def test_a_file_runs_as_its_command_line(stack, tmp_path):
    file = ROOT / "experiments" / "core" / "offset-after.toml"
    from_file = run_report(stack, tmp_path, "file", str(file), "--messages", "60")
    from_flags = run_report(stack, tmp_path, "flags", "offset-after", "--messages", "60")
    assert from_file["source"] == {"file": str(file), "purpose": from_file["source"]["purpose"],
                                   "overridden": ["--messages"]}
    assert "source" not in from_flags
    assert from_file["params"] == from_flags["params"] and from_file["params"]["messages"] == 60
    assert from_file["counts"]["duplicates"] == from_flags["counts"]["duplicates"] == 6
    assert stable(from_file) == stable(from_flags)
    assert from_file["crashes"] and stable(from_file["crashes"]) == stable(from_flags["crashes"])
    said = [line for line in (tmp_path / "file" / "report.md").read_text().splitlines()
            if line.startswith("*From the experiment file*")]
    assert len(said) == 1 and "offset-after.toml" in said[0] and said[0].endswith("overrode it: --messages")


def test_a_group_of_files_runs_as_the_suite_code_group(stack, tmp_path):
    """`harness suite --group core` (the default suite's runs come from the files of experiments/core/) gives
    the verdicts and numbers of the same experiments named with --experiments (their declarations' suite
    arguments, in code) on the same seed."""
    summaries = {}
    code = ["--experiments", "offset-before,offset-after,dedupe"]
    for name, args in (("files", ["--group", "core"]), ("code", code)):
        out = tmp_path / name
        proc = harness("suite", *args, "--messages", "60", "--quiet", "--out", str(out), env=stack["env"],
                       timeout=900)
        assert proc.returncode == 0, proc.stderr[-3000:]
        summaries[name] = json.loads((out / "suite.json").read_text())

    def numbers(summary):
        return {r["experiment"]: (r["verdict"], r["counts"], r["ledger"], r["crashes"], r["params"])
                for r in summary["experiments"]}
    assert set(numbers(summaries["files"])) == {"offset-before", "offset-after", "dedupe"}
    assert numbers(summaries["files"]) == numbers(summaries["code"])
    report = json.loads((tmp_path / "files" / "dedupe" / "report.json").read_text())
    assert report["source"]["file"].endswith("experiments/core/dedupe.toml")
    assert report["source"]["overridden"] == ["--messages", "--time-limit"]
