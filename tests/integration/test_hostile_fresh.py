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
