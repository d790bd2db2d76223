"""librdkafka's lines: every one to the file, at most one per distinct message per window to stderr."""

import io
import logging
import time

import pytest

from harness.clients import kafka_logging
from harness.clients.kafka_logging import RateLimitedHandler


class Clock:
    def __init__(self):
        self.t = 1000.0

    def __call__(self):
        return self.t


def record(text, level=logging.ERROR):
    # confluent_kafka logs as logger.log(level, "%s [%s] %s", facility, client name, message)
    fac, _, rest = text.partition(" ")
    return logging.LogRecord("harness.kafka", level, __file__, 0, "%s [%s] %s",
                             (fac, "rdkafka#producer-1", rest), None)


def refused(ms):
    return f"FAIL 127.0.0.1:9092/1: Connect to ipv4#127.0.0.1:9092 failed: Connection refused (after {ms}ms)"


def test_one_line_per_message_per_window_with_a_count():
    out, clock = io.StringIO(), Clock()
    h = RateLimitedHandler(out, every_s=30, clock=clock, where="/x/kafka-clients.log")
    for i in range(300):                     # 30 s of an outage at ten lines a second
        h.handle(record(refused(i)))
        clock.t += 0.1
    lines = out.getvalue().splitlines()
    assert len(lines) == 1 and lines[0].startswith("kafka: FAIL [rdkafka#producer-1]")
    clock.t = 1030.0
    h.handle(record(refused(7)))
    lines = out.getvalue().splitlines()
    assert len(lines) == 2
    assert "(299 more like this held back in the last 30 s; all lines are in /x/kafka-clients.log)" in lines[1]


def test_distinct_messages_are_limited_separately():
    out, clock = io.StringIO(), Clock()
    h = RateLimitedHandler(out, every_s=30, clock=clock)
    for _ in range(5):
        h.handle(record(refused(1)))
        h.handle(record("REQTMOUT 127.0.0.1:9092/1: Timed out 3 in-flight requests"))
        clock.t += 1
    assert len(out.getvalue().splitlines()) == 2


def test_lines_below_warning_do_not_reach_stderr():
    out = io.StringIO()
    logger = logging.Logger("test")          # a logger checks each handler's level before handing it a record
    logger.addHandler(RateLimitedHandler(out, clock=Clock()))
    logger.handle(record("CONFWARN nothing to see", logging.INFO))
    assert out.getvalue() == ""
    logger.handle(record("CONFWARN something to see", logging.WARNING))
    assert out.getvalue() == "kafka: CONFWARN [rdkafka#producer-1] something to see\n"


def test_close_reports_what_is_still_held_back():
    out, clock = io.StringIO(), Clock()
    h = RateLimitedHandler(out, every_s=30, clock=clock)
    for _ in range(4):
        h.handle(record(refused(1)))
        clock.t += 1
    h.close()
    lines = out.getvalue().splitlines()
    assert len(lines) == 2 and "3 more like this held back in the last 4 s" in lines[1]


@pytest.fixture
def fresh_logger():
    yield
    logger = logging.getLogger(kafka_logging.LOGGER_NAME)
    for h in list(logger.handlers):
        logger.removeHandler(h)
        h.close()


def test_every_line_goes_to_the_file(tmp_path, fresh_logger):
    out, clock = io.StringIO(), Clock()
    logger = kafka_logging.configure(tmp_path / "logs" / "k.log", every_s=30, stream=out, clock=clock)
    for i in range(50):
        logger.log(logging.ERROR, "%s [%s] %s", "FAIL", "rdkafka#consumer-2", refused(i))
    assert len((tmp_path / "logs" / "k.log").read_text().splitlines()) == 50
    assert len(out.getvalue().splitlines()) == 1
    assert kafka_logging.client_config() == {"logger": logger, "log_level": kafka_logging.CLIENT_LOG_LEVEL}


def test_a_real_client_facing_a_dead_broker(tmp_path, fresh_logger):
    """librdkafka takes the logger entry and hands its lines over when polled."""
    from confluent_kafka import Producer
    out = io.StringIO()
    kafka_logging.configure(tmp_path / "k.log", every_s=30, stream=out)
    p = Producer({"bootstrap.servers": "127.0.0.1:1", **kafka_logging.client_config()})
    t_end = time.monotonic() + 2.5
    while time.monotonic() < t_end:
        p.poll(0.1)
    in_file = (tmp_path / "k.log").read_text().splitlines()
    shown = out.getvalue().splitlines()
    assert len(in_file) >= 2, in_file
    assert len(shown) == 1 and "Connection refused" in shown[0]
    del p


def test_a_routine_retry_worded_as_a_warning_stays_out_of_the_terminal():
    """A fresh broker still loading its coordinators makes the first producer retry; librdkafka says so as a
    warning, which a new user read as an error on their first run."""
    out = io.StringIO()
    h = RateLimitedHandler(out, clock=Clock())
    h.handle(record("GETPID [thrd:main]: Failed to acquire idempotence PID from broker 127.0.0.1:19195/1: "
                    "Broker: Coordinator load in progress: retrying", logging.WARNING))
    assert out.getvalue() == ""
    h.handle(record(refused(3), logging.WARNING))
    assert out.getvalue().count("\n") == 1              # other warnings still reach it


def test_a_routine_retry_is_kept_in_the_runs_log_file_and_a_real_error_beside_it_is_shown(tmp_path, fresh_logger):
    """The line a fresh broker makes the first idempotent producer log goes to the log file only; an
    idempotence error that is not a retry (the producer cannot go on) still reaches the terminal."""
    out = io.StringIO()
    logger = kafka_logging.configure(tmp_path / "kafka-clients.log", stream=out, clock=Clock())
    routine = ("[thrd:main]: Failed to acquire idempotence PID from broker 127.0.0.1:19092/1: "
               "Broker: Coordinator load in progress: retrying")
    fatal = "[thrd:main]: Fatal idempotent producer error: Broker: Cluster authorization failed"
    logger.log(logging.WARNING, "%s [%s] %s", "GETPID", "rdkafka#producer-1", routine)
    logger.log(logging.ERROR, "%s [%s] %s", "FATAL", "rdkafka#producer-1", fatal)
    in_file = (tmp_path / "kafka-clients.log").read_text()
    assert "Coordinator load in progress: retrying" in in_file and "Cluster authorization failed" in in_file
    shown = out.getvalue().splitlines()
    assert len(shown) == 1 and "Cluster authorization failed" in shown[0]
