"""An output folder inside the state folder (or holding it) is refused in one line, before anything starts.

Inside it, the report is a foreign file in Kafka's data (the next `up` fails) and `down --purge` deletes
it; holding it, the report folder would carry the stack's data and passwords. Every command with an
output folder checks, links followed.
"""

import os

import pytest

from tests.conftest import harness
from tests.unit.test_cli_errors import NO_STACK, one_clear_line

COMMANDS = {
    "run": ["run", "dedupe", *NO_STACK],
    "suite": ["suite", "--experiments", "dedupe", *NO_STACK],
    "bench": ["bench", *NO_STACK],
    "bench scale": ["bench", "scale", *NO_STACK],
    "bench streams": ["bench", "streams", *NO_STACK],
    "matrix": ["matrix", "--kafka-version", "4.0.0", "--experiments", "dedupe"],
}


def _tree(folder):
    return sorted(os.path.join(d, n) for d, dirs, files in os.walk(folder) for n in dirs + files)


@pytest.fixture
def state(tmp_path):
    home = tmp_path / "state"
    (home / "kafka" / "data").mkdir(parents=True)
    return home


def _env(tmp_path, home, **more):
    return {"HARNESS_HOME": str(home), "HARNESS_CACHE": str(tmp_path / "cache"), "HARNESS_BOOTSTRAP_SERVERS": "",
            "HARNESS_POSTGRES_DSN": "", "HARNESS_REPORTS": str(tmp_path / "reports"), **more}


def _refused(proc, home, before, *needles):
    assert proc.returncode == 2, (proc.returncode, proc.stdout, proc.stderr)
    line = one_clear_line(proc, "refusing", *needles)
    assert "unreachable" not in proc.stderr, "checked after a network wait"
    assert _tree(home) == before, "a refused command created something in the state folder"
    return line


@pytest.mark.parametrize("command", COMMANDS)
def test_an_out_inside_kafkas_data_is_refused(tmp_path, state, command):
    before = _tree(state)
    out = state / "kafka" / "data" / "x"
    proc = harness(*COMMANDS[command], "--out", str(out), env=_env(tmp_path, state))
    _refused(proc, state, before, "--out", str(out), "inside the state folder")
    assert not out.exists()


def test_an_out_reaching_the_state_folder_through_a_link_is_refused(tmp_path, state):
    (tmp_path / "link").symlink_to(state / "kafka")
    before = _tree(state)
    proc = harness(*COMMANDS["run"], "--out", str(tmp_path / "link" / "r1"), env=_env(tmp_path, state))
    _refused(proc, state, before, "inside the state folder", str(state))


def test_the_state_folder_itself_is_refused(tmp_path, state):
    before = _tree(state)
    proc = harness(*COMMANDS["run"], "--out", str(state), env=_env(tmp_path, state))
    _refused(proc, state, before, "is the state folder")


@pytest.mark.parametrize("command", ["run", "suite"])
def test_an_out_holding_the_state_folder_is_refused(tmp_path, command):
    out = tmp_path / "out"
    home = out / ".harness"              # not made yet: `up` would make it inside the report folder
    proc = harness(*COMMANDS[command], "--out", str(out), env=_env(tmp_path, home))
    assert proc.returncode == 2
    one_clear_line(proc, "refusing --out", "holds the state folder")
    assert not out.exists()


def test_a_default_reports_folder_inside_the_state_folder_is_refused(tmp_path, state):
    before = _tree(state)
    proc = harness(*COMMANDS["run"], env=_env(tmp_path, state, HARNESS_REPORTS=str(state / "reports")))
    _refused(proc, state, before, "the reports folder", "inside the state folder")


def test_a_control_character_in_the_refused_out_is_escaped(tmp_path, state):
    out = state / "kafka" / "data" / "a\nb\x1b[31m"
    proc = harness(*COMMANDS["run"], "--out", str(out), env=_env(tmp_path, state))
    assert proc.returncode == 2
    line = one_clear_line(proc, "a\\nb\\x1b[31m")
    assert "\x1b" not in proc.stderr and len(proc.stderr.strip().splitlines()) == 1, line


# -- the printed folder ----------------------------------------------------------------------------

HOSTILE_NAME = "run\nINJECTED\x1b[2K\x1b]0;title\x07"


def test_the_printed_folder_shows_control_characters_as_escapes(capsys):
    from pathlib import Path
    from harness.cli.commands.stack_options import print_folder
    print_folder(Path("/r") / HOSTILE_NAME)
    out = capsys.readouterr().out
    assert out == "/r/run\\nINJECTED\\x1b[2K\\x1b]0;title\\x07\n"


def test_harness_report_prints_a_hostile_folder_name_escaped_on_its_last_line(tmp_path):
    """The cheap way to the printing path of a command that writes a folder: `report` re-renders one."""
    from harness.core.escape import term
    from tests.unit.test_hostile_files import run_folder
    folder = run_folder(tmp_path / HOSTILE_NAME)
    proc = harness("report", str(folder), env={"HARNESS_HOME": str(tmp_path / "state")}, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.splitlines()[-1] == term(str(folder)) == f"{tmp_path}/run\\nINJECTED\\x1b[2K\\x1b]0;title\\x07"
    assert not any(c in proc.stdout for c in "\x1b\x07") and proc.stdout.count("\n") == 1


def test_an_error_quoting_a_path_with_a_newline_stays_one_line(tmp_path, state):
    """Any refusal, not only the state folder's: here an --out under a regular file."""
    (tmp_path / "f").write_text("x")
    proc = harness(*COMMANDS["run"], "--out", str(tmp_path / "f" / "a\nb\x1b[2J"), env=_env(tmp_path, state))
    assert proc.returncode == 2
    assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    one_clear_line(proc, "a\\nb\\x1b[2J")
