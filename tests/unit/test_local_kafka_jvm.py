"""The JVM options of the Kafka processes the local stack starts (no broker started here): the broker and the
storage format compile with C1 only, a measured choice (harness/stack/local_kafka.py, docs/changelog.md's Numbers)."""

import subprocess

from harness.stack import local_kafka
from harness.stack.local_kafka import LocalKafka


def test_the_broker_compiles_with_c1_only(tmp_path):
    cmd = LocalKafka(tmp_path)._java(tmp_path / "lib", "kafka.Kafka", "server.properties")
    assert cmd[0] == "java" and "-XX:TieredStopAtLevel=1" in cmd
    assert cmd.index("-XX:TieredStopAtLevel=1") < cmd.index("kafka.Kafka")     # a JVM option, not an argument


def test_the_storage_format_compiles_with_c1_only(tmp_path, monkeypatch):
    seen = []

    def run(cmd, **kw):
        seen.append(cmd)
        return subprocess.CompletedProcess(cmd, 0, "", "")

    monkeypatch.setattr(local_kafka.subprocess, "run", run)
    k = LocalKafka(tmp_path)
    k.write_config(1, 2)
    k.format(tmp_path / "lib", cluster_id="abcdefghijklmnopqrstuv")
    (cmd,) = seen
    assert cmd[0] == "java" and "-XX:TieredStopAtLevel=1" in cmd and cmd[-1].startswith("@")
