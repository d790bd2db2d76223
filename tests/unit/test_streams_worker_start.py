"""The Kafka Streams worker's own start, run for real without a broker: its ledger connection opens on a
thread beside the set-up, and whatever ends that thread ends the worker (FATAL, exit 3) instead of leaving
its first record waiting; an unreadable crash plan is exit 2 before any connection. Every port is a local
one nothing listens on."""

import socket
import subprocess
import sys

import pytest

from harness.experiments import streams_jvm


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _java() -> str:
    import shutil
    return shutil.which("java")


@pytest.fixture(scope="module")
def jar():
    import shutil
    if shutil.which("java") is None or shutil.which("mvn") is None:
        pytest.skip("no java or mvn on this machine")
    return streams_jvm.build(log=lambda m: None)


def _start(jar, tmp_path, *, plan: str | None, ledger: bool):
    (tmp_path / "plan.json").write_text(plan) if plan is not None else None
    cmd = [_java(), *streams_jvm.JVM_OPTIONS, "-jar", str(jar), "--bootstrap", f"127.0.0.1:{_closed_port()}",
           "--input", "in", "--output", "out", "--application-id", "start-test", "--state-dir", str(tmp_path / "s"),
           "--crash-plan", str(tmp_path / "plan.json"), "--crash-log", str(tmp_path / "crash.jsonl"),
           "--worker", "w0", "--attempt", "1"]
    if ledger:
        cmd += ["--ledger-table", "harness.ledger_x", "--jdbc-url", f"jdbc:postgresql://127.0.0.1:{_closed_port()}/h",
                "--jdbc-user", "harness"]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120,
                          env={"PATH": "/usr/bin:/bin", "HARNESS_PG_PASSWORD": "not-a-secret-here"})


def test_a_ledger_that_cannot_connect_ends_the_worker_with_exit_3_in_one_line(jar, tmp_path):
    p = _start(jar, tmp_path, plan='{"crash_ids": []}', ledger=True)
    assert p.returncode == 3, p.stderr[-2000:]
    fatal = [line for line in p.stderr.splitlines() if line.startswith("eos-streams FATAL")]
    assert len(fatal) == 1 and "worker=w0 attempt=1: cannot connect to the ledger database" in fatal[0]
    assert "not-a-secret-here" not in p.stderr


def test_an_unreadable_crash_plan_is_exit_2_and_opens_no_connection(jar, tmp_path):
    p = _start(jar, tmp_path, plan="{not json", ledger=True)
    assert p.returncode == 2, p.stderr[-2000:]
    assert "cannot read the crash plan or crash log" in p.stderr
    assert "cannot connect to the ledger database" not in p.stderr and "LEDGER" not in p.stderr


def test_the_streams_worker_logs_through_slf4j_simple_without_notices(jar, tmp_path):
    """Kafka's WARN lines (a refused bootstrap) in slf4j-simple's format, and no SLF4J notice about
    providers; SIGTERM then stops it cleanly (exit 0)."""
    cmd = [_java(), *streams_jvm.JVM_OPTIONS, "-jar", str(jar), "--bootstrap", f"127.0.0.1:{_closed_port()}",
           "--input", "in", "--output", "out", "--application-id", "start-test", "--state-dir", str(tmp_path / "s"),
           "--crash-plan", str(tmp_path / "plan.json"), "--crash-log", str(tmp_path / "crash.jsonl"),
           "--worker", "w0", "--attempt", "1"]
    (tmp_path / "plan.json").write_text('{"crash_ids": []}')
    if not str(tmp_path).startswith("/tmp/"):
        pytest.skip("the warning this test reads names a state folder under /tmp")
    proc = subprocess.Popen(cmd, stderr=subprocess.PIPE, text=True)
    lines = []
    try:
        for line in proc.stderr:
            lines.append(line)
            if line.startswith("eos-streams STARTING"):      # its shutdown hook is in place
                break
        proc.terminate()
        _, rest = proc.communicate(timeout=60)
        lines.append(rest)
    finally:
        proc.kill()
    text = "".join(lines)
    assert proc.returncode == 0, text[-2000:]
    assert "SLF4J" not in text
    # Kafka Streams warns of a state folder under the OS's temporary folder while it is built (before STARTING)
    warn = next((line for line in text.splitlines() if " WARN " in line), None)
    assert warn is not None, text[-2000:]
    assert warn[:12].count(":") == 2 and "org.apache.kafka" in warn          # HH:mm:ss.SSS [thread] WARN logger - ...
    assert "eos-streams STOPPED worker=w0 attempt=1" in text


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-q"]))
