"""The watch over the stack's own services (harness/stack/deaths.py), on a process of the test's own."""

import subprocess
import sys

from harness import procs
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
