"""tests/stack_watcher.py on hand-made folders: it acts only once the watched process has ended, deletes a
registered state folder only when `harness down` worked (or `up` never made a stack there) and nothing of the
folder runs, otherwise keeps the folder and says why in a log beside it, and deletes the registry once every
folder is gone. (A real stack under a SIGKILLed stand-in session: test_up_signals.py.)"""

import shutil
import subprocess
import tempfile
import types
from pathlib import Path

import pytest

from tests import stack_watcher


@pytest.fixture
def home(monkeypatch):
    h = Path(tempfile.mkdtemp(prefix="harness-test-watched-"))         # where the session's folders are
    (h / ".harness-state").write_text("")
    registry = Path(tempfile.mkdtemp(prefix="harness-test-registry-")) / "state-folders"
    registry.write_text(f"{h}\n")
    monkeypatch.setenv(stack_watcher.REGISTRY_ENV, str(registry))
    yield h
    shutil.rmtree(h, ignore_errors=True)
    shutil.rmtree(registry.parent, ignore_errors=True)
    h.with_name(h.name + ".stack-watcher.log").unlink(missing_ok=True)


def gone_process() -> list[str]:
    p = subprocess.Popen(["true"])
    p.wait()
    return [str(p.pid), "1"]


def down_exits(monkeypatch, outcome):
    calls = []

    def run(cmd, **kw):
        calls.append(cmd)
        if outcome == "timeout":
            raise subprocess.TimeoutExpired(cmd, kw.get("timeout"))
        return types.SimpleNamespace(returncode=outcome)
    monkeypatch.setattr(stack_watcher.subprocess, "run", run)
    return calls


def test_a_stack_that_went_down_leaves_neither_folder_nor_log(home, monkeypatch):
    calls = down_exits(monkeypatch, 0)
    assert stack_watcher.main(gone_process()) == 0
    assert calls and calls[0][-2:] == ["down", "--purge"]
    assert not home.exists() and not home.with_name(home.name + ".stack-watcher.log").exists()
    assert not Path(stack_watcher.os.environ[stack_watcher.REGISTRY_ENV]).exists()


@pytest.mark.parametrize("outcome", [1, "timeout"])
def test_a_down_that_failed_keeps_the_folder_and_says_why(home, monkeypatch, outcome):
    down_exits(monkeypatch, outcome)
    stack_watcher.main(gone_process())
    log = home.with_name(home.name + ".stack-watcher.log")
    assert home.is_dir() and (home / ".harness-state").exists()
    assert Path(stack_watcher.os.environ[stack_watcher.REGISTRY_ENV]).exists()       # a folder kept: so is the list
    assert f"harness down exited {1 if outcome == 1 else None}" in log.read_text()


def test_services_still_running_keep_the_folder(home, monkeypatch):
    down_exits(monkeypatch, 0)
    monkeypatch.setattr("tests.conftest.processes_of", lambda h: [4242])
    stack_watcher.main(gone_process())
    assert home.is_dir() and "processes left: [4242]" in home.with_name(home.name + ".stack-watcher.log").read_text()


def test_a_planted_log_is_neither_followed_nor_kept_from_the_cleanup(home, monkeypatch, tmp_path):
    target = tmp_path / "victim"
    target.write_text("mine\n")
    home.with_name(home.name + ".stack-watcher.log").symlink_to(target)
    down_exits(monkeypatch, 1)
    stack_watcher.main(gone_process())
    assert target.read_text() == "mine\n" and home.is_dir()


def test_nothing_happens_while_the_watched_process_runs(home, monkeypatch):
    calls = down_exits(monkeypatch, 0)
    job = subprocess.Popen(["sleep", "30"])
    try:
        assert not stack_watcher.ended(job.pid, stack_watcher.procs.start_time(job.pid))
    finally:
        job.kill()
        job.wait()
    assert stack_watcher.ended(job.pid, 1) and not calls
    with pytest.raises(RuntimeError, match="no process"):
        stack_watcher.watch(home, job.pid)


def test_a_folder_never_up_is_deleted_without_down_and_foreign_entries_are_left_alone(home, monkeypatch, tmp_path):
    calls = down_exits(monkeypatch, 1)
    (home / ".harness-state").unlink()                              # `harness up` never ran here
    foreign = tmp_path / "not-in-tmp"
    foreign.mkdir()
    link = Path(tempfile.gettempdir()) / f"{home.name}-link"
    link.symlink_to(foreign)
    registry = Path(stack_watcher.os.environ[stack_watcher.REGISTRY_ENV])
    registry.write_text(f"{home}\n{foreign}\n{link}\n/\n")
    try:
        stack_watcher.main(gone_process())
        assert not calls and not home.exists()                      # nothing to stop, so no `down`
        assert foreign.is_dir() and link.is_symlink()               # not a folder the session made in the temp folder
    finally:
        link.unlink()
