"""Who may stop the local stack: leases, the user's hold, the lock, and the release decision."""

import os
import subprocess
import sys
import time

import pytest

from harness.core import procs
from harness.core.errors import HarnessError
from harness.stack import leases
from harness.stack.claim import release_plan


# -- the decision, on hand-made data ---------------------------------------------

def test_last_command_out_stops_what_it_started():
    stop, line = release_plan(["kafka", "postgres"], keep=False, held=False, others=[],
                              owners={"kafka": "command", "postgres": "command"})
    assert stop == ["kafka", "postgres"] and "this command started" in line


def test_run_after_up_never_stops_the_users_postgres():
    """`harness up`, broker killed, run restarts Kafka: nothing is stopped, the user holds the stack."""
    stop, line = release_plan(["kafka"], keep=False, held=True, others=[],
                              owners={"kafka": "command", "postgres": "user"})
    assert stop == [] and "`harness up` holds the stack" in line


def test_user_owned_services_are_never_stopped_by_a_command():
    stop, _ = release_plan(["kafka"], keep=False, held=False, others=[],
                           owners={"kafka": "command", "postgres": "user"})
    assert stop == ["kafka"]


def test_first_of_two_commands_leaves_the_stack_to_the_second():
    stop, line = release_plan(["kafka", "postgres"], keep=False, held=False, others=[4242],
                              owners={"kafka": "command", "postgres": "command"})
    assert stop == [] and line == "leaving the stack running because another run uses it (pid 4242)"


def test_last_of_two_commands_stops_what_the_first_started():
    stop, line = release_plan([], keep=False, held=False, others=[],
                              owners={"kafka": "command", "postgres": "command"})
    assert stop == ["kafka", "postgres"] and "harness commands started" in line


def test_a_command_that_started_nothing_and_shares_says_nothing():
    assert release_plan([], keep=False, held=False, others=[7], owners={"kafka": "command"}) == ([], None)
    assert release_plan([], keep=False, held=True, others=[], owners={"kafka": "user"}) == ([], None)


def test_keep_stack_stops_nothing():
    stop, line = release_plan(["kafka", "postgres"], keep=True, held=False, others=[],
                              owners={"kafka": "user", "postgres": "user"})
    assert stop == [] and "--keep-stack" in line


def test_services_that_do_not_run_are_not_stopped():
    assert release_plan(["kafka"], keep=False, held=False, others=[], owners={"kafka": None, "postgres": None}) == ([], None)


# -- leases ----------------------------------------------------------------------

def test_own_lease_is_live_and_given_back(tmp_path):
    lease = leases.take(tmp_path, "run test")
    assert lease.path.name == f"{os.getpid()}-{procs.start_time(os.getpid())}.json"
    assert [l.pid for l in leases.live(tmp_path)] == [os.getpid()]
    leases.give_back(lease)
    assert leases.live(tmp_path) == []


def test_leases_of_dead_and_recycled_pids_are_stale_and_removed(tmp_path):
    d = tmp_path / "leases"
    d.mkdir()
    dead = subprocess.Popen(["true"])
    dead.wait()
    (d / f"{dead.pid}-1.json").write_text(f'{{"pid": {dead.pid}, "start_time": 1}}')
    me, start = os.getpid(), procs.start_time(os.getpid())
    (d / f"{me}-{start - 1}.json").write_text(f'{{"pid": {me}, "start_time": {start - 1}}}')   # pid reused
    (d / "garbage.json").write_text("{")
    assert leases.live(tmp_path, drop_stale=False) == [] and len(list(d.iterdir())) == 3
    assert leases.live(tmp_path) == [] and list(d.iterdir()) == []


def test_hold(tmp_path):
    assert not leases.held(tmp_path)
    leases.hold(tmp_path)
    assert leases.held(tmp_path)
    leases.unhold(tmp_path)
    assert not leases.held(tmp_path)


# -- the lock --------------------------------------------------------------------

def test_lock_is_exclusive_between_processes(tmp_path, monkeypatch):
    code = ("import sys, time; from pathlib import Path; from harness.stack import leases\n"
            "with leases.locked(Path(sys.argv[1])):\n    print('locked', flush=True); time.sleep(30)")
    holder = subprocess.Popen([sys.executable, "-c", code, str(tmp_path)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "locked"
        monkeypatch.setattr(leases, "LOCK_TIMEOUT_S", 0.5)
        said = []
        t0 = time.monotonic()
        with pytest.raises(HarnessError, match="another harness command has held"):
            with leases.locked(tmp_path, log=said.append):
                pass
        # gave up after the timeout given (0.5 s), not the default 600 s; the bound leaves room for a loaded machine
        assert time.monotonic() - t0 < 60 and said and "waiting" in said[0]
    finally:
        holder.kill()
        holder.wait(10)
    with leases.locked(tmp_path):          # free again once the holder is gone
        pass


# -- unusable state folders ------------------------------------------------------

def test_state_folder_under_a_file_is_one_clear_error(tmp_path):
    (tmp_path / "file").write_text("x")
    for fn in (leases.prepare, leases.check_readable):
        with pytest.raises(HarnessError, match="is not a folder"):
            fn(tmp_path / "file" / "state")


def test_state_folder_under_proc_is_one_clear_error():
    with pytest.raises(HarnessError, match="cannot use state folder /proc/harness-nope"):
        leases.prepare(leases.Path("/proc/harness-nope"))


def test_state_folder_behind_a_folder_we_may_not_enter(tmp_path, monkeypatch):
    """Path.exists() would raise PermissionError here (a traceback); we say it in one line."""
    real_stat = leases.Path.stat
    locked_dir = tmp_path / "private"

    def stat(self, *a, **kw):
        if self == locked_dir / "state" or locked_dir in self.parents:
            raise PermissionError(13, "Permission denied")
        return real_stat(self, *a, **kw)
    monkeypatch.setattr(leases.Path, "stat", stat)
    with pytest.raises(HarnessError, match="cannot use state folder .*Permission denied"):
        leases.check_readable(locked_dir / "state")
