"""A pid file is not proof: the stack code signals only processes whose pid record matches.

Decoys are real processes (`sleep`, or python with `kafka.Kafka` / our data folder on its
command line); each test checks they survive and kills them itself at the end.
"""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from harness.core import procs
from harness.stack import pidrecord
from harness.stack.local_kafka import LocalKafka
from harness.stack.local_postgres import LocalPostgres
from tests.conftest import harness

SLEEPER = "import time; time.sleep(300)"


@pytest.fixture
def spawn():
    """Start processes for a test; kill every one of them (and their groups) afterwards."""
    started, groups = [], []

    def start(*argv, new_session=False):
        p = subprocess.Popen(list(argv), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL, start_new_session=new_session)
        started.append(p)
        if new_session:
            groups.append(p.pid)       # our own group: its other members are ours too
        _wait_exec(p.pid, argv[-1])
        return p
    yield start
    for g in groups:
        try:
            os.killpg(g, signal.SIGKILL)
        except ProcessLookupError:
            pass
    for p in started:
        if p.poll() is None:
            p.kill()
        p.wait(10)
    assert not [p.pid for p in started if procs.alive(p.pid)]


def _wait_exec(pid: int, last_arg: str) -> None:
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and last_arg not in procs.argv(pid):
        time.sleep(0.01)


def python_decoy(spawn, *args, new_session=False):
    return spawn(sys.executable, "-c", SLEEPER, *args, new_session=new_session)


def record_of(pid, marks, group=False, start_time=None, **kw):
    return pidrecord.PidRecord(pid=pid, start_time=start_time if start_time is not None else procs.start_time(pid),
                               marks=list(marks), group=group, **kw)


# -- /proc reading ---------------------------------------------------------------

def test_start_time_and_argv_of_a_live_process(spawn):
    p = python_decoy(spawn, "kafka.Kafka", "/x/server.properties")
    assert procs.start_time(p.pid) > 0
    assert procs.start_time(p.pid) == procs.start_time(p.pid)
    assert procs.argv(p.pid)[-2:] == ["kafka.Kafka", "/x/server.properties"]


def test_start_time_of_a_dead_pid_is_none():
    p = subprocess.Popen(["true"])
    p.wait()
    assert procs.start_time(p.pid) is None and procs.argv(p.pid) == []


# -- reading records -------------------------------------------------------------

@pytest.mark.parametrize("text", ["", "1234\n", "{", '{"pid": 1234}', '{"pid": "x", "start_time": 1, "marks": ["a"]}',
                                  '{"pid": 1234, "start_time": 5, "marks": []}', "[1, 2]", '{"pid": 1, "start_time": 5, "marks": ["a"]}'])
def test_unusable_records_read_as_none(tmp_path, text):
    f = tmp_path / "svc.pid"
    f.write_text(text)
    assert pidrecord.read(f) is None


def test_record_round_trip(tmp_path):
    rec = pidrecord.PidRecord(pid=4321, start_time=99, marks=["kafka.Kafka", "/p"], group=True,
                              ports={"kafka": 19092}, owner="user")
    pidrecord.write(tmp_path / "k.pid", rec)
    assert pidrecord.read(tmp_path / "k.pid") == rec
    assert not list(tmp_path.glob("*.tmp*"))


# -- matching --------------------------------------------------------------------

def test_matching_record_is_ours(spawn):
    p = python_decoy(spawn, "kafka.Kafka", "/our/server.properties")
    assert pidrecord.why_not_ours(record_of(p.pid, ["kafka.Kafka", "/our/server.properties"])) is None


def test_name_alone_is_not_enough(spawn):
    """The old check: any live process with kafka.Kafka on its command line was taken as ours."""
    p = python_decoy(spawn, "kafka.Kafka", "/someone/elses/server.properties")
    why = pidrecord.why_not_ours(record_of(p.pid, ["kafka.Kafka", "/our/server.properties"]))
    assert why and "/our/server.properties" in why


def test_path_must_be_a_whole_argument(spawn):
    p = python_decoy(spawn, "-D", "/our/postgres/data2")
    assert pidrecord.why_not_ours(record_of(p.pid, ["/our/postgres/data"])) is not None


def test_recycled_pid_is_not_ours(spawn):
    p = python_decoy(spawn, "kafka.Kafka", "/our/server.properties")
    rec = record_of(p.pid, ["kafka.Kafka", "/our/server.properties"], start_time=procs.start_time(p.pid) - 1)
    assert "another time" in pidrecord.why_not_ours(rec)


def test_group_record_needs_a_group_leader(spawn):
    p = python_decoy(spawn, "kafka.Kafka", "/our/server.properties")          # same group as pytest
    assert "process group" in pidrecord.why_not_ours(record_of(p.pid, ["kafka.Kafka", "/our/server.properties"], group=True))


def test_our_own_pid_and_init_are_never_services():
    assert pidrecord.why_not_ours(record_of(os.getpid(), [sys.executable])) is not None
    assert pidrecord.why_not_ours(pidrecord.PidRecord(1, 1, ["x"])) is not None


# -- stopping --------------------------------------------------------------------

def test_stop_leaves_decoys_alone(spawn):
    decoys = [spawn("sleep", "300"), python_decoy(spawn, "kafka.Kafka", "/someone/elses/server.properties")]
    for d in decoys:
        for rec in (record_of(d.pid, ["kafka.Kafka", "/our/server.properties"], group=True),
                    record_of(d.pid, procs.argv(d.pid), start_time=procs.start_time(d.pid) + 7)):
            assert pidrecord.stop(rec, grace=0.5) is False
    time.sleep(0.2)
    assert all(d.poll() is None for d in decoys)


def test_stop_signals_the_pid_only_unless_we_made_the_group(spawn):
    # A group leader with a child in its group: a record without `group` must not touch the child.
    code = "import subprocess, time; subprocess.Popen(['sleep', '300']); time.sleep(300)"
    leader = spawn(sys.executable, "-c", code, "leader-mark", new_session=True)
    child = _child_of(leader.pid)
    assert pidrecord.stop(record_of(leader.pid, ["leader-mark"]), grace=2) is True
    assert procs.alive(child), "a sibling in the group was signalled"
    os.kill(child, signal.SIGKILL)
    assert procs.wait_gone(child, 5)


def test_stop_takes_the_whole_group_we_created(spawn):
    code = "import subprocess, time; subprocess.Popen(['sleep', '300']); time.sleep(300)"
    leader = spawn(sys.executable, "-c", code, "leader-mark", new_session=True)
    child = _child_of(leader.pid)
    assert pidrecord.stop(record_of(leader.pid, ["leader-mark"], group=True), grace=2) is True
    assert procs.wait_gone(child, 5)


def _child_of(pid: int) -> int:
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        for d in Path("/proc").iterdir():
            if d.name.isdigit():
                try:
                    ppid = int((d / "stat").read_text().rsplit(")", 1)[1].split()[1])
                except (OSError, IndexError, ValueError):
                    continue
                if ppid == pid and procs.argv(int(d.name))[:1] == ["sleep"]:
                    return int(d.name)
        time.sleep(0.02)
    raise AssertionError("no child appeared")


def test_kafka_stop_with_a_decoy_record_deletes_the_record_and_spares_the_process(tmp_path, spawn):
    kafka = LocalKafka(tmp_path)
    kafka.home.mkdir(parents=True)
    d = python_decoy(spawn, "kafka.Kafka", "/someone/elses/server.properties", new_session=True)
    pidrecord.write(kafka.pidfile, record_of(d.pid, kafka.marks(), group=True))
    assert kafka.running() is None and kafka.pid() is None
    stopped, note = kafka.stop()
    assert not stopped and f"left pid {d.pid} alone" in note
    assert d.poll() is None and not kafka.pidfile.exists()


def test_postgres_needs_its_own_postmaster_pid_to_agree(tmp_path, spawn):
    pg = LocalPostgres(tmp_path)
    pg.data.mkdir(parents=True)
    d = python_decoy(spawn, "-D", str(pg.data))           # looks like our postmaster by its arguments
    rec = record_of(d.pid, [str(pg.data)])
    pidrecord.write(pg.pidfile, rec)
    assert pg.running() is None                        # no postmaster.pid at all
    (pg.data / "postmaster.pid").write_text(f"{d.pid}\n/elsewhere/data\n0\n15432\n")
    assert pg.running() is None                        # postmaster.pid names another folder
    (pg.data / "postmaster.pid").write_text(f"{d.pid}\n{pg.data}\n0\n15432\n")
    assert pg.running() == rec                         # everything agrees: this one would be ours


def test_harness_down_spares_processes_named_in_forged_pid_files(tmp_path, spawn):
    """The audit's case: decoy pids in the pid files; `harness down` killed them."""
    home = tmp_path / "state"
    kafka, pg = LocalKafka(home), LocalPostgres(home)
    kafka.home.mkdir(parents=True)
    pg.data.mkdir(parents=True)
    legacy = python_decoy(spawn, "kafka.Kafka", "/someone/elses/server.properties", new_session=True)
    sleeper = spawn("sleep", "300")
    pg_decoy = python_decoy(spawn, "postgres", "-D", "/var/lib/postgresql/15/main")
    kafka.pidfile.write_text(f"{legacy.pid}\n")                                    # old bare-pid format
    (pg.data / "postmaster.pid").write_text(f"{pg_decoy.pid}\n{pg.data}\n0\n15432\n")
    pidrecord.write(pg.home / "postgres.pid", record_of(pg_decoy.pid, [str(pg.data)]))  # wrong data folder
    (home / "stack.json").write_text(json.dumps({"kind": "local", "kafka_port": 1, "controller_port": 2,
                                                 "postgres_port": 3}))
    proc = harness("down", env={"HARNESS_HOME": str(home)})
    time.sleep(0.2)
    assert legacy.poll() is None, "a process with kafka.Kafka on its command line was killed"
    assert pg_decoy.poll() is None, "a process named in postmaster.pid was killed"
    assert sleeper.poll() is None
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "no stack was running"
    assert f"left pid {pg_decoy.pid} alone" in proc.stderr
    # A record with the right arguments but another start time: a recycled pid.
    pidrecord.write(kafka.pidfile, record_of(sleeper.pid, procs.argv(sleeper.pid),
                                             start_time=procs.start_time(sleeper.pid) - 3))
    assert harness("down", env={"HARNESS_HOME": str(home)}).stdout.strip() == "no stack was running"
    assert sleeper.poll() is None


# The main thread ends (as a JVM's may while its other threads run its shutdown hooks); the others go on
# ignoring SIGTERM, as a broker busy in its controlled shutdown does.
LEADER_GONE = ("import ctypes, signal, threading, time\n"
               "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
               "threading.Thread(target=time.sleep, args=(300,)).start()\n"
               "time.sleep(0.1)\n"
               "ctypes.CDLL(None).pthread_exit(None)\n")


def test_a_process_whose_main_thread_ended_is_alive_while_its_other_threads_run(spawn):
    """Before: `alive` read the leader's zombie state as the process's, so `stop` took a Kafka JVM
    whose main thread had ended for gone after its SIGTERM: no SIGKILL, its record deleted, the
    JVM left running for good (a flaky `harness up` interrupt test found it)."""
    p = spawn(sys.executable, "-c", LEADER_GONE, "leader-gone-mark")
    deadline = time.monotonic() + 5
    while Path(f"/proc/{p.pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z":
        assert time.monotonic() < deadline, "the main thread never ended"
        time.sleep(0.01)
    assert procs.alive(p.pid)
    assert procs.stop(p.pid, grace=0.5) is True        # TERM is ignored: only the KILL ends it
    assert p.wait(5) == -signal.SIGKILL
