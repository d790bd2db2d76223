"""harness.api without a stack: options checked as `harness run` checks them, and the Report read from a
hand-made report.json; the pytest plugin's registration and its promise to import nothing heavy."""

import dataclasses
import json
import subprocess
import sys
import tomllib

import pytest

from harness.api.library import MAX_WITNESSES, Report, check_options, run
from harness.core.errors import HarnessError
from tests.conftest import ROOT
from tests.unit.sample_report import sample, validate


def test_an_unknown_option_names_the_nearest_and_every_valid_one():
    with pytest.raises(ValueError) as e:
        check_options("offset-before", {"mesages": 10})
    said = str(e.value)
    assert "unknown option 'mesages'" in said and "did you mean 'messages'?" in said
    assert "kill_point" in said and "worker_cmd" in said and "faults" in said and "\n" not in said


def test_run_refuses_a_bad_option_before_anything_starts(tmp_path):
    with pytest.raises(ValueError, match="did you mean 'kills'"):
        run("custom", out=tmp_path / "r", worker_cmd="python c.py", kils=3)
    assert not (tmp_path / "r").exists()


@pytest.mark.parametrize("options, said", [
    ({"messages": "ten"}, "option messages must be an int, got 'ten'"),
    ({"messages": True}, "option messages must be an int, got True"),
    ({"messages": 0}, "--messages must be at least 1, got 0"),
    ({"crash_rate": 2.0}, "--crash-rate must be"),
    ({"kill_mode": "sometimes"}, "--kill-mode must be one of points, random"),
    ({"no_history": "yes"}, "option no_history must be True or False"),
    ({"faults": [3]}, "option faults must be a list of --fault specs"),
    ({"expect": "exactly-once"}, "--expect applies to custom only"),
])
def test_a_bad_value_is_one_line_saying_what_it_must_be(options, said):
    with pytest.raises(ValueError) as e:
        check_options("offset-before", options)
    assert said in str(e.value) and "\n" not in str(e.value)


def test_an_unknown_experiment_names_the_kinds():
    with pytest.raises(ValueError, match=r"unknown experiment 'offset-befor'; did you mean 'offset-before'\? choose one of: offset-before"):
        check_options("offset-befor", {})


def test_the_options_become_the_flags_they_are_declared_as():
    argv = check_options("custom", {"worker_cmd": ["python", "my consumer.py"], "expect": "exactly-once",
                                    "kills": 3, "messages": 50, "no_history": True, "seed": None})
    assert argv == ["run", "custom", "--worker-cmd", "python 'my consumer.py'", "--expect", "exactly-once",
                    "--kills", "3", "--messages", "50", "--no-history"]
    assert check_options("offset-before", {"crash_rate": 1}) == ["run", "offset-before", "--crash-rate", "1.0"]
    assert check_options("eos", {"fresh_transactional_id": False, "faults": "random-kill:kills=2"}) == \
        ["run", "eos", "--fault", "random-kill:kills=2"]


def test_an_experiment_file_is_accepted_with_options_over_its_values(tmp_path):
    f = tmp_path / "mine.toml"
    f.write_text('purpose = "Mine."\nexperiment = "offset-before"\n[options]\nmessages = 40\n')
    assert check_options(f, {"seed": 7}) == ["run", str(f), "--seed", "7"]
    with pytest.raises(ValueError, match="--messages must be at least 1"):
        check_options(str(f), {"messages": 0})


def test_a_bad_experiment_file_is_a_value_error_naming_it(tmp_path):
    f = tmp_path / "bad.toml"
    f.write_text('purpose = "Bad."\nexperiment = "offset-before"\n[options]\nmesages = 40\n')
    with pytest.raises(ValueError, match="bad.toml.*mesages.*did you mean 'messages'"):
        check_options(f, {})
    with pytest.raises(ValueError, match="missing.toml"):
        check_options(tmp_path / "missing.toml", {})


def _folder(tmp_path, data):
    validate(data)
    folder = tmp_path / "run"
    folder.mkdir()
    (folder / "report.json").write_text(json.dumps(data))
    return folder


def test_a_report_reads_the_verdict_counts_ids_and_path(tmp_path):
    d = sample("custom", lost=2, dups=30, verdict="unexpected")       # the report keeps 20 ids of 30
    d["anomalies"].update(lost_ids=["pay-000007", "pay-000009"], lost_total=2,
                          duplicate_ids=[f"pay-{i:06d}" for i in range(MAX_WITNESSES)])
    d["counts"]["deliveries"] = None
    folder = _folder(tmp_path, d)
    r = Report.load(folder)
    assert (r.verdict, r.ok, r.experiment, r.path, r.summary) == ("unexpected", False, "custom", folder, d["summary"])
    assert r.counts["lost"] == 2 and r.counts["duplicates"] == 30 and r.counts["deliveries"] is None
    assert r.witnesses["lost"] == ("pay-000007", "pay-000009")
    assert len(r.witnesses["duplicated"]) == MAX_WITNESSES and r.witnesses["duplicated"][0] == "pay-000000"
    assert Report.load(folder / "report.json") == r
    assert "30 duplicated [pay-000000, pay-000001, pay-000002, pay-000003, ...]" in repr(r)
    with pytest.raises(dataclasses.FrozenInstanceError):
        r.verdict = "as-predicted"


def test_a_failed_report_says_its_ids_and_path_in_its_repr_and_assert_ok(tmp_path):
    d = sample("custom", lost=1, dups=2, verdict="unexpected")
    d["anomalies"].update(lost_ids=["pay-000007"], lost_total=1, duplicate_ids=["pay-000003", "pay-000004"])
    r = Report.load(_folder(tmp_path, d))
    shown = repr(r)
    assert "unexpected" in shown and "1 lost [pay-000007]" in shown and "2 duplicated [pay-000003, pay-000004]" \
        in shown and str(tmp_path / "run" / "report.html") in shown
    assert len(shown) < 240, "pytest cuts a longer repr in the middle"
    assert not r, "`assert report` must mean `assert report.ok`"
    with pytest.raises(AssertionError) as e:
        r.assert_ok()
    assert "pay-000007" in str(e.value) and "pay-000004" in str(e.value) and str(tmp_path) in str(e.value)


def test_an_ok_report_passes_and_an_unmeasured_count_is_unknown(tmp_path):
    d = sample("custom", lost=0, dups=0)
    d["anomalies"]["duplicate_ids"] = []
    r = Report.load(_folder(tmp_path, d))
    assert r.ok and r
    r.assert_ok()
    unmeasured = dataclasses.replace(r, counts={**r.counts, "lost": None}, witnesses={**r.witnesses, "lost": ()})
    assert "unknown lost" in unmeasured.explain() and "0 lost" not in unmeasured.explain()


def test_a_folder_without_a_valid_report_is_one_harness_error(tmp_path):
    (tmp_path / "report.json").write_text('{"experiment": "custom"}')
    with pytest.raises(HarnessError):
        Report.load(tmp_path)


def test_the_pytest11_entry_point_names_the_plugin_and_its_fixtures():
    import importlib
    points = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["entry-points"]["pytest11"]
    plugin = importlib.import_module(points["harness"])
    assert {"harness_stack", "crash_test"} <= set(vars(plugin))


def test_loading_the_plugin_imports_nothing_heavy():
    code = ("import sys, harness.pytest_plugin; "
            "print(sorted(m for m in sys.modules if m.startswith(('harness.', 'confluent_kafka', 'psycopg', 'click'))))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    assert out.stdout.strip() == "['harness.pytest_plugin']"


def test_the_docstring_examples_that_need_no_stack_run():
    import doctest
    import harness.api.library
    result = doctest.testmod(harness.api.library)
    assert result.attempted >= 2 and result.failed == 0


def test_a_verdict_without_anomalies_says_its_reason_and_hostile_ids_are_shown_safely(tmp_path):
    d = sample("custom", lost=0, dups=0, verdict="incomplete")
    d["anomalies"]["duplicate_ids"] = []
    d["verdict_detail"]["reason"] = "time limit of 600 s reached"
    r = Report.load(_folder(tmp_path, d))
    assert "custom: incomplete: time limit of 600 s reached; report: " in repr(r)
    hostile = dataclasses.replace(r, witnesses={**r.witnesses, "unexpected": ("pay\x1b[2J-1",)})
    assert "\x1b" not in hostile.explain() and "1 unexpected [pay" in hostile.explain()


def test_crash_test_runs_the_experiment_that_takes_a_users_command():
    from harness.api.library import consumer_experiment, crash_test
    assert consumer_experiment() == "custom"
    with pytest.raises(ValueError, match="option kills must be an int"):
        crash_test(["python", "consumer.py"], kills="many")


def test_a_consumers_run_where_too_few_kills_landed_is_not_ok(tmp_path):
    """As predicted with no kill landed says nothing about the consumer: a CI gate on `ok` must not pass it
    (a wrong consumer passed this way with 0 of 6 kills landed)."""
    from harness.experiments.custom.custom_report import FEW_KILLS
    d = sample("custom", lost=0, dups=0)
    d["anomalies"]["duplicate_ids"] = []
    d["consumer"] = {
        "command": "python my.py", "claim": "exactly-once", "claim_held": True, "audit": "ledger",
        "membership": "group", "protocol": "classic", "session_timeout_ms": None,
        "members_tied": {"client.id": 1, "first appearance": 0}, "members_unidentified": 0,
        "kills_landed": 0, "kills_by_state": {"could do damage": 0, "after its last commit": 0, "before joining": 0},
        "first_commit_seconds": 1.0, "restart_median_seconds": None, "restart_max_seconds": None,
        "kills": [], "starts": [], "warnings": [], "witnesses": []}

    def folder(name):
        (tmp_path / name).mkdir()
        (tmp_path / name / "report.json").write_text(json.dumps(d))
        return tmp_path / name
    r = Report.load(folder("few"))
    assert r.verdict == "as-predicted" and not r.ok and not r
    assert f"only 0 kill(s) landed, fewer than {FEW_KILLS}" in repr(r)
    with pytest.raises(AssertionError, match="the claim was not tested"):
        r.assert_ok()
    d["consumer"]["kills_landed"] = FEW_KILLS
    tested = Report.load(folder("enough"))
    assert tested.ok and tested.untested is None


def test_run_finds_the_report_of_an_out_whose_name_holds_a_newline(tmp_path, monkeypatch):
    """`harness run` prints the folder escaped (`\\n`), so the printed last line is not the folder's name: the
    run wrote its report and the API said "exited 0 without a report". The CLI's real output, stood in for."""
    import harness.api.library as api
    from harness.core.escape import term
    out = tmp_path / "api\nx"
    d = sample("offset-before", lost=0, dups=0)
    d["anomalies"]["duplicate_ids"] = []
    out.mkdir()
    (out / "report.json").write_text(json.dumps(d))
    monkeypatch.setattr(api, "_harness", lambda argv, env, timeout: subprocess.CompletedProcess(
        argv, 0, stdout=f"offset-before: as-predicted\n{term(str(out))}\n", stderr=""))
    assert run("offset-before", out=out, messages=10).path == out


def test_the_guards_program_imports_what_it_calls():
    """The temporary stack's guard is a `python -c` program: its import must resolve (it named
    `harness.api`, whose face does not hand `guard` on, after the package moved)."""
    import subprocess
    import sys
    from harness.api.library import GUARD_CODE
    head, _, call = GUARD_CODE.rpartition(";")
    assert call.strip().startswith("guard(")
    done = subprocess.run([sys.executable, "-c", head + "; assert callable(guard)"], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
