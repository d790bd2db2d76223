"""Another local user can read nothing of the stack's state folder: after `harness up` every folder the
harness (or Kafka, PostgreSQL, their tools) made there is its owner's only (0700), every file 0600.
As root the state folder may be searchable (0711) so that the `postgres` user reaches its own folder."""

import stat

import pytest

pytestmark = pytest.mark.integration


def test_nothing_under_the_state_folder_is_open_to_others(stack, stack_home):
    open_to_others = []
    for path in sorted(stack_home.rglob("*")):
        mode = path.lstat().st_mode
        if stat.S_ISLNK(mode):
            continue
        if mode & 0o077:
            open_to_others.append(f"{stat.filemode(mode)} {path.relative_to(stack_home)}")
    assert not open_to_others, "\n".join(open_to_others[:40])
    assert (stack_home / "kafka" / "data").is_dir() and (stack_home / "postgres" / "data").is_dir()


def test_another_local_user_can_read_none_of_kafkas_or_postgresqls_files(stack, stack_home, local_user):
    """Issue 53 case 7, re-made with a user made for the test: listing Kafka's data folder and reading the
    state folder's files (a log segment, the stack's passwords) are refused to it."""
    from tests.conftest import as_user
    files = [p for p in stack_home.rglob("*") if p.is_file() and not p.is_symlink()]
    segments = [p for p in files if p.suffix == ".log" and "data" in p.parts]
    assert segments, "no Kafka log segment to try"
    for argv in (["ls", str(stack_home / "kafka" / "data")], ["cat", str(segments[0])],
                 *(["cat", str(p)] for p in files if "pass" in p.name.lower())):
        got = as_user(local_user, *argv)
        assert got.returncode != 0 and "Permission denied" in got.stderr, (argv, got.stdout[:200])
