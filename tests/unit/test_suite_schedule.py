"""How many suite runs go at once (harness/core/suite_schedule.py), on hand-made CPU counts and a hand-made clock."""

import json
import subprocess
import types

import pytest

from harness.core import suite_schedule as ss


class Clock:
    def __init__(self):
        self.t = 100.0

    def __call__(self):
        return self.t


def machine(clock, busy_cores):
    """A reader of busy core-seconds whose cores were busy busy_cores() on average in each step of the clock."""
    state = {"busy": 0.0, "t": clock.t}

    def read():
        state["busy"] += (clock.t - state["t"]) * busy_cores()
        state["t"] = clock.t
        return state["busy"]
    return read


def test_the_kernel_count_is_read_per_cpu_of_this_process_and_anything_else_is_unknown(tmp_path):
    stat = tmp_path / "stat"
    stat.write_text("cpu  300 5 50 800 20 1 2 3 0 0\ncpu0 100 0 0 400 10 0 0 0 0 0\n"
                    "cpu1 200 5 50 400 10 1 2 3 0 0\nintr 1 2 3\n")
    assert ss.busy_seconds({0, 1}, str(stat)) == 3.58       # user+nice+system+irq+softirq (not steal), 100 ticks a s
    assert ss.busy_seconds({0}, str(stat)) == 1.0           # only the CPUs this process may use
    assert ss.busy_seconds({7}, str(stat)) is None
    for bad in ("", "intr 1 2 3\n", "cpu0 a b c d e\n", "cpu0 1 2\n"):
        stat.write_text(bad)
        assert ss.busy_seconds({0}, str(stat)) is None
    stat.write_bytes(b"cpu0 \xff\xfe 1 2 3 4 5\n")
    assert ss.busy_seconds({0}, str(stat)) is None
    assert ss.busy_seconds({0}, str(tmp_path / "missing")) is None


def test_a_cgroup_quota_is_the_cores_and_its_usage_the_busy_time(tmp_path):
    own = tmp_path / "cgroup"
    root = tmp_path / "fs"
    (root / "job").mkdir(parents=True)
    own.write_text("0::/job\n")
    assert ss.cgroup_quota(str(root), str(own)) is None                       # no cpu.max: no quota
    (root / "job" / "cpu.max").write_text("max 100000\n")
    assert ss.cgroup_quota(str(root), str(own)) is None
    (root / "job" / "cpu.max").write_text("150000 100000\n")
    (root / "job" / "cpu.stat").write_text("usage_usec 2500000\nuser_usec 1\n")
    cores, read = ss.cgroup_quota(str(root), str(own))
    assert cores == 1.5 and read() == 2.5
    (root / "job" / "cpu.stat").write_text("garbage\n")
    assert read() is None
    # cgroup v1: cpu and cpuacct controllers
    own.write_text("4:cpu,cpuacct:/ci\n")
    (root / "cpu,cpuacct" / "ci").mkdir(parents=True)
    for name, text in (("cpu.cfs_quota_us", "200000"), ("cpu.cfs_period_us", "100000"), ("cpuacct.usage", "3000000000")):
        (root / "cpu,cpuacct" / "ci" / name).write_text(text + "\n")
    cores, read = ss.cgroup_quota(str(root), str(own))
    assert cores == 2.0 and read() == 3.0
    (root / "cpu,cpuacct" / "ci" / "cpu.cfs_quota_us").write_text("-1\n")
    assert ss.cgroup_quota(str(root), str(own)) is None


def test_auto_runs_one_more_than_the_cores_and_records_how_idle_they_were():
    clock, busy = Clock(), {"v": 0.2}
    s = ss.Scheduler(None, n_cores=2.0, read=machine(clock, lambda: busy["v"]), clock=clock)
    assert s.cap == 3 and [s.may_start(n) for n in range(4)] == [True, True, True, False]
    s.sample()
    s.started("eos-streams", 0, 0.0)
    assert s.starts[0]["idle_cores"] is None            # nothing measured yet: unknown, not 0
    for _ in range(6):
        clock.t += 0.2
        s.sample()
    s.started("eos", 1, 1.2)
    assert s.starts[1] == {"experiment": "eos", "at_seconds": 1.2, "running": 1, "idle_cores": 1.8}
    d = s.describe()
    assert d["mode"] == "auto" and d["cap"] == 3 and d["cores"] == 2.0 and d["max_running"] == 2
    assert ss.Scheduler(None, n_cores=1.5, read=lambda: 0.0, clock=clock).cap == 3    # a quota of 1.5 cores


def test_idle_cores_are_measured_over_a_recent_window_only():
    clock, busy = Clock(), {"v": 1.5}
    s = ss.Scheduler(None, n_cores=2.0, read=machine(clock, lambda: busy["v"]), clock=clock)
    s.sample()
    clock.t += 0.5
    s.sample()
    assert s.idle_cores() is None                       # less than a second measured
    for _ in range(10):
        clock.t += 0.2
        s.sample()
    assert s.idle_cores() == 0.5
    clock.t += 5                                        # no sample for 5 s: too old to say anything now
    assert s.idle_cores() is None


def test_a_failed_read_forgets_the_window():
    clock, ok = Clock(), {"v": True}
    inner = machine(clock, lambda: 0.0)
    s = ss.Scheduler(None, n_cores=2.0, read=lambda: inner() if ok["v"] else None, clock=clock)
    for _ in range(8):
        clock.t += 0.2
        s.sample()
    assert s.idle_cores() == 2.0
    ok["v"] = False
    s.sample()
    assert s.idle_cores() is None


def test_auto_without_any_count_still_runs_and_records_unknown_idle_cores():
    clock = Clock()
    s = ss.Scheduler(None, n_cores=2.0, read=lambda: None, clock=clock)
    s.sample()
    s.started("a", 0, 0.0)
    clock.t += 5
    s.sample()
    assert s.may_start(1) and s.starts[0]["idle_cores"] is None and s.idle_cores() is None


def test_the_whole_suite_busy_time_is_from_the_first_readable_sample_to_the_end():
    clock, busy, ok = Clock(), {"v": 1.5}, {"v": False}
    inner = machine(clock, lambda: busy["v"])
    s = ss.Scheduler(None, n_cores=2.0, read=lambda: inner() if ok["v"] else None, clock=clock)
    s.sample()
    assert s.busy() is None                             # nothing read yet: unknown, not 0
    clock.t += 1
    ok["v"] = True
    s.sample()                                          # the first readable sample starts the count
    for _ in range(10):
        clock.t += 1
        s.sample()
    busy["v"] = 0.5
    ok["v"] = False
    clock.t += 4
    s.sample()                                          # a failed read in between does not matter
    ok["v"] = True
    assert s.describe()["busy"] == {"core_seconds": 17.0, "over_seconds": 14.0, "source": "cpu-lines"}
    s.finish()
    clock.t += 100
    assert s.describe()["busy"]["over_seconds"] == 14.0             # taken when the suite ended
    ok["v"] = False
    assert s.busy() is None                             # the end unreadable: unknown
    t = ss.Scheduler(None, n_cores=2.0, read=lambda: 5.0, clock=clock)
    t.sample()
    assert t.busy() is None                             # no time passed
    clock.t += 0.04
    assert t.busy() is None                             # nor any a tenth of a second shows
    counts = iter([5.0, 3.0])
    t = ss.Scheduler(None, n_cores=2.0, read=lambda: next(counts), clock=clock)
    t.sample()
    clock.t += 1
    assert t.busy() is None                             # a count that went backwards is not believed


def test_a_fixed_count_starts_exactly_that_many_whatever_the_load():
    clock = Clock()
    s = ss.Scheduler(3, n_cores=2.0, read=machine(clock, lambda: 2.0), clock=clock)
    assert [s.may_start(n) for n in range(5)] == [True, True, True, False, False]
    assert s.describe()["mode"] == "fixed" and s.describe()["cap"] == 3


def test_parallel_is_auto_or_a_positive_whole_number():
    assert ss.parse_parallel("auto") is None and ss.parse_parallel(" AUTO ") is None
    assert ss.parse_parallel("3") == 3 and ss.parse_parallel(2) == 2
    for bad in ("0", "-1", "x", "1.5", ""):
        with pytest.raises(ValueError):
            ss.parse_parallel(bad)


def test_the_suite_lines_say_how_the_runs_were_started():
    auto = {"mode": "auto", "cores": 2, "cap": 3, "max_running": 3}
    assert ss.summary_line(auto, 3) == "3 experiments at a time (--parallel auto: this process's 2 core(s) rounded up, plus one)"
    assert ss.summary_line({"mode": "fixed", "cap": 3}, 3).startswith("3 experiments at a time")
    assert ss.summary_line(None, 2) == "2 experiments at a time"      # a suite from before scheduling


def test_run_suite_starts_runs_as_the_scheduler_allows_and_records_why(tmp_path, monkeypatch):
    """The suite loop with real child processes (each a short sleep standing in for `harness run`)."""
    from harness.run import suite_runner as sr
    started = []
    real_popen = subprocess.Popen

    def popen(cmd, **kw):
        started.append(cmd[cmd.index("run") + 1])          # eos (launched first, the heaviest) runs longest
        return real_popen(["sleep", "2" if started[-1] == "eos" else "0.3"], **{k: v for k, v in kw.items() if k != "env"})
    monkeypatch.setattr(sr.subprocess, "Popen", popen)
    monkeypatch.setattr(sr, "check_stack", lambda stack, group: None)
    monkeypatch.setattr(sr, "describe", lambda stack: {"cpus": 2})
    monkeypatch.setattr(sr, "run_env", lambda stack: {})
    monkeypatch.setattr("harness.core.rundir.mark_suite_dir", lambda out: None)

    # The real decision path with one core: two runs at once, the third waits for one of them to end.
    sched = ss.Scheduler(None, n_cores=1.0, read=lambda: __import__("time").monotonic() * 0.5)
    out = tmp_path / "suite"
    out.mkdir()
    summary = sr.run_suite(types.SimpleNamespace(), ["offset-before", "dedupe", "eos"], [], out, None,
                           log=lambda m: None, scheduler=sched)
    assert started == ["eos", "offset-before", "dedupe"]
    d = json.loads((out / "suite.json").read_text())
    assert d["scheduling"]["mode"] == "auto" and d["scheduling"]["max_running"] == 2 and d["parallel"] == 2
    assert [x["running"] for x in d["scheduling"]["starts"]] == [0, 1, 1]
    assert summary["scheduling"] == d["scheduling"]
    from harness.reporting.suite_report import render_md
    assert "2 experiments at a time (--parallel auto: this process's 1 core(s) rounded up, plus one)" in render_md(d)
