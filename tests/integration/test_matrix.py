"""harness matrix for real: two Kafka releases, each in a local stack of its own that its suite starts and
the matrix purges; the broker's own answers per column (KIP-890's transaction.version 2 on 4.x, none on
3.9); a Ctrl-C mid-matrix that still writes matrix.json, exits 130 and leaves no process or folder."""

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from tests.conftest import ROOT, harness, processes_of, searchable_dir

pytestmark = pytest.mark.integration


def env_of(home) -> dict:
    return {"HARNESS_HOME": str(home), "HARNESS_BOOTSTRAP_SERVERS": "", "HARNESS_POSTGRES_DSN": "", "HARNESS_STACK": ""}


@pytest.mark.slow          # two releases, each a stack and two suites; test_kafka_versions runs 3.9.1 in the default run
def test_two_releases_side_by_side_each_in_its_own_purged_stack(tmp_path):
    home = searchable_dir("harness-matrix-")
    out = tmp_path / "m"
    proc = harness("matrix", "--kafka-version", "3.9.1,4.4.0", "--experiments", "offset-after,eos", "--messages",
                   "200", "--client", "python,java", "--out", str(out), env=env_of(home), timeout=1200)
    assert proc.returncode == 0, proc.stderr[-3000:]
    m = json.loads((out / "matrix.json").read_text())
    assert [(c["key"], c["metadata_version"], c["transaction_version"]) for c in m["columns"]] == \
        [("3.9.1", "3.9-IV0", "0"), ("3.9.1 java", "3.9-IV0", "0"), ("4.4.0", "4.4-IV2", "2"),
         ("4.4.0 java", "4.4-IV2", "2")]
    by = {e["experiment"]: e for e in m["experiments"]}
    for r in ("3.9.1", "4.4.0"):
        d = json.loads((out / by["eos"]["cells"][r]["report"]).read_text())     # the cell is its run's report
        assert d["environment"]["kafka_version"] == r and d["verdict"] == "as-predicted"
        assert by["eos"]["cells"][r]["read_committed_duplicates"] == 0
        assert by["offset-after"]["cells"][r]["duplicates"] == json.loads(
            (out / by["offset-after"]["cells"][r]["report"]).read_text())["counts"]["duplicates"] > 0
    # the Java client's column: eos only (offset-after's workers are Python only), the same exact output, and the
    # client's own log: a new producer epoch at every transaction's end on 4.4, never on 3.9
    assert by["offset-after"]["not_applicable"] == ["3.9.1 java", "4.4.0 java"]
    for r, seen in (("3.9.1", "before 2"), ("4.4.0", "2")):
        d = json.loads((out / by["eos"]["cells"][f"{r} java"]["report"]).read_text())
        assert d["params"]["client"] == "java" and d["verdict"] == "as-predicted"
        assert d["transaction_protocol"]["version_seen"] == seen, d["transaction_protocol"]
    assert not by["eos"]["differs"] and (out / "matrix.md").exists() and (out / "matrix.html").exists()
    assert not processes_of(home) and list((home / "matrix").iterdir()) == []


def test_ctrl_c_mid_matrix_writes_what_finished_exits_130_and_leaves_nothing(tmp_path):
    home = searchable_dir("harness-matrix-int-")
    out = tmp_path / "m"
    proc = subprocess.Popen([sys.executable, "-m", "harness.cli", "matrix", "--kafka-version", "4.4.0,3.9.1",
                             "--experiments", "offset-after", "--messages", "3000", "--out", str(out)],
                            cwd=ROOT, env={**os.environ, **env_of(home)}, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)
    deadline = time.time() + 300            # until the first release's run has workers: mid-way then
    while time.time() < deadline and proc.poll() is None and \
            not list((out / "4.4.0" / "offset-after" / "workers").glob("w*.log")):
        time.sleep(0.2)
    assert proc.poll() is None, "the matrix ended before it could be interrupted"
    os.killpg(proc.pid, signal.SIGINT)          # as a terminal's Ctrl-C: the whole foreground group
    _, err = proc.communicate(timeout=600)
    assert proc.returncode == 130, err[-3000:]
    assert "Traceback" not in err
    m = json.loads((out / "matrix.json").read_text())
    assert m["exit_code"] == 130 and m["columns"][1]["error"].startswith("not run")
    assert not processes_of(home) and list((home / "matrix").iterdir()) == []


@pytest.mark.slow          # a stack of its own and two eos-streams suites; the columns' choice is unit-tested
def test_a_streams_protocol_column_runs_eos_streams_in_a_streams_group_and_judges_it(tmp_path):
    home = searchable_dir("harness-matrix-streams-")
    out = tmp_path / "m"
    proc = harness("matrix", "--kafka-version", "4.4.0", "--experiments", "eos-streams,offset-after", "--messages",
                   "20", "--crash-rate", "0.05", "--streams-protocol", "classic,streams", "--out", str(out),
                   env=env_of(home), timeout=1200)
    assert proc.returncode == 0, proc.stderr[-3000:]
    m = json.loads((out / "matrix.json").read_text())
    assert m["keys"] == ["4.4.0", "4.4.0 streams"] and m["streams_protocols"] == ["classic", "streams"]
    by = {e["experiment"]: e for e in m["experiments"]}
    assert by["offset-after"]["not_applicable_because"] == {"4.4.0 streams": "--streams-protocol"}
    for key, protocol in (("4.4.0", None), ("4.4.0 streams", "streams")):
        c = by["eos-streams"]["cells"][key]
        d = json.loads((out / c["report"]).read_text())        # the cell is its run's report
        assert d["params"]["streams_protocol"] == protocol and d["verdict"] == "as-predicted"
        assert (c["read_committed_duplicates"], c["read_committed_lost"]) == (0, 0)
    assert "n/a (takes no --streams-protocol)" in (out / "matrix.md").read_text()
    assert not processes_of(home) and list((home / "matrix").iterdir()) == []
