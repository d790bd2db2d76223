"""`compare`, `report` and `audit` validate what they read before using it, and refuse in one line (exit 2).

The cases come from trying the harness as a hostile user would: a CI gate `--fail-on lost>0` passed
reports whose `lost` was NaN, "100" or [5]; a 5000-digit integer or 100k-deep nesting ended in a
traceback; a suite.json without suite_id too; a suite's `report` path `../../etc/passwd` was read.
"""

import json
import os
import threading

import pytest

from harness.core.errors import HarnessError
from harness.reporting import validate
from tests.conftest import harness
from tests.unit.sample_report import sample


def one_line_exit_2(proc, *needles) -> str:
    assert proc.returncode == 2, (proc.returncode, proc.stdout, proc.stderr)
    assert "Traceback" not in proc.stderr + proc.stdout
    lines = [l for l in proc.stderr.splitlines() if l.strip()]
    assert len(lines) == 1, lines
    for n in needles:
        assert n in lines[0], lines[0]
    return lines[0]


def run_folder(tmp_path, text: str, name="run"):
    folder = tmp_path / name
    folder.mkdir()
    (folder / "report.json").write_text(text)
    return folder


def with_lost(value_text: str) -> str:
    """A valid report's JSON text with counts.lost set to `value_text` (raw JSON)."""
    text = json.dumps(sample(lost=0))
    assert '"lost": 0, "unprocessed"' in text
    return text.replace('"lost": 0, "unprocessed"', f'"lost": {value_text}, "unprocessed"', 1)


ISOLATED = {"HARNESS_BOOTSTRAP_SERVERS": "", "HARNESS_POSTGRES_DSN": ""}


# -- the CI gate -----------------------------------------------------------------------------------

@pytest.mark.parametrize("lost", ["NaN", "Infinity", "-Infinity", "1e999", '"100"', "[5]", "{}", "true", "-1"])
def test_the_ci_gate_refuses_a_report_whose_lost_is_not_a_count(tmp_path, lost):
    folder = run_folder(tmp_path, with_lost(lost))
    proc = harness("compare", str(folder), "--fail-on", "lost>0", env=ISOLATED)
    one_line_exit_2(proc, "report.json")


def test_the_ci_gate_still_passes_and_fails_valid_reports(tmp_path):
    ok = run_folder(tmp_path, with_lost("0"), "ok")
    bad = run_folder(tmp_path, with_lost("2"), "bad")
    assert harness("compare", str(ok), "--fail-on", "lost>0", env=ISOLATED).returncode == 0
    assert harness("compare", str(bad), "--fail-on", "lost>0", env=ISOLATED).returncode == 1


# -- parsing limits, for every command that reads a report ---------------------------------------

HOSTILE_TEXTS = {
    "5000-digit integer": lambda: with_lost("9" * 5000),
    "100k-deep nesting": lambda: with_lost("[" * 100_000 + "]" * 100_000),
    "NaN": lambda: with_lost("NaN"),
    "key twice": lambda: with_lost("0").replace('"lost": 0,', '"lost": 5, "lost": 0,', 1),
    "not UTF-8": lambda: "\udcff",
}


@pytest.mark.parametrize("command", ["compare", "report", "audit"])
@pytest.mark.parametrize("case", list(HOSTILE_TEXTS))
def test_every_reader_refuses_a_hostile_report_in_one_line(tmp_path, command, case):
    folder = tmp_path / "run"
    folder.mkdir()
    text = HOSTILE_TEXTS[case]()
    (folder / "report.json").write_bytes(text.encode("utf-8", "surrogateescape"))
    before = sorted(p.name for p in folder.iterdir())
    proc = harness(command, str(folder), env={**ISOLATED, "HARNESS_HOME": str(tmp_path / "state")}, timeout=120)
    line = one_line_exit_2(proc)
    assert "stack is down" not in line           # audit refuses before it asks for the stack
    assert sorted(p.name for p in folder.iterdir()) == before   # `report` rewrote nothing


def test_a_huge_report_is_refused_before_it_is_read(tmp_path):
    folder = tmp_path / "run"
    folder.mkdir()
    with open(folder / "report.json", "wb") as f:     # sparse: no disk used
        f.truncate(validate.MAX_BYTES + 1)
    one_line_exit_2(harness("compare", str(folder), env=ISOLATED), "larger than")


def test_a_fifo_named_report_json_is_refused_without_hanging(tmp_path):
    folder = tmp_path / "run"
    folder.mkdir()
    os.mkfifo(folder / "report.json")
    one_line_exit_2(harness("compare", str(folder), env=ISOLATED, timeout=60), "neither report.json")
    one_line_exit_2(harness("compare", str(folder / "report.json"), env=ISOLATED, timeout=60), "not a regular file")


def test_the_parser_limits(tmp_path):
    with pytest.raises(validate.Refused, match="digits"):
        validate.loads("1" + "0" * validate.MAX_INT_DIGITS)
    assert validate.loads("1" + "0" * (validate.MAX_INT_DIGITS - 1)) == 10 ** (validate.MAX_INT_DIGITS - 1)
    with pytest.raises(validate.Refused, match="deeper"):
        validate.loads("[" * (validate.MAX_DEPTH + 1) + "]" * (validate.MAX_DEPTH + 1))
    assert validate.loads("[" * validate.MAX_DEPTH + "]" * validate.MAX_DEPTH)
    for text in ("NaN", "[Infinity]", "-Infinity", "1e400"):
        with pytest.raises(validate.Refused):
            validate.loads(text)
    with pytest.raises(validate.Refused, match="twice"):
        validate.loads('{"a": 1, "a": 2}')
    assert validate.loads('{"a": 1.5, "b": -2}') == {"a": 1.5, "b": -2}


def test_a_read_of_a_fifo_returns_at_once():
    """The FIFO check happens on the opened descriptor: opening does not wait for a writer."""
    import tempfile
    with tempfile.TemporaryDirectory() as d:
        fifo = os.path.join(d, "report.json")
        os.mkfifo(fifo)
        result = []
        t = threading.Thread(target=lambda: result.append(pytest.raises(HarnessError, validate.read_json, fifo)),
                             daemon=True)
        t.start()
        t.join(10)
        assert not t.is_alive() and result


# -- the schema ------------------------------------------------------------------------------------

def test_a_valid_report_passes_and_a_wrong_type_anywhere_is_refused(tmp_path):
    validate.check(sample(), "report", tmp_path / "report.json")
    d = sample()
    d["verdict_detail"]["unplanned_deaths"] = [{"worker": "w0", "attempt": "<script>", "exit_code": 1, "time": 1.0}]
    with pytest.raises(HarnessError, match="/verdict_detail/unplanned_deaths/0/attempt"):
        validate.check(d, "report", tmp_path / "report.json")


def test_an_older_report_is_held_to_the_types_of_the_fields_it_has(tmp_path):
    from tests.unit.sample_report import sample_v1
    old = sample_v1()
    assert validate.check(old, "report", tmp_path / "r.json") == []
    old["counts"]["lost"] = "100"
    with pytest.raises(HarnessError, match="/counts/lost"):
        validate.check(old, "report", tmp_path / "r.json")
    newer = {**sample(), "schema_version": 5, "verdict": "a-new-verdict", "a_new_field": 1}
    assert "newer than this harness reads" in validate.check(newer, "report", tmp_path / "r.json")[0]
    v2 = {**sample(), "schema_version": 2}          # before the anomaly classes: still read
    del v2["anomaly_classes"]
    assert validate.check(v2, "report", tmp_path / "r.json") == []
    v3 = {**sample(), "schema_version": 3}          # before torn-transaction: still read
    assert validate.check(v3, "report", tmp_path / "r.json") == []


def test_harness_report_on_a_suite_without_suite_id_says_so_in_one_line(tmp_path):
    from tests.unit.hostile import suite_summary
    s = suite_summary()
    del s["suite_id"]
    (tmp_path / "suite.json").write_text(json.dumps(s))
    one_line_exit_2(harness("report", str(tmp_path), env=ISOLATED), "suite_id")
    s["schema_version"] = 1      # an older suite.json: validated leniently, then refused by the renderer
    (tmp_path / "suite.json").write_text(json.dumps(s))
    one_line_exit_2(harness("report", str(tmp_path), env=ISOLATED), "suite_id")
    assert not (tmp_path / "suite.md").exists()


# -- suite paths ------------------------------------------------------------------------------------

@pytest.mark.parametrize("rel", ["../../etc/passwd", "/etc/passwd", "../outside/report.json", "link/report.json"])
def test_compare_reads_no_suite_report_outside_the_suite_folder(tmp_path, rel):
    from tests.unit.hostile import suite_summary
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "report.json").write_text(json.dumps({**sample(), "summary": "SECRET-OUTSIDE"}))
    suite = tmp_path / "a" / "suite"
    suite.mkdir(parents=True)
    (suite / "link").symlink_to(outside)
    s = suite_summary(rel)
    (suite / "suite.json").write_text(json.dumps(s))
    proc = harness("compare", str(suite), "--format", "json", env=ISOLATED)
    one_line_exit_2(proc, "not inside the suite folder")
    assert "root:" not in proc.stdout + proc.stderr and "SECRET-OUTSIDE" not in proc.stdout + proc.stderr


def test_compare_reads_a_suite_report_inside_the_folder(tmp_path):
    from tests.unit.hostile import suite_summary
    (tmp_path / "offset-after").mkdir()
    (tmp_path / "offset-after" / "report.json").write_text(json.dumps(sample()))
    (tmp_path / "suite.json").write_text(json.dumps(suite_summary()))
    proc = harness("compare", str(tmp_path), env=ISOLATED)
    assert proc.returncode == 0, proc.stderr
    assert "offset-after" in proc.stdout


def test_within(tmp_path):
    from harness.core.escape import within
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "out").symlink_to(tmp_path)
    assert within(tmp_path / "in", "a/report.json") and within(tmp_path / "in", "./a")
    for rel in ("../x", "/etc/passwd", "out/x", "a/../../x", "", "a\x00b"):
        assert not within(tmp_path / "in", rel), rel


def test_a_suite_counts_a_run_report_that_is_not_valid_as_no_report(tmp_path):
    """The suite reads its runs' reports to build suite.json: one that is not valid (edited, damaged)
    becomes a failed row with the reason, and the suite summary is still written."""
    from harness.run.suite_runner import build_summary
    for name, text in (("dedupe", json.dumps(sample("dedupe"))), ("eos", with_lost('"100"'))):
        (tmp_path / name).mkdir()
        (tmp_path / name / "report.json").write_text(text)
    finished = {n: {"experiment": n, "report": f"{n}/report.json", "exit_code": 0, "verdict": "as-predicted",
                    "seconds": 1.0} for n in ("dedupe", "eos")}
    summary = build_summary(tmp_path, None, ["dedupe", "eos"], finished, 2.0, [])
    rows = {r["experiment"]: r for r in summary["experiments"]}
    assert rows["dedupe"]["counts"]["duplicates"] == 3
    assert rows["eos"]["verdict"] == "failed" and rows["eos"]["report"] is None
    assert "/counts/lost" in rows["eos"]["error"]


def test_a_custom_runs_report_lists_only_the_options_that_apply_to_it():
    """custom refuses --crash-rate and --commit-every and takes no --assignment: its report listed all three."""
    from harness.run.params import RunParams
    d = RunParams("custom", worker_cmd="python my_consumer.py").as_dict()
    assert not {"crash_rate", "commit_every", "assignment"} & set(d)
    assert {"worker_cmd", "kills", "messages"} <= set(d)
    own = RunParams("offset-after").as_dict()
    assert {"crash_rate", "commit_every", "assignment"} <= set(own) and "dedupe_ttl" not in own
