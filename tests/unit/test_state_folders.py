"""The state folders tests make (conftest.searchable_dir): one a test made itself is deleted when the test ends,
unless a stack is still recorded in it (then the session's watcher stops that stack and deletes it after
pytest). The two tests run in this order (pytest keeps a module's order): the second looks at what the first
left."""

import shutil

from tests.conftest import searchable_dir

made = {}


def test_a_test_makes_two_state_folders_one_with_a_stack_recorded():
    made["plain"] = searchable_dir("harness-test-folders-")
    made["recorded"] = searchable_dir("harness-test-folders-")
    (made["recorded"] / "stack.json").write_text("{}")
    (made["plain"] / "stack.lock").write_text("")       # what `harness down --purge` leaves
    assert made["plain"].is_dir() and made["recorded"].is_dir()


def test_the_folder_without_a_stack_is_gone_when_its_test_ended_and_the_other_is_kept():
    assert made, "runs after the test above"
    assert not made["plain"].exists()
    assert made["recorded"].is_dir()
    shutil.rmtree(made["recorded"])
