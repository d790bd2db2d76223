"""The watch over the stack's own services (harness/stack/deaths.py), on a process of the test's own."""

import subprocess
import sys
import time

from harness.core import procs
from harness.stack.deaths import WATCH_EVERY_S, StackWatch, Watched
from harness.stack.stack import Stack


def _sleeper() -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])


def test_a_death_is_named_by_its_pid_and_port_at_the_next_look():
    p = _sleeper()
    try:
        w = StackWatch([Watched("kafka", p.pid, procs.start_time(p.pid), 19092)], "watching")
        w.tick(now=100.0)
        assert w.stops_run() is None
        p.kill()
        p.wait()
        w.tick(now=100.0 + WATCH_EVERY_S / 2)          # not looked at again yet
        assert w.stops_run() is None
        w.tick(now=100.0 + WATCH_EVERY_S)
        assert "Kafka node kafka (pid %d, port 19092) died" % p.pid in w.stops_run()
    finally:
        p.kill()
        p.wait()


def test_a_recycled_pid_is_not_the_watched_process():
    p = _sleeper()
    try:
        w = StackWatch([Watched("postgres", p.pid, procs.start_time(p.pid) - 1, 15432)], "watching")
        w.tick(now=0.0)
        assert "PostgreSQL (pid %d, port 15432)" % p.pid in w.stops_run()
        assert not w.busy()
    finally:
        p.kill()
        p.wait()


def test_a_stack_the_harness_does_not_own_is_not_watched_and_says_so():
    w = StackWatch.of(Stack("external", "127.0.0.1:9092", "postgresql://u@127.0.0.1/db", owned=False))
    assert w.watched == [] and "not watched" in w.note
    w.tick(now=0.0)
    assert w.stops_run() is None


class _Service:
    def __init__(self, rec):
        self.rec = rec

    def running(self):
        return self.rec


def test_a_run_that_kills_brokers_on_purpose_watches_postgresql_only(monkeypatch, tmp_path):
    """broker-kill's own deaths must not end the run: the watch leaves the Kafka nodes alone then."""
    from harness.faults.broker import BrokerKill
    from harness.run.runner import _stack_watch
    from harness.stack import local_services
    from harness.stack.pidrecord import PidRecord
    monkeypatch.setenv("HARNESS_HOME", str(tmp_path))
    p = _sleeper()
    try:
        def rec(port_name, port):
            return PidRecord(p.pid, procs.start_time(p.pid), ["x"], ports={port_name: port})
        fake = {"kafka-1": _Service(rec("kafka-1", 19192)), "kafka-2": _Service(rec("kafka-2", 19292)),
                "postgres": _Service(rec("postgres", 15432)), "toxiproxy": _Service(rec("toxiproxy", 18474))}
        monkeypatch.setattr(local_services, "services", lambda state, brokers=None: fake)
        stack = Stack("local", "127.0.0.1:19192", "postgresql://u@127.0.0.1:15432/db", owned=True, brokers=3)
        on_purpose = _stack_watch(stack, [BrokerKill()])
        assert [w.name for w in on_purpose.watched] == ["postgres"]
        assert "not its Kafka nodes (--fault broker-kill stops them on purpose)" in on_purpose.note
        every = _stack_watch(stack, [])
        assert [(w.name, w.port) for w in every.watched] == [("kafka-1", 19192), ("kafka-2", 19292),
                                                             ("postgres", 15432)]
    finally:
        p.kill()
        p.wait()


def test_looking_now_names_a_death_before_the_next_look_is_due():
    p = _sleeper()
    try:
        w = StackWatch([Watched("postgres", p.pid, procs.start_time(p.pid), 15432)], "watching")
        w.tick(now=time.monotonic())
        p.kill()
        p.wait()
        assert w.stops_run() is None
        w.look_now()
        assert "PostgreSQL (pid %d, port 15432) died" % p.pid in w.stops_run()
    finally:
        p.kill()
        p.wait()


def test_workers_that_keep_failing_because_the_stacks_postgresql_died_are_not_blamed(tmp_path):
    """Every attempt exits at once after PostgreSQL is SIGKILLed: five failures come before the watch's next
    look. The run ends naming the dead service, not the worker (and not as a command that cannot start)."""
    from tests.unit.test_supervisor_and_faults import supervisor
    p = _sleeper()
    w = StackWatch([Watched("postgres", p.pid, procs.start_time(p.pid), 15432)], "watching")
    w.tick(now=time.monotonic())
    p.kill()
    p.wait()
    w._next = float("inf")            # its next regular look never comes during the run
    r = supervisor(tmp_path, "fail", faults=[w]).run()
    assert r.status == "incomplete" and r.gave_up_on is None
    assert r.reason.startswith("the stack's PostgreSQL (pid %d, port 15432) died during the run" % p.pid), r.reason
    (tmp_path / "alone").mkdir()
    alone = supervisor(tmp_path / "alone", "fail", faults=[StackWatch([], "watching nothing")]).run()
    assert alone.gave_up_on == "w0" and "failed 5 times (exit 1)" in alone.reason
