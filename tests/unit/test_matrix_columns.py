"""harness matrix's columns without services: Kafka Streams' group protocol (--streams-protocol classic,streams)
as a dimension beside the client and the consumer group protocol: which columns exist and what each runs, a
release without streams groups (before 4.2) getting no such column and the pages saying so, cells of the
experiments that take no --streams-protocol marked n/a, and bad combinations refused in one line."""

import json

import pytest

from harness.core.errors import HarnessError
from harness.reporting import matrix_report
from harness.run import matrix_columns as columns
from harness.run import matrix_runner as matrix
from tests.unit.test_matrix import col, row

ALL = (["python", "java"], ["classic", "consumer"], ["classic", "streams"])


def test_the_streams_protocol_is_parsed_named_and_needs_kafka_4_2():
    assert columns.parse_streams_protocols(None) == ["classic"]
    assert columns.parse_streams_protocols("classic, streams") == ["classic", "streams"]
    for spec in ("consumer", "streams,streams", ","):
        with pytest.raises(HarnessError, match="--streams-protocol"):
            columns.parse_streams_protocols(spec)
    assert not columns.has_protocol("4.1.1", "streams") and columns.has_protocol("4.2.0", "streams")
    assert columns.has_protocol("4.1.1", "consumer") and columns.has_protocol("3.9.1", "classic")
    assert columns.column_key("4.4.0", streams="streams") == "4.4.0 streams"
    assert columns.folder_of("4.4.0", "python", "classic", "streams") == "4.4.0-streams"
    for combo in (("python", "classic", "classic"), ("java", "consumer", "classic"), ("python", "classic", "streams")):
        assert columns.split(columns.column_key("4.4.0", *combo)) == ("4.4.0", *combo)
    assert columns.streams_protocol_experiments(["eos", "eos-streams", "offset-after"]) == ["eos-streams"]


def test_each_column_runs_only_the_chosen_experiments_that_take_its_values_and_none_is_empty():
    common, at_once = ["--messages", "100"], ["--parallel", "2"]
    got = columns.variant_args(["offset-after", "eos", "eos-streams", "key-after-effect"], ALL, common, at_once)
    # eos-streams takes no --client and no --group-protocol: a streams column only beside python and classic
    assert set(got) == {"java", "consumer", "java consumer", "streams"}
    assert got["streams"] == [*common, "--experiments", "eos-streams", "--streams-protocol", "streams", *at_once]
    assert got["java consumer"] == [*common, "--experiments", "eos", "--client", "java", "--group-protocol",
                                    "consumer", *at_once]
    assert got["consumer"][:4] == [*common, "--experiments", "offset-after,eos"]


def test_a_streams_protocol_no_column_can_run_is_refused_in_one_line():
    with pytest.raises(HarnessError) as e:
        columns.variant_args(["eos", "eos-streams"], (["java"], ["classic"], ["classic", "streams"]), [], [])
    assert str(e.value) == ("--streams-protocol streams: no column of this matrix runs it (eos-streams takes it, but "
                            "not the other values given; add python to --client)")
    # streams alone makes every column a streams one: eos (java, consumer) then has none, and the line says why
    with pytest.raises(HarnessError) as e:
        columns.variant_args(["eos", "eos-streams"], (["java"], ["consumer"], ["streams"]), [], [])
    assert str(e.value) == ("--client java: no column of this matrix runs it (eos takes it, but not the other values "
                            "given; add classic to --streams-protocol)")


def test_a_release_without_streams_groups_gets_no_such_column_and_the_reason_is_kept():
    dims = (["python"], ["classic", "consumer"], ["classic", "streams"])
    variants = columns.variant_args(["eos", "eos-streams"], dims, [], [])
    order, absent = columns.plan(["3.9.1", "4.1.1", "4.4.0"], dims, variants)
    assert [columns.column_key(*c) for c in order] == [
        "3.9.1", "4.1.1", "4.1.1 consumer", "4.4.0", "4.4.0 streams", "4.4.0 consumer"]
    assert absent == [
        {"key": "3.9.1 streams", "why": "Kafka 3.9.1 has no streams group protocol (Kafka 4.2 or later)"},
        {"key": "3.9.1 consumer", "why": "Kafka 3.9.1 has no consumer group protocol (Kafka 4.0 or later)"},
        {"key": "4.1.1 streams", "why": "Kafka 4.1.1 has no streams group protocol (Kafka 4.2 or later)"}]


def test_a_streams_column_judges_only_eos_streams_and_the_pages_say_what_was_left_out():
    streams = {**col("4.4.0", [row("eos-streams", rc=(0, 0))]), "key": "4.4.0 streams",
               "streams_protocol": "streams", "suite": "4.4.0-streams/suite.json"}
    cols = {"4.4.0": col("4.4.0", [row("eos", rc=(0, 0)), row("eos-streams", rc=(0, 0))]), "4.4.0 streams": streams}
    absent = [{"key": "4.1.1 streams", "why": "Kafka 4.1.1 has no streams group protocol (Kafka 4.2 or later)"}]
    s = matrix.build_summary(["4.4.0", "4.4.0 streams"], cols, [], 10.0, absent=absent)
    by = {e["experiment"]: e for e in s["experiments"]}
    assert s["streams_protocols"] == ["classic", "streams"] and s["exit_code"] == 0
    assert by["eos"]["not_applicable"] == ["4.4.0 streams"] and not by["eos"]["differs"]
    assert by["eos"]["not_applicable_because"] == {"4.4.0 streams": "--streams-protocol"}
    assert by["eos-streams"]["cells"]["4.4.0 streams"]["report"] == "4.4.0-streams/eos-streams/report.json"
    assert s["absent_columns"] == absent
    text, page = matrix_report.render_md(s), matrix_report.render_html(s)
    assert matrix_report.NO_STREAMS_PROTOCOL in text and matrix_report.NO_STREAMS_PROTOCOL in page
    assert "Kafka 4.4.0, Kafka Streams' streams group protocol (KIP-1071) (metadata.version x" in text
    assert "Kafka 4.1.1 has no streams group protocol (Kafka 4.2 or later): no 4.1.1 streams column" in text
    assert "no 4.1.1 streams column" in page


def test_a_cell_names_the_flag_its_experiment_lacks_even_where_the_column_has_two():
    # share-ack-after takes --client but not --group-protocol: its `java consumer` cell lacks the latter
    s = matrix.build_summary(["4.4.0 java consumer"], {"4.4.0 java consumer": {
        **col("4.4.0", [row("eos", rc=(0, 0)), row("share-ack-after")]), "key": "4.4.0 java consumer"}}, [], 1.0)
    by = {e["experiment"]: e for e in s["experiments"]}
    assert matrix_report.cell_of(by["share-ack-after"], "4.4.0 java consumer") == matrix_report.NO_PROTOCOL
    old = {"not_applicable": ["4.4.0 streams"], "cells": {}}            # a matrix.json that names no flag
    assert matrix_report.cell_of(old, "4.4.0 streams") == matrix_report.NO_STREAMS_PROTOCOL


def test_the_streams_column_s_suite_gets_the_protocol_and_a_release_without_it_none(tmp_path, monkeypatch):
    monkeypatch.setenv("HARNESS_HOME", str(tmp_path / "home"))
    out, commands, said = tmp_path / "m", [], []

    class Suite:
        returncode = 0

        def __init__(self, cmd, **kwargs):
            commands.append(cmd)
            self.folder = out / cmd[cmd.index("--out") + 1]

        def communicate(self, timeout=None):
            self.folder.mkdir(parents=True)
            (self.folder / "suite.json").write_text(json.dumps({"experiments": [row("eos-streams", rc=(0, 0))]}))
            return "", ""

    monkeypatch.setattr(matrix.subprocess, "Popen", Suite)
    monkeypatch.setattr(matrix, "purge", lambda home, log=print: None)
    dims = (["python"], ["classic"], ["classic", "streams"])
    variants = columns.variant_args(["eos-streams"], dims, ["--messages", "10"], [])
    s = matrix.run_matrix(["4.1.1", "4.4.0"], ["--experiments", "eos-streams"], out, log=said.append,
                          client_args=variants, streams=("classic", "streams"))
    tails = [c[c.index("--out") + 1:] for c in commands]
    assert tails == [[str(out / "4.1.1"), "--experiments", "eos-streams"],
                     [str(out / "4.4.0"), "--experiments", "eos-streams"],
                     [str(out / "4.4.0-streams"), "--messages", "10", "--experiments", "eos-streams",
                      "--streams-protocol", "streams"]]
    assert "matrix: Kafka 4.1.1 has no streams group protocol (Kafka 4.2 or later): no 4.1.1 streams column" in said
    assert s["keys"] == ["4.1.1", "4.4.0", "4.4.0 streams"] and s["exit_code"] == 0
    assert [c["streams_protocol"] for c in s["columns"]] == ["classic", "classic", "streams"]


def test_the_suite_passes_the_streams_protocol_only_to_eos_streams():
    from harness.run.suite_runner import accepted_args
    common = ["--messages", "100", "--streams-protocol", "streams"]
    assert accepted_args("eos-streams", common) == common
    assert accepted_args("eos", common) == accepted_args("offset-after", common) == ["--messages", "100"]


@pytest.mark.parametrize("args,says", [
    (("--experiments", "eos", "--streams-protocol", "classic,streams"),
     "error: --streams-protocol streams applies to eos-streams; none of the chosen experiments is one"),
    (("--experiments", "eos,eos-streams", "--client", "java", "--streams-protocol", "classic,streams"),
     "error: --streams-protocol streams: no column of this matrix runs it (eos-streams takes it, but not the other "
     "values given; add python to --client)"),
    (("--experiments", "eos-streams", "--streams-protocol", "kip1071"),
     "error: --streams-protocol takes classic, streams or both (comma-separated), got 'kip1071'")])
def test_the_matrix_refuses_a_streams_protocol_it_cannot_run_before_any_stack(tmp_path, args, says):
    from tests.conftest import harness
    proc = harness("matrix", "--kafka-version", "4.4.0", *args, "--out", str(tmp_path / "m"),
                   env={"HARNESS_HOME": str(tmp_path / "h")})
    assert proc.returncode == 2 and proc.stderr.strip().splitlines()[-1] == says, proc.stderr
    assert not (tmp_path / "h").exists() and not (tmp_path / "m").exists()
