"""A command started through procs.dying_with dies with the process that started it, even a SIGKILLed one,
and never outlives a parent that died before it could ask (real processes, both wrappers)."""

import os
import signal
import subprocess
import sys
import time

import pytest

from harness.core import procs

WRAPPERS = [pytest.param(True, id="setpriv"), pytest.param(False, id="python")]

# A parent that starts `sleep 300` through the wrapper, prints the sleeper's pid and waits.
PARENT = """
import os, subprocess, sys, time
sys.path.insert(0, sys.argv[1])
from harness.core import procs
p = subprocess.Popen(procs.dying_with(["sleep", "300"], os.getpid(), use_setpriv=sys.argv[2] == "1"))
time.sleep(0.5)
print(p.pid, flush=True)
time.sleep(300)
"""


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


@pytest.fixture(autouse=True)
def _need_setpriv(request):
    if "setpriv" in request.node.name and procs.setpriv() is None:
        pytest.skip("no setpriv with --pdeathsig on this machine (the Python wrapper is used)")


@pytest.mark.parametrize("use_setpriv", WRAPPERS)
def test_the_command_dies_when_its_parent_is_sigkilled(use_setpriv):
    from tests.conftest import ROOT
    root = str(ROOT)
    parent = subprocess.Popen([sys.executable, "-c", PARENT, root, "1" if use_setpriv else "0"],
                              stdout=subprocess.PIPE, text=True)
    try:
        child = int(parent.stdout.readline())
        with open(f"/proc/{child}/cmdline", "rb") as f:
            assert f.read().split(b"\0")[:2] == [b"sleep", b"300"]      # the command itself, exec'd: no wrapper left
        parent.send_signal(signal.SIGKILL)
        parent.wait(timeout=10)
        deadline = time.time() + 10
        while _alive(child) and time.time() < deadline:
            time.sleep(0.05)
        assert not _alive(child)
    finally:
        parent.kill()
        parent.wait()


@pytest.mark.parametrize("use_setpriv", WRAPPERS)
def test_a_command_whose_parent_is_already_another_never_runs(use_setpriv, tmp_path):
    marker = tmp_path / "ran"
    # Started by this process but told its parent is another: it must see a stranger as its parent and stop.
    argv = procs.dying_with(["touch", str(marker)], os.getpid() + 1_000_000, use_setpriv=use_setpriv)
    assert subprocess.run(argv, timeout=30).returncode == 0
    assert not marker.exists()
    ok = subprocess.run(procs.dying_with(["touch", str(marker)], os.getpid(), use_setpriv=use_setpriv), timeout=30)
    assert ok.returncode == 0 and marker.exists()


@pytest.mark.parametrize("use_setpriv", WRAPPERS)
def test_a_command_that_does_not_exist_is_exit_127_with_its_name(use_setpriv):
    p = subprocess.run(procs.dying_with(["no-such-command-here", "x"], os.getpid(), use_setpriv=use_setpriv),
                       capture_output=True, text=True, timeout=30)
    assert p.returncode == 127 and "no-such-command-here" in p.stderr


@pytest.mark.parametrize("use_setpriv", WRAPPERS)
def test_arguments_reach_the_command_unchanged(use_setpriv):
    odd = ["$PPID", "a b", "'q'", '"d"', "; rm -rf /", "*", "-c", "", "--", "$1"]
    p = subprocess.run(procs.dying_with([sys.executable, "-c", "import sys, json; print(json.dumps(sys.argv[1:]))",
                                         *odd], os.getpid(), use_setpriv=use_setpriv),
                       capture_output=True, text=True, timeout=30)
    import json
    assert json.loads(p.stdout) == odd
