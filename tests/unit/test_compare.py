"""`harness compare` and `harness report` on hand-made report folders: deltas, warnings, rules, lookups."""

import json
import sys
import types

import pytest
from click.testing import CliRunner

from harness.cli.commands.compare import compare as compare_command
from harness.cli.commands.report import report as report_command
from harness.core.errors import HarnessError
from harness.reporting import markdown
from harness.reporting.comparison import compare
from harness.reporting.compare_render import to_json, to_markdown, to_text
from harness.reporting.compare_rules import Rule, evaluate, parse_fail_on
from harness.reporting.compare_targets import load_target
from harness.reporting.run_report import RunReport
from tests.unit.sample_report import sample


# -- helpers -----------------------------------------------------------------------------------

def report(experiment="offset-after", lost=0, dups=3, verdict="as-predicted", wall=4.2, kafka_output=None,
           env=None, **params):
    d = sample(experiment, lost=lost, dups=dups, verdict=verdict)
    d["timings"]["wall_seconds"] = wall
    d["kafka_output"] = kafka_output
    d["environment"].update(env or {})
    d["params"].update(params)
    return d


def eos_output(rc_dups=0, ru_dups=2):
    return {"read_committed": {"records": 10 + rc_dups, "duplicates": rc_dups, "lost": 0, "unprocessed": 0},
            "read_uncommitted": {"records": 10 + ru_dups, "duplicates": ru_dups, "lost": 0, "unprocessed": 0},
            "aborted_records": ru_dups - rc_dups}


def write_run(folder, data):
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "report.json").write_text(json.dumps(data))
    return folder


def claimed(folder, suite=False):
    """`folder` as a run (or suite) of the harness leaves it: with its owner file (`latest` needs one)."""
    from harness.core.rundir import OWNER_FILE, SUITE_OWNER_FILE
    (folder / (SUITE_OWNER_FILE if suite else OWNER_FILE)).write_text("{}\n")
    return folder


def write_suite(folder, reports, env=None, extra_entries=()):
    folder.mkdir(parents=True, exist_ok=True)
    entries = []
    for data in reports:
        write_run(folder / data["experiment"], data)
        entries.append({"experiment": data["experiment"], "report": f"{data['experiment']}/report.json",
                        "verdict": data["verdict"]})
    entries += list(extra_entries)
    suite = {"schema_version": 1, "suite_id": folder.name, "experiments": entries,
             "environment": env or dict(reports[0]["environment"])}
    (folder / "suite.json").write_text(json.dumps(suite))
    return folder


def run_compare(*args):
    return CliRunner().invoke(compare_command, [str(a) for a in args], standalone_mode=False)


def row(comparison, experiment, metric):
    return next(r for r in comparison.rows if r.experiment == experiment and r.metric == metric)


# -- deltas and renderings ---------------------------------------------------------------------

def test_deltas_are_last_minus_first_absolute_and_percent(tmp_path):
    a = load_target(write_run(tmp_path / "a", report(dups=3, wall=4.0)), tmp_path)
    b = load_target(write_run(tmp_path / "b", report(dups=6, lost=2, wall=5.0)), tmp_path)
    c = compare([a, b])
    assert c.labels == ["a", "b"]
    dup = row(c, "offset-after", "duplicates")
    assert (dup.values, dup.delta, dup.delta_pct) == ([3, 6], 3, 100.0)
    wall = row(c, "offset-after", "wall_seconds")
    assert (wall.delta, wall.delta_pct) == (1.0, 25.0)
    lost = row(c, "offset-after", "lost")
    assert (lost.delta, lost.delta_pct) == (2, None)      # from 0: no percentage
    assert row(c, "offset-after", "crashes").values == [1, 1]
    assert row(c, "offset-after", "ledger_total").values == [1300, 1400]
    assert row(c, "offset-after", "verdict").delta is None
    assert c.warnings == []


def test_metrics_absent_in_every_target_are_left_out(tmp_path):
    c = compare([load_target(write_run(tmp_path / "a", report()), tmp_path),
                 load_target(write_run(tmp_path / "b", report()), tmp_path)])
    metrics = [r.metric for r in c.rows]
    assert "dedupe_hits" not in metrics and not any(m.startswith(("rc.", "ru.")) for m in metrics)
    assert metrics[:6] == ["verdict", "sent", "deliveries", "effects", "duplicates", "lost"]
    assert "restart_median_s" in metrics and "msgs_per_s" in metrics


def test_kafka_output_metrics_are_short_dotted_names(tmp_path):
    t = load_target(write_run(tmp_path / "e", report("eos", dups=0, kafka_output=eos_output(ru_dups=4))), tmp_path)
    c = compare([t])
    assert row(c, "eos", "rc.duplicates").values == [0]
    assert row(c, "eos", "ru.records").values == [14]
    assert row(c, "eos", "ru.duplicates").values == [4]
    assert "delta" not in to_text(c)          # one target: no delta columns


def test_text_markdown_and_json_agree(tmp_path):
    a = load_target(write_run(tmp_path / "before", report(dups=3, wall=4.0)), tmp_path)
    b = load_target(write_run(tmp_path / "after", report(dups=6, verdict="unexpected", wall=5.0)), tmp_path)
    c = compare([a, b])
    text = to_text(c)
    lines = text.splitlines()
    assert lines[0].split() == ["experiment", "metric", "before", "after", "delta", "delta", "%"]
    dup_line = next(line for line in lines if " duplicates " in line)
    assert dup_line.split()[-4:] == ["3", "6", "+3", "+100.0%"]
    verdict_line = next(line for line in lines if "verdict" in line)
    assert verdict_line.split()[-3:] == ["as-predicted", "unexpected", "changed"]
    assert "(delta: after minus before)" in text
    assert "| duplicates | 3 | 6 | +3 | +100.0% |" in to_markdown(c)
    data = json.loads(to_json(c, ["x"]))
    assert data["targets"] == ["before", "after"] and data["failures"] == ["x"]
    j = next(r for r in data["rows"] if r["metric"] == "duplicates")
    assert (j["values"], j["delta"], j["delta_pct"], j["changed"]) == ([3, 6], 3, 100.0, True)


def test_single_runs_of_different_experiments_go_side_by_side(tmp_path):
    a = load_target(write_run(tmp_path / "ob", report("offset-before", lost=2, dups=0)), tmp_path)
    b = load_target(write_run(tmp_path / "oa", report("offset-after", dups=2)), tmp_path)
    c = compare([a, b])
    assert list(c.experiments) == ["offset-before vs offset-after"]
    assert row(c, "offset-before vs offset-after", "lost").values == [2, 0]
    assert not any("kill_point" in w for w in c.warnings)


# -- warnings --------------------------------------------------------------------------------

def test_environment_version_differences_are_warned(tmp_path):
    a = load_target(write_run(tmp_path / "a", report(env={"kafka_version": "4.1.1"})), tmp_path)
    b = load_target(write_run(tmp_path / "b", report(env={"kafka_version": "4.2.0",
                                                          "librdkafka_version": "2.16.0"})), tmp_path)
    c = compare([a, b])
    assert "kafka_version differs: 4.1.1 (a) vs 4.2.0 (b)" in c.warnings
    assert "librdkafka_version differs: 2.6.0 (a) vs 2.16.0 (b)" in c.warnings
    assert not any("postgres_version" in w for w in c.warnings)
    res = run_compare(tmp_path / "a", tmp_path / "b")
    assert res.exit_code == 0
    assert "warning: kafka_version differs: 4.1.1 (a) vs 4.2.0 (b)" in res.stderr
    assert "warning" not in res.stdout


def test_params_differences_are_warned_as_such(tmp_path):
    a = load_target(write_run(tmp_path / "a", report(commit_every=1, messages=10)), tmp_path)
    b = load_target(write_run(tmp_path / "b", report(commit_every=10, messages=10, crash_rate=0.05)), tmp_path)
    warnings = compare([a, b]).warnings
    assert "params differ: commit_every 1 (a) vs 10 (b)" in warnings
    assert "params differ: crash_rate 0.2 (a) vs 0.05 (b)" in warnings
    assert not any("messages" in w or "seed" in w for w in warnings)


def test_params_difference_in_one_experiment_of_a_suite_names_it(tmp_path):
    s1 = write_suite(tmp_path / "s1", [report("offset-after"), report("eos", dups=0, kafka_output=eos_output())])
    s2 = write_suite(tmp_path / "s2", [report("offset-after"),
                                       report("eos", dups=0, kafka_output=eos_output(), commit_every=5)])
    warnings = compare([load_target(s1, tmp_path), load_target(s2, tmp_path)]).warnings
    assert warnings == ["params differ for eos: commit_every 1 (s1) vs 5 (s2)"]


# -- --fail-on: parsing ---------------------------------------------------------------------------

@pytest.mark.parametrize("expr, expected", [
    ("unexpected", Rule("unexpected", "verdict", "not in", ("as-predicted",))),
    ("incomplete", Rule("incomplete", "verdict", "==", "incomplete")),
    ("eos:unexpected", Rule("eos:unexpected", "verdict", "not in", ("as-predicted",), experiment="eos")),
    ("lost>0", Rule("lost>0", "lost", ">", 0.0)),
    ("duplicates>0", Rule("duplicates>0", "duplicates", ">", 0.0)),
    ("eos:rc.duplicates>0", Rule("eos:rc.duplicates>0", "rc.duplicates", ">", 0.0, experiment="eos")),
    ("offset-after:duplicates>=150", Rule("offset-after:duplicates>=150", "duplicates", ">=", 150.0,
                                          experiment="offset-after")),
    ("wall_seconds>+20%", Rule("wall_seconds>+20%", "wall_seconds", ">", 20.0, "percent")),
    ("msgs_per_s<-10%", Rule("msgs_per_s<-10%", "msgs_per_s", "<", -10.0, "percent")),
    ("duplicates>+0", Rule("duplicates>+0", "duplicates", ">", 0.0, "change")),
    ("lost <= 1", Rule("lost <= 1", "lost", "<=", 1.0)),
    ("crashes==3", Rule("crashes==3", "crashes", "==", 3.0)),
    ("lost!=0", Rule("lost!=0", "lost", "!=", 0.0)),
    ("counts.lost<1", Rule("counts.lost<1", "lost", "<", 1.0)),
    ("verdict!=as-predicted", Rule("verdict!=as-predicted", "verdict", "!=", "as-predicted")),
])
def test_parse_fail_on_forms(expr, expected):
    assert parse_fail_on(expr) == expected


@pytest.mark.parametrize("expr, needle", [
    ("lost>>0", "accepted forms"), ("lost", "accepted forms"), ("lost>x", "accepted forms"),
    ("", "accepted forms"), ("as-predicted", "accepted forms"), ("lost=0", "accepted forms"),
    ("speed>1", "unknown metric 'speed'"), ("verdict>unexpected", "verdict==WORD"),
    ("verdict==nope", "verdict==WORD"),
])
def test_bad_rules_are_one_clear_line(expr, needle):
    with pytest.raises(HarnessError) as e:
        parse_fail_on(expr)
    msg = str(e.value)
    assert needle in msg and "\n" not in msg


# -- --fail-on: exit codes ----------------------------------------------------------------------

@pytest.fixture
def suites(tmp_path):
    """Two suites of four experiments; the second has more duplicates, an unexpected eos and is slower."""
    before = write_suite(tmp_path / "20261129T180000-suite", [
        report("offset-before", lost=2, dups=0, wall=10.0), report("offset-after", dups=140, wall=10.0),
        report("dedupe", dups=0, wall=10.0), report("eos", dups=0, kafka_output=eos_output(), wall=10.0)])
    after = write_suite(tmp_path / "20261129T190000-suite", [
        report("offset-before", lost=2, dups=0, wall=11.0), report("offset-after", dups=150, wall=11.0),
        report("dedupe", dups=3, wall=13.0),
        report("eos", dups=1, verdict="unexpected", kafka_output=eos_output(rc_dups=1), wall=11.0)])
    return before, after


@pytest.mark.parametrize("rule, code, reason", [
    ("unexpected", 1, "eos: verdict = unexpected (rule unexpected)"),
    ("incomplete", 0, None),
    ("lost>0", 1, "offset-before: lost = 2 (rule lost>0)"),
    ("lost>2", 0, None),
    ("duplicates>0", 1, "dedupe: duplicates = 3 (rule duplicates>0)"),
    ("eos:rc.duplicates>0", 1, "eos: rc.duplicates = 1 (rule eos:rc.duplicates>0)"),
    ("eos:ru.duplicates>2", 0, None),
    ("offset-after:duplicates>=150", 1, "offset-after: duplicates = 150 (rule offset-after:duplicates>=150)"),
    ("offset-after:duplicates>150", 0, None),
    ("wall_seconds>+20%", 1, "dedupe: wall_seconds 10.00 -> 13.00 (+30.0%) (rule wall_seconds>+20%)"),
    ("wall_seconds>+30%", 0, None),
    ("duplicates>+5", 1, "offset-after: duplicates 140 -> 150 (+10) (rule duplicates>+5)"),
    ("verdict!=as-predicted", 1, "eos: verdict = unexpected (rule verdict!=as-predicted)"),
])
def test_fail_on_exit_codes(suites, rule, code, reason):
    res = run_compare(*suites, "--fail-on", rule)
    assert res.exit_code == code, res.output
    if reason:
        assert f"fail: {reason}" in res.stderr
    else:
        assert "fail:" not in res.stderr


def test_rules_read_the_last_target_only(suites):
    before, after = suites
    assert run_compare(after, before, "--fail-on", "unexpected").exit_code == 0
    assert run_compare(after, "--fail-on", "unexpected").exit_code == 1


@pytest.mark.parametrize("verdict", ["incomplete", "interrupted", "unexpected", "something-new"])
def test_unexpected_fails_every_verdict_but_as_predicted(tmp_path, verdict):
    """A run that did not finish proved nothing: `--fail-on unexpected` must not let it through. A verdict
    this harness does not know comes from a newer schema (in a report of the current schema it is refused:
    exit 2)."""
    from harness.reporting.validate import CURRENT
    data = report("dedupe", verdict=verdict)
    if verdict == "something-new":
        refused = run_compare(write_run(tmp_path / "current", data), "--fail-on", "unexpected")
        assert isinstance(refused.exception, HarnessError) and "is not one of" in str(refused.exception)
        data["schema_version"] = CURRENT["report"] + 1
    run = write_run(tmp_path / "run", data)
    res = run_compare(run, "--fail-on", "unexpected")
    assert res.exit_code == 1, res.output
    assert f"fail: dedupe: verdict = {verdict} (rule unexpected)" in res.stderr
    ok = write_run(tmp_path / "ok", report("dedupe"))
    assert run_compare(ok, "--fail-on", "unexpected").exit_code == 0


@pytest.mark.parametrize("verdict, code", [("incomplete", 0), ("interrupted", 0), ("unexpected", 1),
                                           ("as-predicted", 0)])
def test_allow_incomplete_lets_only_unfinished_runs_pass(tmp_path, verdict, code):
    run = write_run(tmp_path / "run", report("dedupe", verdict=verdict))
    res = run_compare(run, "--fail-on", "unexpected", "--allow-incomplete")
    assert res.exit_code == code, res.output


def test_a_report_without_a_verdict_fails_unexpected(tmp_path):
    """A schema 1 report need not have every field; one without a verdict fails the rule. A schema 2
    report without one is not a valid report: refused (exit 2)."""
    data = report("dedupe")
    del data["verdict"]
    other = write_run(tmp_path / "other", report("eos"))
    res = run_compare(other, write_run(tmp_path / "v2", data), "--fail-on", "unexpected")
    assert isinstance(res.exception, HarnessError) and "'verdict' is a required property" in str(res.exception)
    data["schema_version"] = 1
    res = run_compare(other, write_run(tmp_path / "run", data), "--fail-on", "unexpected")
    assert res.exit_code == 1 and "dedupe: verdict = unknown (rule unexpected)" in res.stderr


def test_a_suite_experiment_without_a_report_fails_unexpected(tmp_path):
    failed = {"experiment": "eos", "report": None, "verdict": "failed", "error": "worker crashed"}
    not_run = {"experiment": "zombie", "report": None, "verdict": "not run"}
    suite = write_suite(tmp_path / "20261129T190000-suite", [report("dedupe")], extra_entries=[failed, not_run])
    res = run_compare(suite, "--fail-on", "unexpected")
    assert res.exit_code == 1
    assert "fail: eos: no report, verdict failed (worker crashed) (rule unexpected)" in res.stderr
    assert "fail: zombie: no report, verdict not run" in res.stderr
    res = run_compare(suite, "--fail-on", "unexpected", "--allow-incomplete")
    assert res.exit_code == 1 and "eos: no report" in res.stderr and "fail: zombie" not in res.stderr
    assert run_compare(suite, "--fail-on", "zombie:unexpected", "--allow-incomplete").exit_code == 0
    assert run_compare(suite, "--fail-on", "dedupe:unexpected").exit_code == 0


def test_allow_incomplete_needs_an_unexpected_rule(tmp_path):
    run = write_run(tmp_path / "run", report("dedupe", verdict="incomplete"))
    res = run_compare(run, "--allow-incomplete")
    assert isinstance(res.exception, HarnessError) and "--fail-on unexpected" in str(res.exception)
    res = run_compare(run, "--fail-on", "lost>0", "--allow-incomplete")
    assert isinstance(res.exception, HarnessError)


def test_compare_help_states_the_rule():
    from click.testing import CliRunner
    out = CliRunner().invoke(compare_command, ["--help"]).output
    assert "--allow-incomplete" in out and "passes only as-predicted" in out


def test_every_firing_rule_is_reported_and_json_carries_them(suites):
    res = run_compare(*suites, "--fail-on", "unexpected", "--fail-on", "duplicates>0", "--format", "json")
    assert res.exit_code == 1
    data = json.loads(res.stdout)
    assert "eos: verdict = unexpected (rule unexpected)" in data["failures"]
    assert sum(1 for f in data["failures"] if "(rule duplicates>0)" in f) == 3   # offset-after, dedupe, eos


def test_rules_that_cannot_apply_are_errors_not_silence(suites, tmp_path):
    before, after = suites
    cases = [("nope:lost>0", "names experiment 'nope'"),
             ("offset-after:rc.duplicates>0", "experiment offset-after has no rc.duplicates"),
             ("dedupe_hits>0", "no experiment has dedupe_hits")]
    for rule, needle in cases:
        res = run_compare(before, after, "--fail-on", rule)
        assert isinstance(res.exception, HarnessError) and needle in str(res.exception), rule
    res = run_compare(after, "--fail-on", "wall_seconds>+20%")
    assert isinstance(res.exception, HarnessError) and "at least two targets" in str(res.exception)


def test_bad_rule_fails_before_loading_anything():
    res = run_compare("no-such-target", "--fail-on", "lost>>1")
    assert isinstance(res.exception, HarnessError) and "invalid --fail-on 'lost>>1'" in str(res.exception)


def test_evaluate_directly(suites, tmp_path):
    c = compare([load_target(s, tmp_path) for s in suites])
    assert evaluate(c, [parse_fail_on("lost>5")]) == []
    assert evaluate(c, [parse_fail_on("offset-before:lost>=2")]) == \
        ["offset-before: lost = 2 (rule offset-before:lost>=2)"]


# -- finding targets: suites, ids, latest -------------------------------------------------------

def test_suite_folders_load_every_listed_report(suites, tmp_path):
    before, _ = suites
    for arg in (before, before / "suite.json", before.name):
        t = load_target(str(arg), tmp_path)
        assert list(t) == ["offset-before", "offset-after", "dedupe", "eos"]
        assert t.label == before.name and t.kind == "suite"


def test_suites_are_matched_by_experiment_and_gaps_are_warned(tmp_path):
    s1 = write_suite(tmp_path / "s1", [report("offset-after"), report("dedupe", dups=0)])
    s2 = write_suite(tmp_path / "s2", [report("dedupe", dups=1)],
                     extra_entries=[{"experiment": "eos", "report": None, "error": "broker unreachable"}])
    c = compare([load_target(s1, tmp_path), load_target(s2, tmp_path)])
    assert row(c, "dedupe", "duplicates").values == [0, 1]
    oa = row(c, "offset-after", "duplicates")
    assert oa.present == [True, False] and oa.delta is None
    assert "experiment offset-after is missing from s2" in c.warnings
    assert "s2: eos has no report (broker unreachable)" in c.warnings
    oa_line = next(line for line in to_text(c).splitlines() if line.startswith("offset-after"))
    assert oa_line.split()[-2:] == ["as-predicted", "-"]      # '-': not in that target


def test_suite_environment_counts_for_version_warnings(tmp_path):
    s1 = write_suite(tmp_path / "s1", [report("dedupe")], env={"postgres_version": "15.18"})
    s2 = write_suite(tmp_path / "s2", [report("dedupe")], env={"postgres_version": "16.4"})
    warnings = compare([load_target(s1, tmp_path), load_target(s2, tmp_path)]).warnings
    assert "postgres_version differs: 15.18 (s1) vs 16.4/15.18 (s2)" in warnings


def test_the_same_experiment_twice_in_a_suite_keeps_both(tmp_path):
    folder = tmp_path / "bench"
    for name, every in (("eos-every-1", 1), ("eos-every-10", 10)):
        write_run(folder / name, report("eos", dups=0, kafka_output=eos_output(), commit_every=every))
    (folder / "suite.json").write_text(json.dumps({"schema_version": 1, "suite_id": "bench", "experiments": [
        {"experiment": "eos", "report": "eos-every-1/report.json"},
        {"experiment": "eos", "report": "eos-every-10/report.json"}]}))
    assert list(load_target(folder, tmp_path)) == ["eos-every-1", "eos-every-10"]


def test_run_id_is_looked_up_under_the_reports_folder(tmp_path):
    root = tmp_path / "reports"
    write_run(root / "20261129T183000-offset-after", report(dups=3))
    write_run(root / "20261129T184000-offset-after", report(dups=5))
    t = load_target("20261129T183000-offset-after", root)
    assert t["offset-after"]["counts"]["duplicates"] == 3 and t.label == "20261129T183000-offset-after"
    res = run_compare("20261129T183000-offset-after", "20261129T184000-offset-after", "--reports-dir", root)
    assert res.exit_code == 0 and "+2" in res.stdout


def test_report_json_path_is_a_target(tmp_path):
    write_run(tmp_path / "r1", report(dups=4))
    t = load_target(str(tmp_path / "r1" / "report.json"), tmp_path)
    assert t.label == "r1" and t["offset-after"]["counts"]["duplicates"] == 4


def test_latest_is_the_newest_timestamped_report_folder(tmp_path, monkeypatch):
    root = tmp_path / "reports"
    claimed(write_run(root / "20261129T183000-offset-after", report(dups=1)))
    claimed(write_suite(root / "20261129T190000-suite", [report("dedupe", dups=0)]), suite=True)
    write_run(root / "reference-offset-after", report(dups=9))          # committed reference: not "latest"
    (root / "20261129T200000-offset-before").mkdir()                    # a run still going: no report yet
    (root / "README.md").write_text("reports")
    t = load_target("latest", root)
    assert t.label == "20261129T190000-suite" and list(t) == ["dedupe"]
    monkeypatch.setenv("HARNESS_REPORTS", str(root))                    # the default reports folder
    assert load_target("latest").label == "20261129T190000-suite"
    res = run_compare("20261129T183000-offset-after", "latest", "--reports-dir", root)
    assert res.exit_code == 0 and "20261129T190000-suite" in res.stdout.splitlines()[0]


def test_latest_falls_back_to_any_report_folder(tmp_path):
    write_run(tmp_path / "reference-a", report(dups=1))
    write_run(tmp_path / "reference-b", report(dups=2))
    assert load_target("latest", tmp_path).label == "reference-b"


# -- bad inputs --------------------------------------------------------------------------------

def error_of(*args):
    res = run_compare(*args)
    assert isinstance(res.exception, HarnessError), (res.exit_code, res.output, res.exception)
    msg = str(res.exception)
    assert "\n" not in msg
    return msg


def test_unknown_target_names_what_was_tried(tmp_path):
    write_run(tmp_path / "a", report())
    msg = error_of(tmp_path / "a", "nope", "--reports-dir", tmp_path / "reports")
    assert "unknown target 'nope'" in msg and "run or suite id 'nope'" in msg and str(tmp_path / "reports") in msg


def test_latest_with_nothing_to_find(tmp_path):
    assert "does not exist" in error_of("latest", "--reports-dir", tmp_path / "none")
    (tmp_path / "empty").mkdir()
    assert "no folder with a report.json or suite.json" in error_of("latest", "--reports-dir", tmp_path / "empty")


def test_folders_and_files_that_are_not_reports(tmp_path):
    (tmp_path / "plain").mkdir()
    assert "neither report.json nor suite.json" in error_of(tmp_path / "plain")
    write_run(tmp_path / "broken", report())
    (tmp_path / "broken" / "report.json").write_text('{"experiment": ')
    assert "is not valid JSON (line 1" in error_of(tmp_path / "broken")
    (tmp_path / "list.json").write_text("[1, 2]")
    assert "not a report object" in error_of(tmp_path / "list.json")
    (tmp_path / "other.json").write_text('{"hello": 1}')
    assert "not a run report" in error_of(tmp_path / "other.json")


def test_a_suite_with_no_readable_report(tmp_path):
    folder = tmp_path / "s"
    folder.mkdir()
    (folder / "suite.json").write_text(json.dumps({"suite_id": "s", "experiments": [
        {"experiment": "eos", "report": "eos/report.json"}]}))
    assert "lists no experiment with a readable report.json" in error_of(folder)


def test_no_targets_is_a_usage_error():
    res = run_compare()
    assert res.exception is not None and not isinstance(res.exception, HarnessError)
    assert compare_command.params[0].required


def test_commands_help_ends_with_an_example():
    for cmd in (compare_command, report_command):
        help_text = cmd.get_help(cmd.make_context(cmd.name, ["--help"], resilient_parsing=True))
        assert help_text.index("Example:") < help_text.index("    harness " + cmd.name) < help_text.index("Options:")


# -- harness report ----------------------------------------------------------------------------

def run_report(*args):
    return CliRunner().invoke(report_command, [str(a) for a in args], standalone_mode=False)


def test_report_renders_markdown_and_html_again(tmp_path):
    folder = write_run(tmp_path / "run", report(dups=7))
    res = run_report(folder)
    assert res.exit_code == 0 and res.stdout.strip() == str(folder)
    md = (folder / "report.md").read_text()
    assert md == markdown.render(RunReport.load(folder), folder) and "| duplicates | database: ledger table | 7 |" in md
    assert "<html" in (folder / "report.html").read_text().lower()
    assert not list(folder.glob(".*.tmp"))


def test_a_report_suggests_an_audit_command_that_finds_it(tmp_path, monkeypatch):
    """report.md said `harness audit <run-id>` even for a run written with --out elsewhere, where an id finds
    nothing: it names the folder there, and the id only where an id is looked up."""
    from harness.reporting import html
    elsewhere = write_run(tmp_path / "elsewhere", report())
    r = RunReport.load(elsewhere)
    assert f"harness audit {elsewhere.resolve()}" in markdown.render(r, elsewhere)
    assert f"harness audit {elsewhere.resolve()}" in html.render(r, elsewhere)
    monkeypatch.setenv("HARNESS_REPORTS", str(tmp_path / "reports"))
    home = write_run(tmp_path / "reports" / r.data["run_id"], report())
    assert f"harness audit {r.data['run_id']}\n" in markdown.render(RunReport.load(home), home)
    res = CliRunner().invoke(compare_command, [str(elsewhere), r.data["run_id"]], standalone_mode=False)
    assert res.exit_code == 0, res.output


def test_report_finds_latest_under_the_reports_folder(tmp_path):
    claimed(write_run(tmp_path / "20261129T183000-offset-after", report()))
    res = run_report("latest", "--reports-dir", tmp_path)
    assert res.exit_code == 0 and (tmp_path / "20261129T183000-offset-after" / "report.md").exists()


@pytest.mark.parametrize("content, needle", [
    ('{"experiment": "eos", ', "is not valid JSON"),
    ('{"experiment": "eos"}', "field 'verdict' is missing"),
    ('{"no": "experiment"}', "not a run report"),
])
def test_report_on_bad_json_damages_nothing(tmp_path, content, needle):
    folder = write_run(tmp_path / "run", report())
    assert run_report(folder).exit_code == 0
    before = {p.name: p.read_text() for p in folder.iterdir()}
    (folder / "report.json").write_text(content)
    before["report.json"] = content
    res = run_report(folder)
    assert isinstance(res.exception, HarnessError) and needle in str(res.exception)
    assert {p.name: p.read_text() for p in folder.iterdir()} == before


def test_report_on_a_folder_without_report(tmp_path):
    (tmp_path / "empty").mkdir()
    res = run_report(tmp_path / "empty")
    assert isinstance(res.exception, HarnessError) and "has no report.json" in str(res.exception)


def test_report_on_a_suite_without_suite_renderer(tmp_path, monkeypatch):
    folder = write_suite(tmp_path / "s", [report("dedupe")])
    monkeypatch.setitem(sys.modules, "harness.reporting.suite_report", None)    # as if the module did not exist
    res = run_report(folder)
    assert isinstance(res.exception, HarnessError) and "cannot render suite folders" in str(res.exception)


def test_report_on_a_suite_calls_write_suite(tmp_path, monkeypatch):
    folder = write_suite(tmp_path / "s", [report("dedupe")])
    calls = []
    fake = types.ModuleType("harness.reporting.suite_report")
    fake.write_suite = calls.append
    monkeypatch.setitem(sys.modules, "harness.reporting.suite_report", fake)
    res = run_report(folder)
    assert res.exit_code == 0 and calls == [folder] and res.stdout.strip() == str(folder)


def test_suite_json_without_experiments_list(tmp_path):
    (tmp_path / "s").mkdir()
    (tmp_path / "s" / "suite.json").write_text('{"suite_id": "s"}')
    assert "has no 'experiments' list" in error_of(tmp_path / "s")


def test_relative_rule_from_zero(tmp_path):
    a = load_target(write_run(tmp_path / "a", report(lost=0)), tmp_path)
    b = load_target(write_run(tmp_path / "b", report(lost=1)), tmp_path)
    assert evaluate(compare([a, b]), [parse_fail_on("lost>+50%")]) == ["offset-after: lost 0 -> 1 (from 0) (rule lost>+50%)"]
    assert evaluate(compare([a, a]), [parse_fail_on("lost>+50%")]) == []


def test_many_single_runs_side_by_side_name_their_experiments(tmp_path):
    runs = [load_target(write_run(tmp_path / name, report(name, messages=n)), tmp_path)
            for name, n in (("offset-before", 10), ("offset-after", 10), ("dedupe", 20))]
    c = compare(runs)
    assert list(c.experiments) == ["side by side"]
    assert c.rows[0].metric == "experiment" and c.rows[0].values == ["offset-before", "offset-after", "dedupe"]
    assert "params differ: messages 10 (offset-before, offset-after) vs 20 (dedupe)" in c.warnings
    assert evaluate(c, [parse_fail_on("dedupe:duplicates>2")]) == ["dedupe: duplicates = 3 (rule dedupe:duplicates>2)"]
    assert evaluate(c, [parse_fail_on("duplicates>+0")]) == []
    assert evaluate(c, [parse_fail_on("wall_seconds>=+0%")]) == \
        ["offset-before -> dedupe: wall_seconds 4.20 -> 4.20 (+0.0%) (rule wall_seconds>=+0%)"]


def test_a_missing_path_says_so(tmp_path):
    assert error_of(tmp_path / "gone") == f"unknown target '{tmp_path / 'gone'}': no such file or folder"


def test_compare_reads_a_schema_1_report_beside_a_schema_2_one(tmp_path):
    from tests.unit.sample_report import sample_v1
    old = write_run(tmp_path / "old", sample_v1(dups=3))
    new = write_run(tmp_path / "new", report(dups=5))
    c = compare([load_target(str(old)), load_target(str(new))])
    assert "+2" in to_text(c)


def test_runs_of_another_client_are_said_to_differ_and_a_report_from_before_the_option_ran_python(tmp_path):
    from harness.reporting.comparison import _param_warnings
    old, py, java = report(), report(), report()
    old["params"].pop("client", None)
    py["params"]["client"], java["params"]["client"] = "python", "java"
    assert _param_warnings({"eos": [old, py]}, ["a", "b"]) == []
    assert _param_warnings({"eos": [py, java]}, ["a", "b"]) == ["params differ: client python (a) vs java (b)"]
