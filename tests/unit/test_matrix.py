"""harness matrix without services: which releases it takes, how its cells and exit status come from the
suites' rows (hand-made), that rows differing between releases are marked, and that its pages escape what
a matrix.json written by someone else holds."""

import json

import pytest

from harness.run import matrix_runner as matrix
from harness.core.errors import HarnessError
from harness.reporting import matrix_report


def row(name, verdict="as-predicted", dup=0, lost=0, rc=None, report=True):
    return {"experiment": name, "verdict": verdict, "counts": {"duplicates": dup, "lost": lost},
            "kafka_output": {"read_committed": {"duplicates": rc[0], "lost": rc[1]}} if rc else None,
            "crashes": 100, "timings": {"restart_median_seconds": 0.05},
            "report": f"{name}/report.json" if report else None}


def col(release, rows, tv="2"):
    return {"release": release, "exit_code": 0, "seconds": 20.0, "suite": f"{release}/suite.json", "rows": rows,
            "metadata_version": "x", "transaction_version": tv}


def test_releases_are_checked_each_once_and_at_most_six():
    assert matrix.parse_releases("3.9.1, 4.4.0") == ["3.9.1", "4.4.0"]
    for spec, says in ((None, "needs --kafka-version"), ("", "needs --kafka-version"), ("4.4.0,4.4.0", "twice"),
                       ("4.1.1,3.8.0", "3.9.0 or newer"), ("4.1.1;rm", "major.minor.patch"),
                       (",".join(f"4.{i}.0" for i in range(7)), "at most 6")):
        with pytest.raises(HarnessError, match=says):
            matrix.parse_releases(spec)


def test_cells_come_from_each_suite_and_a_row_that_differs_is_marked():
    cols = {"3.9.1": col("3.9.1", [row("eos", rc=(0, 0)), row("zombie", rc=(0, 0))], tv="0"),
            "4.4.0": col("4.4.0", [row("eos", rc=(0, 0)), row("zombie", verdict="unexpected", rc=(3, 0))])}
    s = matrix.build_summary(["3.9.1", "4.4.0"], cols, ["--group", "eos"], 40.0)
    by = {e["experiment"]: e for e in s["experiments"]}
    assert not by["eos"]["differs"] and by["zombie"]["differs"]
    assert by["zombie"]["cells"]["4.4.0"]["read_committed_duplicates"] == 3
    assert by["eos"]["cells"]["3.9.1"]["report"] == "3.9.1/eos/report.json"
    assert s["exit_code"] == 1                                   # the worst cell: one was unexpected
    assert [c["transaction_version"] for c in s["columns"]] == ["0", "2"] and "rows" not in s["columns"][0]


def test_a_release_whose_suite_wrote_nothing_fails_the_matrix_and_an_interrupted_one_is_130(tmp_path):
    missing = matrix.column(tmp_path, "4.4.0", 2, 1.0, "error: mvn failed to resolve ...\n")
    assert missing["suite"] is None and missing["error"] == "error: mvn failed to resolve ..."
    cols = {"3.9.1": col("3.9.1", [row("eos")]), "4.4.0": missing}
    s = matrix.build_summary(["3.9.1", "4.4.0"], cols, [], 10.0)
    assert s["exit_code"] == 3 and s["experiments"][0]["cells"]["4.4.0"] is None
    s = matrix.build_summary(["3.9.1", "4.4.0"], {"3.9.1": col("3.9.1", [row("eos")])}, [], 5.0, interrupted=True)
    assert s["exit_code"] == 130 and "not run" in s["columns"][1]["error"]
    (tmp_path / "4.1.1").mkdir()
    (tmp_path / "4.1.1" / "suite.json").write_text(json.dumps({"experiments": "nope"}))
    assert matrix.column(tmp_path, "4.1.1", 0, 1.0, "")["suite"] is None      # not a suite: no rows from it


def test_the_pages_escape_what_the_matrix_json_holds(tmp_path):
    hostile = "<script>alert(1)</script>|`x`"
    cols = {"4.4.0": {**col("4.4.0", [row(hostile, verdict="<b>v</b>")]), "metadata_version": "<img src=x>"}}
    s = matrix.build_summary(["4.4.0"], cols, ["--group", "<i>"], 1.0)
    s["experiments"][0]["cells"]["4.4.0"]["report"] = "javascript:alert(1)//report.json"
    page = matrix_report.render_html(s, tmp_path)
    assert "<script>" not in page and "<img" not in page and "javascript:" not in page and "<b>v" not in page
    text = matrix_report.render_md(s)
    assert "<" not in text.replace("\\<", "") and "\\|\\`x\\`" in text       # Markdown's own escapes: text


def test_leftover_homes_are_folders_a_dead_matrix_made_never_links_nor_a_running_ones(tmp_path):
    import os
    root = matrix.matrix_root(tmp_path)
    root.mkdir()
    for name in ("4.4.0", "4.1.1", "4.0.0", "notes"):
        (root / name).mkdir()
    (root / "4.4.0" / matrix.OWNER).write_text("999999999 123\n")                      # a matrix that is gone
    (root / "4.1.1" / matrix.OWNER).write_text(f"{os.getpid()} {matrix.start_time(os.getpid())}\n")   # running
    (root / "3.9.1").symlink_to(tmp_path)
    assert matrix.leftover_homes(tmp_path) == [root / "4.4.0"]       # 4.0.0: no owner file, not a matrix's
    for release, says in (("4.1.1", "runs Kafka 4.1.1"), ("4.0.0", "was not made by a matrix"),
                          ("3.9.1", "is a link or a file")):
        with pytest.raises(HarnessError, match=says):
            matrix.check_homes([release], tmp_path)
    matrix.check_homes(["4.4.0", "4.3.0"], tmp_path)                # left by a dead one (purged first), or new
    (root / "4.2.0").write_text("a file")
    with pytest.raises(HarnessError, match="is a link or a file"):
        matrix.check_homes(["4.2.0"], tmp_path)


def test_a_suite_json_of_odd_shapes_gives_failed_cells_never_a_crash(tmp_path):
    (tmp_path / "4.4.0").mkdir()
    (tmp_path / "4.4.0" / "suite.json").write_text(json.dumps({"experiments": [
        "x", {"experiment": "eos", "counts": [1], "verdict": ["a"], "timings": 5, "kafka_output": {"read_committed": 3}}]}))
    c = matrix.column(tmp_path, "4.4.0", 0, 1.0, "")
    s = matrix.build_summary(["4.4.0"], {"4.4.0": c}, [], 1.0)
    assert s["experiments"][0]["cells"]["4.4.0"]["verdict"] == "failed" and s["exit_code"] == 3


def test_bad_run_options_are_one_line_before_any_stack_and_leave_no_folder(tmp_path):
    from tests.conftest import harness
    proc = harness("matrix", "--kafka-version", "4.4.0", "--messages", "-5", env={"HARNESS_HOME": str(tmp_path / "h")})
    assert proc.returncode == 2 and proc.stderr.strip().splitlines()[-1] == "error: --messages must be at least 1, got -5"
    assert not (tmp_path / "h").exists()


def test_a_release_folder_whose_suite_started_nothing_is_removed_without_a_purge(tmp_path):
    home = tmp_path / "4.4.0"
    home.mkdir()
    (home / matrix.OWNER).write_text("1 2\n")
    said = []
    matrix.purge(home, log=said.append)                 # no state marker: nothing to stop, an empty folder
    assert not home.exists() and said == []
    home.mkdir()
    (home / "notes.txt").write_text("mine")
    matrix.purge(home, log=said.append)                 # not empty and not ours as a stack: left, and said
    assert (home / "notes.txt").exists() and "holds files but no stack" in said[0]


def test_a_java_client_column_judges_only_what_it_can_run():
    assert matrix.parse_clients(None) == ["python"] and matrix.parse_clients("python, java") == ["python", "java"]
    for spec in ("rust", "python,python", ","):
        with pytest.raises(HarnessError, match="--client"):
            matrix.parse_clients(spec)
    java = {**col("3.9.1", [row("eos", rc=(0, 0), report=True)], tv="0"), "client": "java", "key": "3.9.1 java",
            "suite": "3.9.1-java/suite.json"}
    cols = {"3.9.1": col("3.9.1", [row("eos", rc=(0, 0)), row("offset-before", lost=20)], tv="0"), "3.9.1 java": java}
    s = matrix.build_summary(["3.9.1", "3.9.1 java"], cols, [], 10.0)
    by = {e["experiment"]: e for e in s["experiments"]}
    assert (s["keys"], s["releases"], s["clients"]) == (["3.9.1", "3.9.1 java"], ["3.9.1"], ["python", "java"])
    # offset-before takes no --client: its java cell is not applicable, neither a difference nor a failure
    assert by["offset-before"]["not_applicable"] == ["3.9.1 java"] and not by["offset-before"]["differs"]
    assert "3.9.1 java" not in by["offset-before"]["cells"] and s["exit_code"] == 0
    assert by["eos"]["cells"]["3.9.1 java"]["report"] == "3.9.1-java/eos/report.json" and not by["eos"]["differs"]
    text = matrix_report.render_md(s)
    assert "Kafka 3.9.1, Java client (metadata.version x" in text and matrix_report.NOT_APPLICABLE in text
    assert "3.9.1-java/eos/report.html" in matrix_report.render_html(s)
    # a java column whose suite wrote nothing fails the matrix
    s = matrix.build_summary(["3.9.1", "3.9.1 java"], {"3.9.1": cols["3.9.1"]}, [], 10.0)
    assert s["exit_code"] != 0 and s["columns"][1]["client"] == "java"


def test_the_suite_passes_client_only_to_the_experiments_that_take_it():
    from harness.run.suite_runner import accepted_args
    common = ["--messages", "100", "--client", "java"]
    assert accepted_args("eos", common) == common
    assert accepted_args("offset-before", common) == ["--messages", "100"]
    assert accepted_args("eos-streams", common) == ["--messages", "100"]


def test_an_interrupted_suite_s_column_keeps_what_its_runs_reported(tmp_path, monkeypatch):
    """Ctrl-C in the middle of a release's suite: the suite writes its runs' reports, and matrix.json has them."""
    monkeypatch.setenv("HARNESS_HOME", str(tmp_path / "home"))
    out = tmp_path / "m"
    (out / "4.4.0").mkdir(parents=True)

    class Suite:
        returncode = None
        calls = 0

        def __init__(self, cmd, **kwargs):
            pass

        def communicate(self, timeout=None):
            Suite.calls += 1
            if Suite.calls == 1:
                raise KeyboardInterrupt
            (out / "4.4.0" / "suite.json").write_text(json.dumps(
                {"experiments": [row("eos", rc=(0, 0))], "environment": {"kafka_metadata_version": "4.4-IV2"}}))
            self.returncode = 130
            return "", "interrupted\n"

        def send_signal(self, sig):
            pass

    monkeypatch.setattr(matrix.subprocess, "Popen", Suite)
    monkeypatch.setattr(matrix, "purge", lambda home, log=print: None)
    with pytest.raises(KeyboardInterrupt):
        matrix.run_matrix(["4.4.0"], [], out, log=lambda *a: None)
    m = json.loads((out / "matrix.json").read_text())
    assert m["columns"][0]["exit_code"] == 130 and m["columns"][0]["metadata_version"] == "4.4-IV2"
    assert [e["experiment"] for e in m["experiments"]] == ["eos"] and m["exit_code"] == 130


def test_a_consumer_protocol_column_judges_only_what_takes_the_protocol_and_needs_kafka_4():
    assert matrix.parse_protocols(None) == ["classic"]
    assert matrix.parse_protocols("classic, consumer") == ["classic", "consumer"]
    for spec in ("streams", "consumer,consumer", ","):
        with pytest.raises(HarnessError, match="--group-protocol"):
            matrix.parse_protocols(spec)
    assert not matrix.has_protocol("3.9.1", "consumer") and matrix.has_protocol("4.0.0", "consumer")
    assert matrix.has_protocol("3.9.1", "classic")
    assert matrix.column_key("4.4.0", "java", "consumer") == "4.4.0 java consumer"
    assert matrix.folder_of("4.4.0", "python", "consumer") == "4.4.0-consumer"
    assert matrix.protocol_experiments(["eos", "offset-after", "key-after-effect", "zombie"]) == [
        "eos", "offset-after", "zombie"]
    consumer = {**col("4.4.0", [row("eos", rc=(0, 0))]), "key": "4.4.0 consumer", "group_protocol": "consumer",
                "suite": "4.4.0-consumer/suite.json"}
    cols = {"4.4.0": col("4.4.0", [row("eos", rc=(0, 0)), row("key-after-effect")]), "4.4.0 consumer": consumer}
    s = matrix.build_summary(["4.4.0", "4.4.0 consumer"], cols, [], 10.0)
    by = {e["experiment"]: e for e in s["experiments"]}
    assert s["group_protocols"] == ["classic", "consumer"] and s["exit_code"] == 0
    # key-after-effect takes no --group-protocol: not applicable there, neither a difference nor a failure
    assert by["key-after-effect"]["not_applicable"] == ["4.4.0 consumer"] and not by["key-after-effect"]["differs"]
    assert by["eos"]["cells"]["4.4.0 consumer"]["report"] == "4.4.0-consumer/eos/report.json"
    text = matrix_report.render_md(s)
    assert "Kafka 4.4.0, consumer group protocol (KIP-848) (metadata.version x" in text
    assert matrix_report.NO_PROTOCOL in text


def test_the_suite_passes_the_group_protocol_only_to_the_experiments_that_take_it():
    from harness.run.suite_runner import accepted_args
    common = ["--messages", "100", "--group-protocol", "consumer"]
    assert accepted_args("eos", common) == accepted_args("offset-after", common) == common
    assert accepted_args("key-after-effect", common) == ["--messages", "100"]


def test_a_release_whose_versions_were_not_read_says_unknown_not_none(tmp_path):
    """The repr check of every report kind: a suite.json whose environment holds null versions made the
    matrix page say 'metadata.version None'; transaction.version 0 (Kafka 3.9) stays 0."""
    import html as std_html
    import re
    (tmp_path / "4.4.0").mkdir()
    (tmp_path / "4.4.0" / "suite.json").write_text(json.dumps({"experiments": [row("eos")], "environment": {
        "kafka_version": "4.4.0", "kafka_metadata_version": None, "kafka_transaction_version": 0}}))
    c = matrix.column(tmp_path, "4.4.0", 0, 1.0, "")
    assert (c["metadata_version"], c["transaction_version"]) == ("unknown", 0)
    cols = {"3.9.1": {**col("3.9.1", [row("eos")]), "metadata_version": None, "transaction_version": None},
            "4.4.0": c}
    s = matrix.build_summary(["3.9.1", "4.4.0"], cols, [], 1.0)
    page = std_html.unescape(re.sub(r"<[^>]+>", " ", matrix_report.render_html(s)))
    for text in (page, matrix_report.render_md(s)):
        assert not [r for r in ("None", "['", "{'", "True", "False") if r in text], text
        assert "metadata.version unknown" in text and "transaction.version 0" in text
