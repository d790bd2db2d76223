"""How many suite runs go at once (harness/suite_schedule.py), on hand-made CPU counts and a hand-made clock."""

import json
import subprocess
import types

import pytest

from harness import suite_schedule as ss


class Clock:
    def __init__(self):
        self.t = 100.0

    def __call__(self):
        return self.t


def machine(clock, idle_share_per_second):
    """A /proc/stat reader whose cores were idle the given share (0..1) in each second of the clock."""
    state = {"idle": 0.0, "total": 0.0, "t": clock.t}

    def read():
        dt = clock.t - state["t"]
        state["idle"] += dt * 100 * idle_share_per_second()
        state["total"] += dt * 100
        state["t"] = clock.t
        return state["idle"], state["total"]
    return read


def test_the_kernel_count_is_read_and_anything_else_is_unknown(tmp_path):
    stat = tmp_path / "stat"
    stat.write_text("cpu  100 5 50 800 20 1 2 3 0 0\ncpu0 50 2 25 400 10 0 1 1 0 0\n")
    assert ss.cpu_times(str(stat)) == (820.0, 981.0)
    for bad in ("", "intr 1 2 3\n", "cpu  a b c d e\n", "cpu  1 2\n"):
        stat.write_text(bad)
        assert ss.cpu_times(str(stat)) is None
    stat.write_bytes(b"cpu \xff\xfe 1 2 3 4 5\n")
    assert ss.cpu_times(str(stat)) is None
    assert ss.cpu_times(str(tmp_path / "missing")) is None


def test_auto_starts_one_at_once_then_more_only_while_the_cores_have_room():
    clock, share = Clock(), {"v": 0.9}
    s = ss.Scheduler(None, n_cores=2, read=machine(clock, lambda: share["v"]), clock=clock)
    assert s.cap == 4
    s.sample()
    assert s.may_start(0)                      # nothing runs: always one, before anything was measured
    s.started("a", 0, 0.0)
    assert s.starts[0]["idle_cores"] is None
    clock.t += 0.5
    s.sample()
    assert not s.may_start(1)                  # no whole second measured yet, and too soon after a start
    clock.t += 0.6
    s.sample()
    assert s.idle_cores() == 1.8 and s.may_start(1)
    s.started("b", 1, 1.1)
    assert not s.may_start(2)                  # settling: the new run's start-up is not in the count yet
    share["v"] = 0.25                          # the cores got busy: 0.5 of 2 idle
    for _ in range(10):
        clock.t += 0.2
        s.sample()
    assert s.idle_cores() == 0.5 and not s.may_start(2)
    share["v"] = 0.5
    for _ in range(10):
        clock.t += 0.2
        s.sample()
    assert s.idle_cores() == 1.0 and s.may_start(2) and not s.may_start(4)
    d = s.describe()
    assert d["mode"] == "auto" and d["cap"] == 4 and d["room_cores"] == ss.ROOM_CORES and d["max_running"] == 2
    assert [x["experiment"] for x in d["starts"]] == ["a", "b"] and d["starts"][1]["idle_cores"] == 1.8


def test_auto_without_the_kernel_count_runs_one_at_a_time():
    clock = Clock()
    s = ss.Scheduler(None, n_cores=2, read=lambda: None, clock=clock)
    s.sample()
    clock.t += 5
    s.sample()
    assert s.may_start(0) and not s.may_start(1) and s.idle_cores() is None


def test_a_fixed_count_starts_exactly_that_many_whatever_the_load():
    clock = Clock()
    s = ss.Scheduler(3, n_cores=2, read=machine(clock, lambda: 0.0), clock=clock)
    assert [s.may_start(n) for n in range(5)] == [True, True, True, False, False]
    assert s.describe()["mode"] == "fixed" and s.describe()["room_cores"] is None


def test_parallel_is_auto_or_a_positive_whole_number():
    assert ss.parse_parallel("auto") is None and ss.parse_parallel(" AUTO ") is None
    assert ss.parse_parallel("3") == 3 and ss.parse_parallel(2) == 2
    for bad in ("0", "-1", "x", "1.5", ""):
        with pytest.raises(ValueError):
            ss.parse_parallel(bad)


def test_the_suite_lines_say_how_the_runs_were_started():
    auto = {"mode": "auto", "cores": 2, "cap": 4, "room_cores": 0.75, "max_running": 3}
    assert "0.75 of the 2 cores were idle" in ss.summary_line(auto, 4) and "up to 3 ran at once" in ss.summary_line(auto, 4)
    assert ss.summary_line({"mode": "fixed", "cap": 3}, 3).startswith("3 experiments at a time")
    assert ss.summary_line(None, 2) == "2 experiments at a time"      # a suite from before scheduling


def test_run_suite_starts_runs_as_the_scheduler_allows_and_records_why(tmp_path, monkeypatch):
    """The suite loop with real child processes (each a short sleep standing in for `harness run`)."""
    from harness import suite_runner as sr
    started = []
    real_popen = subprocess.Popen

    def popen(cmd, **kw):
        started.append(cmd[cmd.index("run") + 1])
        return real_popen(["sleep", "0.3"], **{k: v for k, v in kw.items() if k != "env"})
    monkeypatch.setattr(sr.subprocess, "Popen", popen)
    monkeypatch.setattr(sr, "check_stack", lambda stack, group: None)
    monkeypatch.setattr(sr, "describe", lambda stack: {"cpus": 2})
    monkeypatch.setattr(sr, "run_env", lambda stack: {})
    monkeypatch.setattr("harness.rundir.mark_suite_dir", lambda out: None)

    class OneAtATime(ss.Scheduler):
        def may_start(self, running):
            return running == 0
    sched = OneAtATime(None, n_cores=2, read=lambda: None)
    out = tmp_path / "suite"
    out.mkdir()
    summary = sr.run_suite(types.SimpleNamespace(), ["offset-before", "dedupe"], [], out, None, log=lambda m: None,
                           scheduler=sched)
    assert sorted(started) == ["dedupe", "offset-before"]
    d = json.loads((out / "suite.json").read_text())
    assert d["scheduling"]["mode"] == "auto" and d["scheduling"]["max_running"] == 1
    assert [s["running"] for s in d["scheduling"]["starts"]] == [0, 0] and d["parallel"] == 4
    assert summary["scheduling"] == d["scheduling"]
    from harness.reporting.suite_report import render_md
    assert "up to 1 ran at once" in render_md(d)
