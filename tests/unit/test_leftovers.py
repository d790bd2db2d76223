"""The end of a run finds the processes its workers left behind (workers/leftovers.py): the selection on
hand-made /proc facts, and a real orphan that left its session, found by its token and ended."""

import os
import subprocess
import sys
import time

from harness import procs
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
