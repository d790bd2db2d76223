"""`harness bench protocols`: a row per group protocol, each naming its client settings; the group stall read
from the Python workers' histories (a death to the first record of its partition polled by anyone), unknown
where nothing shows it; bad options refused in one line."""

import json

import pytest

from harness.bench import protocols
from harness.bench.protocols_report import render_md, summary_rows
from harness.core.errors import HarnessError


def test_a_group_stall_ends_at_the_first_poll_of_the_dead_member_s_partition_by_anyone():
    lines = [json.dumps([10.0, "poll", "in", {"0": [[0, 4]], "1": []}]),
             json.dumps([12.5, "poll", "in", {"1": [[7, 7]]}]),      # another member takes partition 1 over
             json.dumps([13.0, "commit", "in", {"1": 8}]),
             '[14.0, "poll", "in", {"0": [[5, ',                      # cut short by a SIGKILL
             json.dumps([15.0, "poll", "in", {"0": [[5, 9]]}])]
    seen = protocols.polls(lines)
    assert seen == [(10.0, 0), (12.5, 1), (15.0, 0)]
    crashes = [{"time": 11.0, "partition": 1}, {"time": 11.0, "partition": 0}, {"time": 16.0, "partition": 0},
               {"time": 11.0, "partition": None}, {"time": None, "partition": 0}]
    assert protocols.group_stalls(crashes, seen) == [1.5, 4.0, None, None, None]


def test_every_row_names_its_client_settings_and_the_broker_settings_that_rule_it():
    cells = [{"row": "streams", "verdict": "as-predicted", "restarts": [5.2, 5.4, 5.0], "stalls": [5.3, None],
              "stall_source": "workers' histories"},
             {"row": "streams", "verdict": "unexpected", "restarts": [99.0], "stalls": [99.0]},
             {"row": "classic", "verdict": "no report", "error": "error: a refusal"}]
    rows = protocols.summary(cells, ["classic", "streams"], {"group.streams.session.timeout.ms": "5000"})
    assert [r["row"] for r in rows] == ["classic", "streams"]
    classic, streams = rows
    assert classic["runs"] == 0 and classic["restart_median_seconds"] is None and classic["refused"] == "error: a refusal"
    assert streams["restart_median_seconds"] == 5.2 and streams["stall_median_seconds"] == 5.3
    assert streams["stalls_known"] == 1 and streams["runs"] == 1
    assert "group.protocol=streams" in streams["client_settings"]
    assert "group.streams.session.timeout.ms=5000, group.streams.heartbeat.interval.ms=unknown" in streams["client_settings"]
    assert "session.timeout.ms=1000" in classic["client_settings"]
    d = {"bench_id": "b", "status": "complete", "wall_seconds": 1.0, "cells": cells, "summary": rows,
         "environment": {"cpus": 2}, "parameters": {"messages": 400, "crash_rate": 0.01, "seed": 25, "repetitions": 1}}
    shown = summary_rows(d)
    assert shown[0][-1] == "refused: error: a refusal" and shown[1][5] == "5.20"
    md = render_md(d)
    assert md.count("\n| classic |") == 2 and "unknown" in md      # a row each; the unmeasured are unknown, not 0


@pytest.mark.parametrize("kw, says", [({"rows": ["classic", "kip848"]}, "choose among classic, consumer"),
                                      ({"rows": ["streams", "streams"]}, "names one twice"),
                                      ({"messages": 5}, "--messages must be between 20"),
                                      ({"crash_rate": 0}, "--crash-rate must be above 0")])
def test_bad_options_are_refused_in_one_line(kw, says):
    with pytest.raises(HarnessError, match=says):
        protocols.ProtocolBenchOptions(**kw).validate()
    assert protocols.parse_rows(None) == list(protocols.ROW_NAMES) == ["classic", "consumer", "streams-classic", "streams"]


def test_the_progress_lines_say_unknown_for_a_median_not_measured_never_none(monkeypatch, tmp_path):
    """A Kafka Streams row has no group stall (its workers keep no history): the line printed after each run
    said 'group stall median None s'."""
    import harness.bench.protocols_report as report
    import harness.stack.broker_version as broker_version
    import harness.stack.environment as environment
    monkeypatch.setattr(broker_version, "broker_settings", lambda *a, **k: {})
    monkeypatch.setattr(environment, "describe", lambda stack: {})
    monkeypatch.setattr(report, "write_all", lambda *a, **k: None)
    monkeypatch.setattr(protocols, "run_cell", lambda stack, row, rep, opts, folder: {
        "row": row.name, "verdict": "as-predicted", "restarts": [0.85], "stalls": [], "stall_source": "unknown",
        "restart_median_seconds": 0.85, "stall_median_seconds": None})

    class Stack:
        bootstrap_servers = "127.0.0.1:1"
    lines = []
    opts = protocols.ProtocolBenchOptions(rows=["streams-classic"], repetitions=1)
    protocols.run_protocol_bench(Stack(), opts, tmp_path, "b1", log=lines.append)
    said = [x for x in lines if "restart median" in x]
    assert said and all("None" not in x for x in said), lines
    assert "restart median 0.85 s, group stall median unknown" in said[0]
