"""A PostgreSQL server of the stack killed while stopped leaves no process behind after `stop`.

The case: PostgreSQL and its backends were SIGSTOPped, then the postmaster SIGKILLed; a stopped backend
cannot notice its postmaster's death, and 8 of them stayed on the machine. A real server in a folder of
its own, real client connections (backends), the same signals; `LocalPostgres.stop` (what `harness down`
calls) ends them, and a second server running beside it is not touched."""

import os
import shutil
import signal
import time

import psycopg
import pytest

from harness.core import procs
from harness.stack import ports
from harness.stack.local_postgres import LocalPostgres, find_bindir
from tests.conftest import searchable_dir

pytestmark = pytest.mark.integration


def in_folder(data) -> list[int]:
    out = []
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                if os.readlink(f"/proc/{d}/cwd") == str(data) and procs.alive(int(d)):
                    out.append(int(d))
            except OSError:
                pass
    return out


def test_stopped_backends_of_a_killed_postmaster_are_ended(stack):
    home = searchable_dir("harness-test-pgleft-")
    pg, bindir = LocalPostgres(home), find_bindir()
    port, _ = ports.choose(ports.any_free())
    conns = []
    try:
        pg.start(bindir, port, "user")
        pg.ensure_roles(port)
        conns = [psycopg.connect(pg.dsn(port), autocommit=True) for _ in range(3)]
        postmaster = pg.pid()
        backends = [p for p in in_folder(pg.data) if p != postmaster]
        assert len(backends) >= 3
        for p in [postmaster, *backends]:           # each backend leads a session of its own: one by one
            os.kill(p, signal.SIGSTOP)
        os.kill(postmaster, signal.SIGKILL)
        assert procs.wait_gone(postmaster, 10)
        time.sleep(0.5)
        assert all(procs.stopped(p) for p in backends if procs.alive(p)) and in_folder(pg.data)
        stopped, note = pg.stop()
        assert "leftover PostgreSQL process" in (note or ""), note
        assert not in_folder(pg.data), "backends of the dead server are still there"
        with psycopg.connect(stack["dsn"]) as other:          # the session's own server was not touched
            assert other.execute("select 1").fetchone() == (1,)
    finally:
        for c in conns:
            try:
                c.close()
            except Exception:  # noqa: BLE001 - its server is gone
                pass
        for p in in_folder(pg.data):
            os.kill(p, signal.SIGKILL)
        pg.stop()
        shutil.rmtree(home, ignore_errors=True)
