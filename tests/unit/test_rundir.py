"""A run folder is claimed by exactly one run; a used or unusable folder is one clear error."""

import json
import os
import threading

import pytest

from harness.core.errors import HarnessError
from harness.core.rundir import OWNER_FILE, check_creatable, check_run_dir, claim_run_dir


def one_line(excinfo) -> str:
    msg = str(excinfo.value)
    assert "\n" not in msg
    return msg


def test_claim_creates_the_folder_and_an_owner_file(tmp_path):
    d = claim_run_dir(tmp_path / "a" / "b")
    assert d.is_dir()
    assert json.loads((d / OWNER_FILE).read_text())["pid"] == os.getpid()


def test_an_existing_empty_folder_may_be_used(tmp_path):
    (tmp_path / "empty").mkdir()
    assert claim_run_dir(tmp_path / "empty") == tmp_path / "empty"


def test_a_claimed_folder_is_refused(tmp_path):
    claim_run_dir(tmp_path / "run")
    with pytest.raises(HarnessError) as e:
        claim_run_dir(tmp_path / "run")
    assert OWNER_FILE in one_line(e)


@pytest.mark.parametrize("leftover", ["crash-log.jsonl", "crash-plan.json", "events.jsonl", "report.json", "workers"])
def test_a_folder_with_any_run_file_is_refused_and_left_as_it_was(tmp_path, leftover):
    """A killed run leaves a crash log and no report: reusing its folder used to append to that log."""
    d = tmp_path / "killed"
    d.mkdir()
    if leftover == "workers":
        (d / "workers").mkdir()
    else:
        (d / leftover).write_text('{"old": true}\n')
    with pytest.raises(HarnessError) as e:
        claim_run_dir(d)
    assert leftover in one_line(e) and "choose another --out" in one_line(e)
    assert sorted(os.listdir(d)) == [leftover]
    with pytest.raises(HarnessError):
        check_run_dir(d)


def test_a_folder_with_other_files_is_refused(tmp_path):
    (tmp_path / "notes.txt").write_text("mine")
    with pytest.raises(HarnessError) as e:
        claim_run_dir(tmp_path)
    assert "notes.txt" in one_line(e)


def test_only_one_of_many_simultaneous_claims_wins(tmp_path):
    target, won, lost = tmp_path / "contested", [], []
    barrier = threading.Barrier(16)

    def claim():
        barrier.wait()
        try:
            won.append(claim_run_dir(target))
        except HarnessError as e:
            lost.append(str(e))
    threads = [threading.Thread(target=claim) for _ in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(won) == 1 and len(lost) == 15


@pytest.mark.parametrize("where", ["under-a-file", "proc", "file-itself"])
def test_unusable_places_are_one_line_errors(tmp_path, where):
    """Root ignores permissions, so /proc and paths under a regular file stand in for read-only folders."""
    (tmp_path / "f").write_text("x")
    path = {"under-a-file": tmp_path / "f" / "run", "proc": "/proc/harness-run-test",
            "file-itself": tmp_path / "f"}[where]
    for fn in (claim_run_dir, check_run_dir, check_creatable):
        with pytest.raises(HarnessError) as e:
            fn(path)
        assert str(path) in one_line(e)
    assert not os.path.exists("/proc/harness-run-test")


def test_checks_leave_nothing_behind(tmp_path):
    check_run_dir(tmp_path / "new" / "run")
    check_run_dir(tmp_path)
    check_creatable(tmp_path / "suite")
    assert os.listdir(tmp_path) == []


def test_the_runner_refuses_a_used_folder_before_touching_it(tmp_path):
    """Nothing in the folder of a killed run changes: not its crash plan, not its crash log."""
    from harness.run import runner
    from harness.run.params import RunParams
    from harness.stack.stack import Stack
    d = tmp_path / "killed"
    d.mkdir()
    (d / "crash-plan.json").write_text('{"old": true}\n')
    (d / "crash-log.jsonl").write_text('{"crash": 1}\n')
    before = {p.name: p.read_text() for p in d.iterdir()}
    stack = Stack("external", "127.0.0.1:1", "postgresql://u:p@127.0.0.1:1/db", owned=False)
    with pytest.raises(HarnessError) as e:
        runner.run(RunParams("dedupe", messages=10), stack, out=d, log=lambda _m: None)
    # refused before the (unreachable) stack was touched: that would have been another error
    assert "crash-log.jsonl" in one_line(e)
    assert {p.name: p.read_text() for p in d.iterdir()} == before
