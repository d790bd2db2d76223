"""A consumer's descendants that leave its process group (`setsid`) do not outlive the run.

A real custom run on the session's stack, whose consumer starts `setsid sleep ...` (its own session,
out of reach of the worker's process-group kill) and then consumes correctly; after the run no such
process is left, and the report lists each one the end of the run ended.
"""

import json
import sys
import uuid

import pytest

from tests.conftest import ROOT, harness, pids_where
from tests.unit.sample_report import validate
from harness.reporting.summary import whole

pytestmark = pytest.mark.integration

CORRECT = ROOT / "examples" / "consumers" / "python" / "correct.py"


def test_a_child_that_called_setsid_is_ended_and_counted(stack, tmp_path):
    mark = f"600.{uuid.uuid4().int % 10**9:09d}"          # a sleep nobody else runs
    cmd = f"sh -c 'setsid sleep {mark} & exec {sys.executable} {CORRECT}'"
    out = tmp_path / "report"
    try:
        proc = harness("run", "custom", "--worker-cmd", cmd, "--kills", "1", "--messages", "300", "--quiet",
                       "--out", str(out), env=stack["env"], timeout=600)
        assert proc.returncode == 0, proc.stderr[-3000:]
        left = pids_where(lambda c: f"sleep {mark}" in c)
        assert not left, f"setsid children outlived the run: {left}"
        d = json.loads((out / "report.json").read_text())
        validate(d)
        ended = d["verdict_detail"]["left_behind"]
        attempts = len({(s["worker"], s["attempt"]) for s in d["consumer"]["starts"]})
        assert len([x for x in ended if x["command"] == f"sleep {mark}"]) == attempts >= 2, ended
        assert f"{len(ended)} process(es) the consumer left behind were ended" in whole(d)
        assert "left behind by the consumer" in (out / "report.html").read_text()
    finally:
        import os
        import signal
        for pid in pids_where(lambda c: f"sleep {mark}" in c):
            os.kill(pid, signal.SIGKILL)


def test_a_child_that_double_forks_calls_setsid_and_clears_its_environment_is_ended_and_counted(stack, tmp_path):
    """No token in its environment (`env -i`), its own session, its parent gone: reparented to the run's
    process (the subreaper), it is found among that process's children and ended."""
    mark = f"600.{uuid.uuid4().int % 10**9:09d}"
    cmd = f"sh -c '(setsid env -i sleep {mark} &); exec {sys.executable} {CORRECT}'"
    out = tmp_path / "report"
    try:
        proc = harness("run", "custom", "--worker-cmd", cmd, "--messages", "200", "--quiet",
                       "--out", str(out), env=stack["env"], timeout=600)
        assert proc.returncode == 0, proc.stderr[-3000:]
        left = pids_where(lambda c: f"sleep {mark}" in c)
        assert not left, f"children that cleared their environment outlived the run: {left}"
        d = json.loads((out / "report.json").read_text())
        ended = [x for x in d["verdict_detail"]["left_behind"] if x["command"] == f"sleep {mark}"]
        attempts = len({(s["worker"], s["attempt"]) for s in d["consumer"]["starts"]})
        assert len(ended) == attempts >= 1, d["verdict_detail"]["left_behind"]
        assert f"{len(d['verdict_detail']['left_behind'])} process(es) the consumer left behind were ended" \
            in whole(d)
    finally:
        import os
        import signal
        for pid in pids_where(lambda c: f"sleep {mark}" in c):
            os.kill(pid, signal.SIGKILL)
