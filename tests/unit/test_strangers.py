"""Which unrecorded processes may block `harness up`: only ones that could be the service itself.

`up` refuses to start a service while a process of it that no pid record names still runs (it would
hold the data folder or the ports). Anyone can put our data path in a command line, so only a
process of our user (or the postgres user) running the service's program counts.
"""

import os
import pwd
import subprocess
import time

import pytest

from harness.stack.local_kafka import LocalKafka
from harness.stack.local_postgres import LocalPostgres

PROGRAM = {LocalPostgres: "postgres", LocalKafka: "java"}     # what each service's process runs


def _start(argv0: str, mark: str, user: str | None = None) -> subprocess.Popen:
    # perl, not `python3` on PATH: a version manager's shim execs the interpreter again and loses argv0, and the
    # tests' own interpreter may sit in a folder the other user cannot enter.
    cmd = ["bash", "-c", f'exec -a {argv0} perl -e "sleep 60" "$0"', mark]
    if user:
        cmd = ["runuser", "-u", user, "--", *cmd]
    p = subprocess.Popen(cmd)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:            # runuser forks: wait for the sleep with our mark
        pids = [int(d) for d in os.listdir("/proc") if d.isdigit() and _cmdline(d)[:1] + _cmdline(d)[-1:] == [argv0, mark]]
        if pids:
            p.decoy = pids[0]
            return p
        time.sleep(0.05)
    p.kill()
    raise AssertionError("the decoy did not start")


def _cmdline(pid: str) -> list[str]:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().decode(errors="replace").split("\0")[:-1]
    except OSError:
        return []


def _stop(p):
    p.kill()
    p.wait()
    try:
        os.kill(p.decoy, 9)
    except ProcessLookupError:
        pass


@pytest.mark.parametrize("service", [LocalPostgres, LocalKafka])
def test_another_users_process_naming_our_path_does_not_block_up(service, tmp_path):
    if os.geteuid() != 0:
        pytest.skip("starting a process as another user needs root")
    svc = service(tmp_path)
    mark = str(svc.data if service is LocalPostgres else svc.props)
    decoy = _start(PROGRAM[service], mark, user="nobody")
    try:
        assert decoy.decoy not in svc.strangers(mark)
    finally:
        _stop(decoy)


@pytest.mark.parametrize("service", [LocalPostgres, LocalKafka])
def test_our_own_process_of_another_program_does_not_block_up(service, tmp_path):
    svc = service(tmp_path)
    mark = str(svc.data if service is LocalPostgres else svc.props)
    decoy = _start("sleep", mark)
    try:
        assert decoy.decoy not in svc.strangers(mark)
    finally:
        _stop(decoy)


@pytest.mark.parametrize("service", [LocalPostgres, LocalKafka])
def test_an_unrecorded_process_that_could_be_the_service_still_blocks_up(service, tmp_path):
    svc = service(tmp_path)
    mark = str(svc.data if service is LocalPostgres else svc.props)
    user = "postgres" if service is LocalPostgres and os.geteuid() == 0 else None
    if user:
        pwd.getpwnam(user)
    decoy = _start(PROGRAM[service], mark, user=user)
    try:
        assert decoy.decoy in svc.strangers(mark)
    finally:
        _stop(decoy)
