"""`harness bench streams` reads each restart's phases from the workers' logs (on hand-made logs)."""

from harness.bench.streams import StreamsBenchOptions, restart_phases, start_times, summary
from harness.bench.streams_report import render_html, render_md
from harness.core.errors import HarnessError

LOG = """[0.028s][warning][aot] a line of the JVM's own
eos-streams MAIN worker=w0 attempt=1 process-start=100.000000 main=100.300000
eos-streams STARTING worker=w0 attempt=1 time=100.350000
eos-streams RUNNING worker=w0 attempt=1 time=100.500000 process-id=abc
eos-streams FIRST-RECORD worker=w0 attempt=1 message_id=pay-000001 partition=0 offset=0 time=100.600000
eos-streams MAIN worker=w0 attempt=2 process-start=101.020000 main=101.270000
eos-streams SETUP worker=w0 attempt=2 crash-plan=101.275000 logging=101.280000 built=101.295000
eos-streams LEDGER worker=w0 attempt=2 start=101.271000 connected=101.400000
eos-streams STARTING worker=w0 attempt=2 time=101.300000
eos-streams RUNNING worker=w0 attempt=2 time=101.550000 process-id=abc
eos-streams FIRST-RECORD worker=w0 attempt=2 message_id=pay-000002 partition=0 offset=1 time=101.700000
eos-streams MAIN worker=w0 attempt=3 process-start=unknown main=103.000000
"""


def test_each_restart_is_split_into_its_phases_from_the_logs_and_the_kill():
    starts = start_times(LOG)
    assert starts[("w0", 2)] == {"process_start": 101.02, "main": 101.27, "crash_plan": 101.275, "logging": 101.28,
                                 "built": 101.295,
                                 "starting": 101.3, "running": 101.55, "first_record": 101.7}
    crashes = [{"worker": "w0", "attempt": 1, "time": 101.0}, {"worker": "w0", "attempt": 2, "time": 102.5},
               {"worker": "w0", "attempt": 9, "time": 200.0}]          # no successor logged: not timed
    rows = restart_phases(crashes, starts)
    assert len(rows) == 2
    assert rows[0] == {"kill->process_start": 0.02, "process_start->main": 0.25, "main->starting": 0.03,
                       "starting->running": 0.25, "running->first_record": 0.15,
                       "main->crash_plan": 0.005, "crash_plan->logging": 0.005, "logging->built": 0.015,
                       "built->starting": 0.005}
    # the third attempt's log ends after main(), and its process start could not be read: unknown, not 0
    assert rows[1]["kill->process_start"] is None and rows[1]["process_start->main"] is None
    assert rows[1]["main->starting"] is None and rows[1]["running->first_record"] is None


def test_a_lever_is_summarised_over_all_restarts_of_its_as_predicted_runs():
    cells = [{"lever": "aot", "verdict": "as-predicted", "restarts": [0.4, 0.5, 0.6], "cpu_seconds_per_crash": 1.0,
              "seconds": 60, "phases": [{"kill->process_start": 0.01}, {"kill->process_start": 0.03}]},
             {"lever": "aot", "verdict": "as-predicted", "restarts": [0.7, 0.8, 0.9, 2.0], "cpu_seconds_per_crash": 1.2,
              "seconds": 70, "phases": [{"kill->process_start": None}]},
             {"lever": "aot", "verdict": "unexpected", "restarts": [9.0, 9.0]}]
    got = summary(cells, ["aot", "cds"])
    a = got[0]
    assert (a["runs"], a["restarts"], a["restart_median_seconds"]) == (2, 7, 0.7)      # pooled, not a median of medians
    assert a["restart_p90_seconds"] == 2.0 and a["cpu_seconds_per_crash"] == 1.1       # nearest rank: ceil(6.3) = 7th
    assert a["phases"]["kill->process_start"] == 0.02 and a["phases"]["starting->running"] is None
    assert got[1]["runs"] == 0 and got[1]["restart_median_seconds"] is None
    d = {"bench_id": "b", "status": "complete", "environment": {"cpus": 2}, "wall_seconds": 1.0, "cells": cells,
         "parameters": {"levers": ["aot", "cds"], "repetitions": 2, "messages": 1000, "seed": 25}, "summary": got}
    md = render_md(d)
    assert "| aot | unknown | 2 | 7 | 0.70 | 2.00 | 1.10 | unknown |" in md and "| cds | unknown | 0 | 0 | unknown |" in md
    assert "<h2>Per lever</h2>" in render_html(d)
    # the set-up's steps: a table of their own, unknown where no log gave them
    assert "| aot | unknown | unknown | unknown | unknown |" in md
    assert "set-up, step by step" in render_html(d)


def test_each_planned_death_gives_its_jvm_s_cpu_and_a_lever_the_median_of_them():
    from harness.bench.streams import crash_cpu
    text = ("eos-streams CRASH message_id=pay-000001 partition=0 offset=3 unacked=1 cpu=0.61\n"
            "eos-streams CRASH message_id=pay-000002 partition=0 offset=9 unacked=1 cpu=unknown\n"
            "a line that says eos-streams CRASH cpu=9.00\n"
            "eos-streams CRASH message_id=pay-000003 partition=1 offset=2 unacked=1 cpu=0.75\n")
    assert crash_cpu(text) == [0.61, 0.75]
    got = summary([{"lever": "cds", "verdict": "as-predicted", "jvm_cpu": [0.5, 0.7]},
                   {"lever": "cds", "verdict": "as-predicted", "jvm_cpu": [0.6]}], ["cds"])
    assert got[0]["jvm_cpu_median"] == 0.6


def test_a_p90_of_ten_is_the_ninth_not_the_largest():
    from harness.bench.streams import _p90
    assert _p90([float(i) for i in range(1, 11)]) == 9.0 and _p90([]) is None


def test_garbled_or_foreign_log_lines_are_not_read_and_never_raise():
    text = ("eos-streams RUNNING worker=w0 attempt=2 time=1.2.3 process-id=x\n"
            "a line that says eos-streams MAIN worker=w0 attempt=2 process-start=5.0 main=6.0\n"
            "eos-streams STARTING worker=w0 attempt=2 time=101.300000\n")
    assert start_times(text) == {("w0", 2): {"starting": 101.3}}


def test_a_phase_just_below_zero_is_zero_within_the_clocks_resolution():
    starts = {("w0", 2): {"process_start": 100.995, "main": 101.2}}
    rows = restart_phases([{"worker": "w0", "attempt": 1, "time": 101.0}, {"worker": "w0", "attempt": 1, "time": 101.5}],
                          starts)
    assert rows[0]["kill->process_start"] == 0.0 and rows[1]["kill->process_start"] is None


def test_bad_levers_and_sizes_are_one_clear_error():
    import pytest
    for opts, needle in ((StreamsBenchOptions(levers=["jit"]), "--levers"),
                         (StreamsBenchOptions(levers=[]), "--levers"),
                         (StreamsBenchOptions(messages=5), "--messages"),
                         (StreamsBenchOptions(levers=["cds", "cds"]), "twice")):
        with pytest.raises(HarnessError, match=needle):
            opts.validate()
