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
