"""The end of a run finds the processes its workers left behind (workers/leftovers.py): the selection on
hand-made /proc facts, and a real orphan that left its session, found by its token and ended."""

import os
import subprocess
import sys
import time

from harness.core import procs
from harness.workers import leftovers
from harness.workers.leftovers import Seen, chosen, marked


def test_only_the_exact_token_marks_a_process():
    env = b"PATH=/bin\0HARNESS_RUN_PROCESSES=abc\0HOME=/root\0"
    assert marked(env, "abc")
    assert not marked(env, "ab") and not marked(env, "abcd")
    assert not marked(b"X=HARNESS_RUN_PROCESSES=abc\0", "abc"), "a value that merely contains it is not the token"


def test_marked_processes_are_chosen_except_this_one_and_those_kept():
    seen = [Seen(10, 1, True), Seen(11, 99, True), Seen(12, 99, False), Seen(99, 1, True), Seen(13, 1, True)]
    assert chosen(seen, me=99, keep={13}) == [10, 11]


def test_an_orphan_without_any_token_is_chosen_with_its_descendants_but_not_our_own_children():
    me = 99
    before = {(20, 5)}                               # a child we had when the workers started (a broker)
    seen = [Seen(20, me, False, False, 5),           # that child: kept
            Seen(21, me, False, True, 50),           # a child we started since (a restarted broker): own token
            Seen(22, me, False, False, 60),          # an orphan that cleared its environment: ended
            Seen(23, 22, False, False, 61),          # its child, and grandchild: ended with it
            Seen(24, 23, False, False, 62),
            Seen(25, 1, False, False, 63),           # nobody's orphan of ours: another process of the machine
            Seen(26, me, False, False, 64),          # a live worker, kept by the supervisor
            Seen(20, me, False, False, 5)]
    assert chosen(seen, me, keep={26}, before=before) == [22, 23, 24]
    assert chosen(seen, me, keep={26}) == [], "without the snapshot only tokens count"
    recycled = [Seen(20, me, False, False, 70)]      # pid 20 again, another process (another start time)
    assert chosen(recycled, me, keep=set(), before=before) == [20]


def test_an_orphan_that_cleared_its_environment_is_ended_and_named():
    """A double fork, setsid, then `env -i`: no token, only its parent (us, the subreaper) gives it away."""
    token = leftovers.new_token()
    leftovers.own_token()
    assert leftovers.subreaper(True)
    before = leftovers.children()
    mark = f"600.{os.getpid()}7"
    try:
        env = {k: v for k, v in os.environ.items() if k != leftovers.OWN_ENV}
        env[leftovers.TOKEN_ENV] = token
        code = ("import os, subprocess\n"
                "if os.fork() == 0:\n"
                "    os.setsid()\n"
                f"    subprocess.Popen(['env', '-i', 'sleep', '{mark}'])\n"
                "    os._exit(0)\n"
                "os.wait()\n")
        subprocess.run([sys.executable, "-c", code], env=env, check=True, timeout=30)
        found = []
        for _ in range(100):
            found = [s for s in leftovers.scan(token) if s.ppid == os.getpid() and "sleep" in leftovers.command(s.pid)]
            if found and leftovers.command(found[0].pid) == f"sleep {mark}":
                break
            time.sleep(0.05)
        assert len(found) == 1 and not found[0].marked, "no token left in its environment"
        pid = found[0].pid
        assert leftovers.end(token) == [], "the token alone does not find it"
        assert leftovers.end(token, before=before) == [{"pid": pid, "command": f"sleep {mark}"}]
        assert not os.path.exists(f"/proc/{pid}"), "ended and reaped"
    finally:
        leftovers.subreaper(False)
        for s in leftovers.scan(token):
            if s.ppid == os.getpid() and leftovers.command(s.pid) == f"sleep {mark}":
                os.kill(s.pid, 9)


def test_an_orphan_that_called_setsid_is_ended_reaped_and_named(tmp_path):
    token = leftovers.new_token()
    assert leftovers.subreaper(True)
    try:
        # A middle process starts `setsid sleep` and exits: the sleep is orphaned, in a session of its own.
        env = {**os.environ, leftovers.TOKEN_ENV: token}
        code = "import subprocess; subprocess.Popen(['setsid', 'sleep', '600.123'])"
        subprocess.run([sys.executable, "-c", code], env=env, check=True, timeout=30)
        found = []
        for _ in range(100):
            found = [s.pid for s in leftovers.scan(token) if s.marked]
            if found:
                break
            time.sleep(0.05)
        assert len(found) == 1
        pid = found[0]
        assert os.getsid(pid) != os.getsid(0), "it left our session"
        ended = leftovers.end(token)
        assert ended == [{"pid": pid, "command": "sleep 600.123"}]
        assert not procs.alive(pid)
        assert not os.path.exists(f"/proc/{pid}"), "reaped, not left a zombie"
        assert leftovers.end(token) == []
    finally:
        leftovers.subreaper(False)
        for s in leftovers.scan(token):
            if s.marked:
                os.kill(s.pid, 9)


def test_only_processes_of_a_dead_server_of_our_folder_are_chosen():
    from harness.stack.local_postgres import Seen as PgSeen, orphaned_backends
    data, pg = "/s/postgres/data", "/usr/lib/postgresql/16/bin/postgres"
    backend = PgSeen(11, data, pg, 108, ["postgres: harness harness 127.0.0.1(4242) idle"])
    checkpointer = PgSeen(12, data, pg, 108, ["postgres: checkpointer"])
    other_folder = PgSeen(13, "/other/data", pg, 108, ["postgres: harness harness idle"])
    other_user = PgSeen(14, data, pg, 1000, ["postgres: x"])
    not_postgres = PgSeen(15, data, "/usr/bin/python3", 108, ["python3"])
    assert orphaned_backends([backend, checkpointer, other_folder, other_user, not_postgres], data, {108}) == [11, 12]
    postmaster = PgSeen(10, data, pg, 108, [pg, "-D", data, "-p", "5432"])
    assert orphaned_backends([postmaster, backend, checkpointer], data, {108}) == [], "its server still runs"
    assert orphaned_backends([PgSeen(10, data, pg, 108, [pg, "-D", "/link/data"]), backend], data, {108},
                             frozenset({"/link/data"})) == []
