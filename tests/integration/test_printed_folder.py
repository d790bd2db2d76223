"""`harness run` with an --out whose name holds a newline and escape sequences: the run works, and the last
line on stdout is the folder with those characters shown as escapes (no raw control byte on stdout), so a
script reading the last line, or a person at a terminal, can tell which folder it is."""

import json

import pytest

from harness.core.escape import term
from tests.conftest import harness

pytestmark = pytest.mark.integration


def test_the_last_line_of_a_run_is_its_folder_escaped(stack, tmp_path):
    out = tmp_path / "run\nINJECTED\x1b[2K\x1b]0;title\x07"
    proc = harness("run", "offset-after", "--messages", "20", "--out", str(out),
                   env={**stack["env"], "HARNESS_HOME": str(tmp_path / "state")}, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert json.loads((out / "report.json").read_text())["verdict"] == "as-predicted"
    assert proc.stdout.splitlines()[-1] == term(str(out))
    assert not any(c in proc.stdout for c in "\x1b\x07")
    assert not any(line.startswith("INJECTED") for line in (proc.stdout + proc.stderr).splitlines())
    assert "\x1b" not in proc.stderr and "\x07" not in proc.stderr
