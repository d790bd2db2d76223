"""Commands share the real local stack: none stops what the user or another command still uses.

Each test has its own state folder (so its own Kafka and PostgreSQL) and checks with /proc at
the end that no process from that folder survives.
"""

import json
import os
import shutil
import signal
import subprocess
import sys

import pytest

from harness.core import procs
from tests.conftest import ROOT, harness, processes_of, searchable_dir

pytestmark = pytest.mark.integration

# A command that uses the stack through the CLI's own `_with_stack` until a line arrives on stdin.
HOLDER = """
import json, sys
from harness.cli.commands.stack_options import with_stack
def body(stack, log):
    print(json.dumps(stack.pids), flush=True)
    sys.stdin.readline()
try:
    with_stack("local", None, None, False, False, body)
except cli.HarnessError as e:
    sys.exit(f"error: {e}\\n{e.detail or ''}")
"""


@pytest.fixture
def home():
    h = searchable_dir("harness-test-owner-")
    yield h
    left = processes_of(h)
    if left:                      # never leave them behind, but fail the test
        harness("down", env=_env(h))
    shutil.rmtree(h, ignore_errors=True)
    assert not left, f"processes from {h} were still running: {left}"


def _env(home) -> dict:
    return {"HARNESS_HOME": str(home), "HARNESS_BOOTSTRAP_SERVERS": "", "HARNESS_POSTGRES_DSN": "",
            "HARNESS_STACK": "local"}


def _record(home, rel) -> dict:
    return json.loads((home / rel).read_text())


def test_run_after_up_keeps_the_users_postgres_and_the_kafka_it_restarted(home, tmp_path):
    """`harness up`, kill -9 the broker, `harness run`: the run restarts Kafka and stops nothing."""
    env = _env(home)
    harness("up", env=env, check=True)
    pids = json.loads(harness("status", "--json", env=env, check=True).stdout)["pids"]
    pg_pid, old_kafka = pids["postgres"], pids["kafka"]
    os.kill(old_kafka, signal.SIGKILL)
    assert procs.wait_gone(old_kafka, 10)

    run = harness("run", "offset-before", "--messages", "200", "--out", str(tmp_path / "run"), env=env)
    assert run.returncode == 0, run.stderr[-3000:]
    assert procs.alive(pg_pid), "the run stopped the PostgreSQL that `harness up` started"
    kafka_now = [p for p in processes_of(home) if "kafka.Kafka" in procs.argv(p)]
    assert len(kafka_now) == 1, "the Kafka the run started is not running any more"
    new_kafka = kafka_now[0]
    assert "Starting Kafka" in run.stderr and "Starting PostgreSQL" not in run.stderr
    assert "leaving the services this command started running: `harness up` holds the stack" in run.stderr
    assert "stopping" not in run.stderr.lower()
    assert _record(home, "kafka/kafka.pid")["pid"] == new_kafka
    st = json.loads(harness("status", "--json", env=env, check=True).stdout)
    assert st["healthy"] and st["pids"] == {"kafka": new_kafka, "postgres": pg_pid}

    down = harness("down", env=env, check=True)
    assert down.stdout.strip() == f"stopped Kafka (pid {new_kafka}) and PostgreSQL (pid {pg_pid})"
    assert not processes_of(home)
    assert harness("down", env=env, check=True).stdout.strip() == "no stack was running"


def test_a_run_alone_stops_what_it_started_and_keep_stack_keeps_it(home, tmp_path):
    """No `harness up`: a run starts the stack and stops it; with --keep-stack the next run does not stop it."""
    env = _env(home)
    run = harness("run", "offset-before", "--messages", "50", "--quiet", "--out", str(tmp_path / "r1"), env=env)
    assert run.returncode == 0, run.stderr[-3000:]
    assert "stopping the Kafka and PostgreSQL this command started" in run.stderr
    assert not processes_of(home)
    kept = harness("run", "offset-before", "--messages", "50", "--quiet", "--keep-stack",
                   "--out", str(tmp_path / "r2"), env=env)
    assert kept.returncode == 0, kept.stderr[-3000:]
    assert "--keep-stack" in kept.stderr
    pids = json.loads(harness("status", "--json", env=env, check=True).stdout)["pids"]
    again = harness("run", "offset-before", "--messages", "50", "--quiet", "--out", str(tmp_path / "r3"), env=env)
    assert again.returncode == 0 and "stopping" not in again.stderr, again.stderr[-3000:]
    assert all(procs.alive(p) for p in pids.values())
    down = harness("down", env=env, check=True)
    assert down.stdout.strip() == f"stopped Kafka (pid {pids['kafka']}) and PostgreSQL (pid {pids['postgres']})"
    assert not processes_of(home)


def _holder(env):
    return subprocess.Popen([sys.executable, "-c", HOLDER], cwd=ROOT, env={**os.environ, **env}, text=True,
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def _ready(p) -> dict:
    """The pids the holder sees once it uses the stack (its stderr when it failed instead)."""
    line = p.stdout.readline()
    if not line:
        p.wait(30)
        raise AssertionError(f"holder exited {p.returncode}:\n{p.stderr.read()[-3000:]}")
    return json.loads(line)


def _finish(p) -> str:
    out, err = p.communicate("\n", timeout=120)
    assert p.returncode == 0, err[-3000:]
    return err


def test_two_commands_start_one_stack_and_the_last_one_out_stops_it(home):
    """No `harness up`, two commands at once: one Kafka, and the first to finish stops nothing."""
    env = _env(home)
    a, b = _holder(env), _holder(env)
    try:
        pids_a, pids_b = _ready(a), _ready(b)
        assert pids_a == pids_b and all(pids_a.values()), (pids_a, pids_b)
        assert len([p for p in processes_of(home) if "kafka.Kafka" in procs.argv(p)]) == 1
        # Let the command that started the stack (Kafka's parent) finish first: it must leave it to the other.
        first, second = (a, b) if _parent(pids_a["kafka"]) == a.pid else (b, a)
        assert _parent(pids_a["kafka"]) == first.pid
        err_first = _finish(first)
        assert all(procs.alive(p) for p in pids_a.values()), "the first command out stopped the shared stack"
        assert err_first.count("Starting Kafka") == 1
        assert f"leaving the stack running because another run uses it (pid {second.pid})" in err_first
        assert len(os.listdir(home / "leases")) == 1
        st = json.loads(harness("status", "--json", env=env, check=True).stdout)
        assert st["healthy"] and st["pids"] == pids_a
        err_second = _finish(second)
        assert "Starting" not in err_second
        assert "stopping the Kafka and PostgreSQL harness commands started" in err_second
        assert all(procs.wait_gone(p, 5) for p in pids_a.values())
        assert not processes_of(home)
        assert os.listdir(home / "leases") == []
        assert harness("down", env=env, check=True).stdout.strip() == "no stack was running"
    finally:
        for p in (a, b):
            if p.poll() is None:
                p.kill()
                p.wait(10)


def _parent(pid: int) -> int:
    with open(f"/proc/{pid}/stat") as f:
        return int(f.read().rsplit(")", 1)[1].split()[1])
