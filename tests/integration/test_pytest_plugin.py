"""The pytest plugin as a user meets it: examples/pytest-user/ run by pytest in a process of its own.

The user's project is copied to a temporary folder and its test run on the session's stack (its
HARNESS_HOME in the environment, so `harness_stack` reuses that stack and leaves it running) with the
correct consumer: green; and with the wrong one on a stack the session starts in a temporary folder and
removes: red, its failure naming the duplicated ids and the report's path.
Then harness.api on its own: a Ctrl-C during `run` still leaves a report (interrupted) and no process,
and a temporary stack is gone with its folder when the process that started it is SIGKILLed.
"""

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from importlib.metadata import entry_points
from pathlib import Path

import pytest

from harness.core import procs
from tests.conftest import ROOT, harness, pids_where, processes_of, searchable_dir

pytestmark = pytest.mark.integration

PROJECT = ROOT / "examples" / "pytest-user"
CONSUMERS = ROOT / "examples" / "consumers" / "python"
# A user's test session: one crash test of 5000 payments on a running stack, well under a minute when idle.
SESSION_TIMEOUT_S = 900
# The guard stops and purges the stack once the process that started it has gone.
GUARD_WAIT_S = 300


def plugin_args() -> list[str]:
    """Nothing when the package's pytest11 entry point is installed (it loads the plugin by itself), else
    the plugin by name (an install whose metadata predates the entry point)."""
    installed = any(ep.value == "harness.pytest_plugin" for ep in entry_points(group="pytest11"))
    return [] if installed else ["-p", "harness.pytest_plugin"]


def user_session(stack_env: dict, tmp_path, consumer: str):
    project = tmp_path / "my-project"
    shutil.copytree(PROJECT, project)
    shutil.copy(CONSUMERS / consumer, project / "consumer.py")
    env = {**os.environ, **stack_env, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *plugin_args(),
                           "--basetemp", str(tmp_path / "basetemp")], cwd=project, env=env, capture_output=True,
                          text=True, timeout=SESSION_TIMEOUT_S, preexec_fn=procs.die_with_parent)
    reports = sorted((tmp_path / "basetemp").rglob("report.json"))
    assert len(reports) == 1, proc.stdout[-3000:] + proc.stderr[-3000:]
    return proc, reports[0].parent, json.loads(reports[0].read_text())


def test_the_users_correct_consumer_passes_on_the_reused_stack(stack, tmp_path):
    proc, _, d = user_session(stack["env"], tmp_path, "correct.py")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "1 passed" in proc.stdout
    assert d["verdict"] == "as-predicted" and d["consumer"]["kills_landed"] > 0
    assert d["stack"]["bootstrap_servers"] == stack["bootstrap_servers"], "the session's stack was not reused"
    assert harness("status", env=stack["env"]).returncode == 0, "the reused stack was stopped"


@pytest.mark.slow          # a stack of its own
def test_the_users_wrong_consumer_fails_naming_the_ids_and_the_report_on_a_stack_of_its_own(stack, tmp_path):
    """No stack answers in its HARNESS_HOME: the session starts one in a temporary folder (under TMPDIR) and
    leaves neither it nor its folder behind."""
    tmp = searchable_dir("harness-test-tmp-")
    proc, folder, d = user_session({"HARNESS_HOME": str(tmp / "no-stack-here"), "TMPDIR": str(tmp)},
                                   tmp_path, "wrong.py")
    assert proc.returncode == 1, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert d["verdict"] == "unexpected" and d["anomalies"]["duplicate_ids"]
    said = proc.stdout
    assert "1 failed" in said and f"{d['counts']['duplicates']} duplicated [" in said
    assert all(i in said for i in d["anomalies"]["duplicate_ids"][:4]), said[-3000:]
    assert str(folder / "report.html") in said
    assert d["stack"]["bootstrap_servers"] != stack["bootstrap_servers"]
    deadline = time.monotonic() + GUARD_WAIT_S          # its guard ends once it finds the folder gone
    while processes_of(tmp) and time.monotonic() < deadline:
        time.sleep(1)
    assert not processes_of(tmp) and not list(tmp.iterdir()), "the session's own stack or folder was left"


@pytest.mark.slow          # a stack of its own
def test_a_temporary_stack_is_gone_when_its_starter_is_killed(tmp_path):
    code = ("from harness.api import Stack; s = Stack.temporary_folder(); s.up(); print(s.home, flush=True); "
            "import time; time.sleep(600)")
    starter = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True, cwd=tmp_path,
                               env={**os.environ, "HARNESS_HOME": "", "PYTHONPATH": str(ROOT)},
                               preexec_fn=procs.die_with_parent)
    home = None
    try:
        home = Path(starter.stdout.readline().strip())
        assert home.is_dir() and (home / "stack.json").exists() and processes_of(home)
    finally:
        starter.send_signal(signal.SIGKILL)
        starter.wait()
    deadline = time.monotonic() + GUARD_WAIT_S
    while (home.exists() or processes_of(home)) and time.monotonic() < deadline:
        time.sleep(1)
    assert not processes_of(home), "the killed starter's stack is still running"
    assert not home.exists(), "the killed starter's temporary state folder was left"


def test_a_ctrl_c_during_an_api_run_leaves_its_report_and_no_process(stack, tmp_path):
    out = tmp_path / "report"
    consumer = CONSUMERS / "correct.py"
    code = ("import sys; from harness.api import Stack, run; "
            f"run('custom', stack=Stack.local(sys.argv[1]), out=sys.argv[2], worker_cmd=[sys.executable, "
            f"{str(consumer)!r}], kills=2, messages=200_000)")
    caller = subprocess.Popen([sys.executable, "-c", code, stack["env"]["HARNESS_HOME"], str(out)],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp_path,
                              env={**os.environ, "PYTHONPATH": str(ROOT)}, preexec_fn=procs.die_with_parent)
    deadline = time.monotonic() + SESSION_TIMEOUT_S
    def consuming(cmd: str) -> bool:        # a worker: neither the caller nor `harness run`, which name it too
        return str(consumer) in cmd and "harness.api" not in cmd and "harness.cli" not in cmd
    while not pids_where(consuming) and caller.poll() is None and time.monotonic() < deadline:
        time.sleep(0.5)                 # until its consumers work: the run is under way
    caller.send_signal(signal.SIGINT)   # to the caller alone, as a signal sent to one process: it passes it on
    _, err = caller.communicate(timeout=SESSION_TIMEOUT_S)
    assert caller.returncode != 0 and "KeyboardInterrupt" in err, err[-3000:]
    assert json.loads((out / "report.json").read_text())["verdict"] == "interrupted"
    assert not pids_where(lambda c: str(out) in c or str(consumer) in c), "a process of the run outlived it"
