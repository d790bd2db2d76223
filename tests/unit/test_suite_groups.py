"""`harness suite --group NAME`: each declaration names its group; every group but the opt-in ones
(cluster) by default; an unknown group is one line naming the valid ones (exit 2), before any stack is
touched. A suite option an experiment refuses is left out of that experiment's run."""

import dataclasses
import os

import pytest

from harness.core.errors import HarnessError
from harness.experiments import REGISTRY
from harness.stack.stack import Stack
from harness.run.suite_runner import (OPT_IN_GROUPS, accepted_args, check_stack, groups, parse_experiments,
    run_suite, suite_experiments)
from tests.conftest import harness
from tests.unit.test_cli_errors import isolated, one_clear_line  # noqa: F401 - the fixture


def test_every_experiment_is_in_one_group_and_the_default_is_all_but_cluster_and_queues():
    g = groups()
    # custom needs the user's --worker-cmd: it declares itself out of the suite, and has no group (so may
    # any experiment whose declaration says so).
    outside = [n for n, e in REGISTRY.items() if not e.suite.get("include", True)]
    assert "custom" in outside and all("group" not in REGISTRY[n].suite for n in outside)
    assert sorted(n for names in g.values() for n in names) == sorted(set(REGISTRY) - set(outside))
    assert g["core"] == ["offset-before", "offset-after", "dedupe"]
    assert g["mistakes"] == ["key-after-effect", "key-before-effect", "key-per-attempt", "key-expiry", "key-reuse",
                             "key-fingerprint", "key-check-then-insert", "increment", "versioned", "auto-commit", "dual-write", "outbox", "provider"]
    assert g["cluster"] == ["producer"]
    assert g["queues"] == ["share-ack-after", "share-ack-before", "share-dedupe", "share-poison", "share-release"]
    default = [n for n in REGISTRY if n not in outside and n not in g["cluster"] + g["queues"]]
    assert suite_experiments() == default == parse_experiments(None)
    assert parse_experiments(None, "mistakes") == g["mistakes"]


def test_the_cluster_group_runs_only_when_named():
    assert "cluster" in OPT_IN_GROUPS
    assert "producer" not in suite_experiments()
    assert suite_experiments("cluster") == parse_experiments(None, "cluster") == ["producer"]


def test_the_cluster_group_is_refused_on_a_one_broker_stack_before_anything_is_created(tmp_path):
    one = Stack(kind="local", bootstrap_servers="127.0.0.1:1", postgres_dsn="", owned=True, brokers=1)
    out = tmp_path / "suite"
    with pytest.raises(HarnessError, match=r"--group cluster needs the 3-broker cluster .*this stack has 1 broker$"):
        run_suite(one, ["producer"], [], out, 1, log=lambda _m: None, group="cluster")
    assert not out.exists()
    check_stack(dataclasses.replace(one, brokers=3), "cluster")     # the cluster takes it
    check_stack(one, "core")                                        # the other groups need one broker


def test_the_cli_refuses_the_cluster_group_on_a_one_broker_stack_in_one_line(isolated):  # noqa: F811
    proc = harness("suite", "--group", "cluster", env=isolated)
    assert proc.returncode == 2
    one_clear_line(proc, "--group cluster needs the 3-broker cluster", "harness up --brokers 3")
    assert not os.path.exists(isolated["HARNESS_HOME"]), "a refused suite started something"


def test_a_suite_option_an_experiment_refuses_is_not_passed_to_its_run():
    common = ["--messages", "200", "--crash-rate", "0.1", "--seed", "25", "--commit-every", "5"]
    assert "commit_every" in REGISTRY["auto-commit"].refuses
    assert accepted_args("auto-commit", common) == ["--messages", "200", "--crash-rate", "0.1", "--seed", "25"]
    assert accepted_args("dedupe", common) == common


def test_the_cli_accepts_a_suite_commit_every_that_auto_commit_refuses(isolated, tmp_path):  # noqa: F811
    # A run alone refuses it (exit 2). The suite leaves it out of that run: its checks of every run's
    # options pass, and the first problem it reports is the next one, an --out already holding a suite.
    alone = harness("run", "auto-commit", "--commit-every", "5", env=isolated)
    assert alone.returncode == 2
    one_clear_line(alone, "--commit-every does not apply to auto-commit")
    taken = tmp_path / "taken"
    taken.mkdir()
    (taken / "suite.json").write_text("{}")
    proc = harness("suite", "--group", "mistakes", "--commit-every", "5", "--out", str(taken), env=isolated)
    assert proc.returncode == 2
    one_clear_line(proc, "already holds a suite")
    assert not os.path.exists(isolated["HARNESS_HOME"]), "a refused suite started something"


def test_an_unknown_group_names_the_valid_ones():
    with pytest.raises(HarnessError, match=r"unknown --group 'nope'; choose one of: cluster, core, eos, mistakes"):
        suite_experiments("nope")
    with pytest.raises(HarnessError, match="give one of them"):
        parse_experiments("dedupe", "core")


def test_a_mistyped_group_gets_a_did_you_mean():
    with pytest.raises(HarnessError, match=r"unknown --group 'mistake'; did you mean 'mistakes'\? choose one of: "
                                           r"cluster, core, eos, mistakes"):
        suite_experiments("mistake")
    with pytest.raises(HarnessError, match=r"unknown --group 'Core'; did you mean 'core'\? choose one of"):
        parse_experiments(None, "Core")


def test_the_cli_refuses_an_unknown_group_in_one_line_with_exit_2(isolated):  # noqa: F811
    proc = harness("suite", "--group", "nope", env=isolated)
    assert proc.returncode == 2
    one_clear_line(proc, "unknown --group 'nope'", "core", "mistakes")
    assert "did you mean" not in proc.stderr, "nothing is near 'nope'"
    proc = harness("suite", "--group", "eso", env=isolated)
    assert proc.returncode == 2
    one_clear_line(proc, "unknown --group 'eso'; did you mean 'eos'?", "choose one of")
    one_clear_line(harness("worksheet", "--group", "cor", env=isolated), "did you mean 'core'?")
    assert not os.path.exists(isolated["HARNESS_HOME"]), "a refused suite started something"


def test_every_mistake_states_its_lesson_the_same_way():
    for name in groups()["mistakes"]:
        lesson = REGISTRY[name].lesson
        assert lesson.startswith("Mistake: ") and " Fix: " in lesson and "\n" not in lesson, name


def test_a_finished_run_s_cpu_seconds_are_the_kernel_s_account_of_it_and_its_children():
    import subprocess
    import sys
    import time
    from harness.run.suite_runner import reaped
    # the run's own process burns a little, a child of it burns more: both are counted
    burn = "import time\nt=time.process_time()\nwhile time.process_time()-t<0.3: pass\n"
    proc = subprocess.Popen([sys.executable, "-c", f"import subprocess,sys\n{burn}"
                             f"subprocess.run([sys.executable,'-c',{burn!r}])\nsys.exit(3)"])
    deadline = time.time() + 30
    while (ended := reaped(proc)) is None and time.time() < deadline:
        time.sleep(0.05)
    rc, cpu = ended
    assert rc == 3 and cpu >= 0.55
    assert reaped(proc) == (3, None)          # asked again: the status stays, the CPU was given once


def test_the_suite_says_how_busy_the_machine_was_or_nothing_when_unmeasured():
    from harness.reporting.suite_report import cpu_line
    s = {"experiments": [{"cpu_seconds": 30.0}, {"cpu_seconds": 50.0}], "timings": {"wall_seconds": 50.0},
         "environment": {"cpus": 2}}
    assert cpu_line(s).startswith("The runs used 80.00 CPU-seconds: 80% of 2 cores over the wall time")
    s["experiments"].append({"verdict": "interrupted"})
    assert "(2 of 3 runs measured)" in cpu_line(s)
    assert cpu_line({**s, "environment": {}}) == "" and cpu_line({**s, "experiments": [{}]}) == ""


def test_the_suite_says_how_busy_its_cores_were_in_all_and_the_time_that_needs():
    from harness.reporting.suite_report import cpu_line
    s = {"experiments": [{"cpu_seconds": 30.0}, {"cpu_seconds": 50.0}], "timings": {"wall_seconds": 50.0},
         "environment": {"cpus": 2}, "scheduling": {"cores": 2.0, "busy": {"core_seconds": 90.15, "over_seconds": 49.5,
                                                                          "source": "cpu-lines"}}}
    line = cpu_line(s)
    assert ("Every process on the suite's 2 cores (the runs', the broker's and PostgreSQL's where they run here, "
            "anyone else's) kept them busy 90.2 core-seconds over 49.5 s (91%): the runs 80.0, the rest 10.2. That "
            "much CPU work takes at least 45.0 s on 2 cores (another schedule may need more or less CPU).") in line
    s["scheduling"]["busy"]["core_seconds"] = 221.3
    s["scheduling"]["busy"]["over_seconds"] = 125.4
    assert "at least 110.6 s" in cpu_line(s)                   # 110.65: rounded down, never up
    del s["scheduling"]["busy"]["source"]                      # an older suite.json: it does not say how it counted
    assert "The suite's 2 cores were busy 221.3 core-seconds over 125.4 s (88%)" in cpu_line(s)
    s["environment"]["cpus"] = 8                               # a quota of 2 on an 8-core machine: the suite's 2
    assert "of 2 cores over the wall time" in cpu_line(s)
    s["scheduling"]["busy"]["source"] = "cgroup"
    s["environment"]["cpus"] = 2
    assert "The processes of the suite's cgroup (a quota of 2 cores; a broker or PostgreSQL outside it is not " \
           "counted) used 221.3 core-seconds" in cpu_line(s)
    s["experiments"].append({"verdict": "interrupted"})
    assert "used 221.3" in cpu_line(s) and "the rest" not in cpu_line(s)      # the runs' share unknown
    unmeasured = {**s, "experiments": [{"verdict": "interrupted"}]}
    assert cpu_line(unmeasured).startswith("The processes of the suite's cgroup")  # no run's CPU, still the cores'
    for busy in (None, {"core_seconds": None, "over_seconds": 3}, {"core_seconds": 1, "over_seconds": 0},
                 {"core_seconds": True, "over_seconds": 3}, {"core_seconds": -1, "over_seconds": 3}, "x"):
        assert "core-seconds over" not in cpu_line({**s, "scheduling": {"cores": 2.0, "busy": busy}})
    assert "core-seconds over" not in cpu_line({**s, "scheduling": None})


def test_numbers_no_measurement_gives_leave_the_sentences_out_instead_of_failing():
    """Before: a suite.json with a tiny (schema-valid) core count or time stopped `harness report` with
    ZeroDivisionError."""
    from harness.reporting.suite_report import cpu_line
    s = {"experiments": [{"cpu_seconds": 1.0}], "timings": {"wall_seconds": 1e-300}, "environment": {"cpus": 2},
         "scheduling": {"cores": 1e-300, "busy": {"core_seconds": 1e308, "over_seconds": 1e-300, "source": "cgroup"}}}
    assert cpu_line(s) == ""
    s["scheduling"]["busy"]["over_seconds"] = 10.0
    assert cpu_line(s) == ""                                    # 1e308 / 1e-300 is no number


def test_several_groups_comma_separated_run_their_experiments_in_the_registry_s_order():
    from harness.run.suite_runner import parse_groups
    g = groups()
    assert parse_groups("eos, core,eos") == ["eos", "core"] and parse_groups(None) is None
    both = suite_experiments("eos,core")
    assert both == [n for n in REGISTRY if n in g["core"] + g["eos"]] == parse_experiments(None, "core,eos")
    assert suite_experiments("core,cluster")[-1] == "producer"        # an opt-in group runs when named among others
    with pytest.raises(HarnessError, match=r"^unknown --group 'eso'; did you mean 'eos'\? choose one of: cluster"):
        suite_experiments("core,eso")
    with pytest.raises(HarnessError, match=r"^--group names no group; choose from: cluster, core"):
        suite_experiments(" , ")


def test_a_group_list_with_the_cluster_group_needs_the_cluster():
    one = Stack(kind="local", bootstrap_servers="127.0.0.1:1", postgres_dsn="", owned=True, brokers=1)
    with pytest.raises(HarnessError, match=r"^--group core,cluster needs the 3-broker cluster"):
        check_stack(one, "core,cluster")
    check_stack(dataclasses.replace(one, brokers=3), "core,cluster")
    check_stack(one, "core,eos")


def test_the_suite_title_names_every_group():
    from harness.reporting.suite_report import suite_title
    assert suite_title({"suite_id": "x", "group": "core"}).startswith("Suite of the core group")
    assert suite_title({"suite_id": "x", "group": "core,eos"}).startswith("Suite of the core and eos groups")
    assert suite_title({"suite_id": "x", "group": "core,eos,mistakes"}).startswith(
        "Suite of the core, eos and mistakes groups")
    assert suite_title({"suite_id": "x", "group": None}).startswith("Suite (")


def test_suite_and_matrix_take_a_group_list_and_refuse_an_unknown_name_in_one_line(isolated, tmp_path):  # noqa: F811
    # Accepted: the first problem each reports is the next check, an --out already holding its results.
    for command, done in (("suite", "suite.json"), ("matrix", "matrix.json")):
        taken = tmp_path / command
        taken.mkdir()
        (taken / done).write_text("{}")
        extra = ["--kafka-version", "4.4.0"] if command == "matrix" else []
        proc = harness(command, *extra, "--group", "core,eos", "--out", str(taken), env=isolated)
        assert proc.returncode == 2
        one_clear_line(proc, "already holds a")
        proc = harness(command, *extra, "--group", "core,eso", env=isolated)
        assert proc.returncode == 2
        one_clear_line(proc, "unknown --group 'eso'; did you mean 'eos'?", "choose one of")
    assert not os.path.exists(isolated["HARNESS_HOME"]), "a refused suite or matrix started something"
