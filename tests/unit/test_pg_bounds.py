"""The bounds every PostgreSQL connection of the harness carries (harness/clients/pgconn.py), on hand-made values:
what is left of the time limit, the floors, the order of the options, the reasons, an interrupted run."""

import psycopg
import pytest

from harness.clients import pgconn


@pytest.fixture(autouse=True)
def _fresh():
    pgconn.reset()
    yield
    pgconn.reset()


def test_without_a_run_the_defaults_apply():
    assert pgconn.timeouts() == (pgconn.STATEMENT_DEFAULT_S, pgconn.LOCK_WAIT_DEFAULT_S)


def test_what_is_left_of_the_time_limit_is_the_bound():
    pgconn.set_deadline(1000.0)
    assert pgconn.timeouts(now=1000.0 - 500) == (500, 500)


def test_past_the_time_limit_the_floors_apply():
    pgconn.set_deadline(1000.0)
    assert pgconn.timeouts(now=1000.0 + 50) == (pgconn.STATEMENT_FLOOR_S, pgconn.LOCK_WAIT_FLOOR_S)
    assert pgconn.timeouts(now=1000.0 - 20) == (pgconn.STATEMENT_FLOOR_S, 20)


def test_the_options_put_ours_after_the_dsns_and_the_callers_last():
    pgconn.set_deadline(1000.0)
    got = pgconn.options("-c statement_timeout=0", "-c statement_timeout=3000", now=1000.0 + 1)
    assert got == ("-c statement_timeout=0 -c statement_timeout=60000 -c lock_timeout=10000 "
                   "-c statement_timeout=3000")
    assert pgconn.options(now=1000.0 + 1) == "-c statement_timeout=60000 -c lock_timeout=10000"


def test_a_lock_wait_and_a_statement_timeout_say_so():
    lock = psycopg.errors.LockNotAvailable("canceling statement due to lock timeout\nCONTEXT: x")
    assert pgconn.reason(lock).startswith("canceling statement due to lock timeout (a lock on it held by another")
    assert "lock_timeout" in pgconn.reason(lock) and "CONTEXT" not in pgconn.reason(lock)
    slow = psycopg.errors.QueryCanceled("canceling statement due to statement timeout")
    assert "statement_timeout" in pgconn.reason(slow)
    assert pgconn.reason(ValueError("other")) == "other"


def test_an_interrupted_run_refuses_new_connections_and_names_the_signal():
    pgconn.interrupt("SIGTERM")
    with pytest.raises(psycopg.Error, match="interrupted \\(SIGTERM\\)"):
        pgconn.connect("host=127.0.0.1 port=1")       # refused before any connection is tried
    assert pgconn.interrupted() == "SIGTERM"
    cancelled = psycopg.errors.QueryCanceled("canceling statement due to user request")
    assert "interrupted by SIGTERM" in pgconn.reason(cancelled)
    pgconn.interrupt("SIGINT")                     # the first signal is the one named
    assert pgconn.interrupted() == "SIGTERM"


def test_the_runs_last_bookkeeping_may_still_connect_after_an_interrupt():
    pgconn.interrupt("SIGINT")
    with pytest.raises(psycopg.OperationalError) as e:
        pgconn.connect("host=127.0.0.1 port=1 connect_timeout=1", even_interrupted=True)
    assert not isinstance(e.value, pgconn.Interrupted)      # it tried: nothing listens on port 1
