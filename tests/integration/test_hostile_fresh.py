"""A second hostile review (fresh cases after issue 29), on the real filesystem: each test failed when written."""

import os

import pytest

from tests.conftest import harness

pytestmark = pytest.mark.integration


def test_purge_keeps_files_the_harness_did_not_make_in_a_folder_up_merely_marked(tmp_path):
    """HARNESS_HOME pointed at a project that has its own `postgres/` and `kafka/` folders: `harness up`
    writes its marker before anything else (here it then fails: no PostgreSQL binaries), and
    `harness down --purge` then deletes those folders with the user's files in them."""
    state = tmp_path / "project"
    (state / "postgres").mkdir(parents=True)
    (state / "kafka").mkdir()
    os.chmod(state, 0o755)
    (state / "postgres" / "notes.sql").write_text("important\n")
    (state / "kafka" / "topics.txt").write_text("mine\n")
    env = {"HARNESS_HOME": str(state), "HARNESS_PG_BIN": str(tmp_path / "no-such-bin")}
    up = harness("up", env=env, timeout=120)
    assert up.returncode != 0
    harness("down", "--purge", env=env, timeout=120)
    assert (state / "postgres" / "notes.sql").exists(), "down --purge deleted a file the harness never made"
    assert (state / "kafka" / "topics.txt").exists(), "down --purge deleted a file the harness never made"


def test_up_does_not_follow_a_state_folder_link_planted_by_another_user(tmp_path):
    """A CI job's HARNESS_HOME at a predictable name (/tmp/ci-home, say) that another user created first
    as a link to a root-owned folder: `harness up` follows it and writes its marker and lock (and, when it
    gets further, kafka/, postgres/ given to postgres, passwords) into the link's target; with the marker
    there, `down --purge` later deletes in that folder too."""
    import pwd
    try:
        nobody = pwd.getpwnam("nobody")
    except KeyError:
        pytest.skip("no user nobody")
    if os.geteuid() != 0:
        pytest.skip("only root can make a link of another user")
    theirs, victim = tmp_path / "theirs", tmp_path / "victim"
    theirs.mkdir()
    victim.mkdir()
    os.chmod(victim, 0o755)
    os.chown(theirs, nobody.pw_uid, nobody.pw_gid)
    link = theirs / "ci-home"
    link.symlink_to(victim)
    os.lchown(link, nobody.pw_uid, nobody.pw_gid)
    env = {"HARNESS_HOME": str(link), "HARNESS_PG_BIN": str(tmp_path / "no-such-bin")}
    harness("up", env=env, timeout=120)
    assert sorted(os.listdir(victim)) == [], f"harness up wrote {sorted(os.listdir(victim))} through another user's link"


def _run_whose_folder_moves(env, parent):
    """A run whose --out folder is renamed away (by the owner of its parent) once its workers write there."""
    import subprocess
    import sys
    import time
    from tests.conftest import ROOT
    out = parent / "run"
    # 20 planned crashes, each restarted 1 s later: the run is certainly still starting workers (and
    # opening their logs in the folder) after the move, whatever the machine's speed.
    proc = subprocess.Popen([sys.executable, "-m", "harness.cli", "run", "offset-before", "--messages", "200",
                             "--restart-delay", "1", "--out", str(out)], cwd=ROOT, env={**os.environ, **env},
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    while not (out / "workers").is_dir() and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.1)
    os.rename(out, parent / "run.moved")
    stdout, stderr = proc.communicate(timeout=300)
    return proc.returncode, stdout + stderr


def test_a_run_whose_folder_is_moved_away_ends_in_one_line_not_a_traceback(stack, tmp_path):
    """`--out` under a folder someone else may rename in: the run died with a FileNotFoundError traceback
    (exit 1) from opening workers/w0.log in the folder's old place."""
    parent = tmp_path / "theirs"
    parent.mkdir()
    rc, out = _run_whose_folder_moves(stack["env"], parent)
    assert "Traceback" not in out, out[-2000:]
    assert rc in (2, 3), out[-2000:]
