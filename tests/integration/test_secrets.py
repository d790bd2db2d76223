"""Secrets given on the command line of a real run: never in any process's argv while it runs, nor in
its report (report.json, .md, .html), logs or output."""

import os
import subprocess
import sys
import threading
import time

import pytest

from tests.conftest import ROOT, pids_where

pytestmark = pytest.mark.integration

KAFKA_SECRET = "oauth-Client-S3cret-9f2e"


def test_a_run_given_a_password_dsn_and_a_secret_setting_shows_neither(stack, tmp_path):
    """Before: the harness's argv showed the DSN password in `ps` for the whole run, and
    `command_line` in the report held sasl.oauthbearer.client.secret as typed."""
    password = stack["dsn"].split("://", 1)[1].split("@", 1)[0].split(":", 1)[1]
    assert len(password) > 8
    out = tmp_path / "run"
    env = {**os.environ, **stack["env"], "HARNESS_POSTGRES_DSN": "", "HARNESS_BOOTSTRAP_SERVERS": ""}
    proc = subprocess.Popen([sys.executable, "-m", "harness.cli", "run", "offset-after", "--messages", "60",
                             "--out", str(out), "--bootstrap-servers", stack["bootstrap_servers"],
                             "--postgres-dsn", stack["dsn"],
                             "--kafka-config", f"sasl.oauthbearer.client.secret={KAFKA_SECRET}"],
                            cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    started, seen, lines = threading.Event(), [], []

    def read_stderr():
        for line in proc.stderr:
            lines.append(line)
            started.set()
        started.set()
    reader = threading.Thread(target=read_stderr, daemon=True)
    reader.start()
    # From the harness's first line of output (its interpreter has started) to its end, every process's
    # command line is sampled: the harness's own and its workers'.
    assert started.wait(120)
    while proc.poll() is None:
        seen.extend(pids_where(lambda cmd: password in cmd or KAFKA_SECRET in cmd))
        time.sleep(0.1)
    stdout = proc.stdout.read()
    reader.join(10)
    err = "".join(lines)
    assert proc.returncode == 0, stdout + err
    assert not seen, f"a secret was on the command line of pid(s) {sorted(set(seen))}"
    assert password not in stdout + err and KAFKA_SECRET not in stdout + err
    import json
    report = json.loads((out / "report.json").read_text())
    assert "sasl.oauthbearer.client.secret=***" in report["environment"]["command_line"]
    for f in out.rglob("*"):
        if f.is_file():
            text = f.read_text(errors="replace")
            assert password not in text and KAFKA_SECRET not in text, f"a secret is in {f}"
