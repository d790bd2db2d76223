"""Secrets given on the command line: masked in every command line the harness records or shows."""

import subprocess
import sys

import pytest

from harness.stack import environment
from harness.clients import kafka_client, secret_args
from harness.stack.stack import Stack
from tests.conftest import ROOT

SECRET = "hunter2-S3cret"


@pytest.mark.parametrize("key", ["sasl.oauthbearer.client.secret", "sasl.password", "sasl.jaas.config",
                                 "sasl.oauthbearer.config", "sasl.kerberos.keytab", "ssl.key.password",
                                 "ssl.key.pem", "ssl.keystore.location", "ssl.key.location",
                                 "client.credentials", "api.token",
                                 "SASL.PASSWORD", " sasl.password"])
def test_every_key_that_names_a_secret_is_one(key):
    assert kafka_client.is_secret(key)
    assert kafka_client.public({key: SECRET}) == {key: "***"}


@pytest.mark.parametrize("key", ["security.protocol", "sasl.mechanism", "sasl.mechanisms", "sasl.username",
                                 "ssl.ca.location", "client.id", "enable.idempotence"])
def test_plain_settings_stay_visible(key):
    assert not kafka_client.is_secret(key)


@pytest.mark.parametrize("argv", [
    ["run", "x", "--kafka-config", f"sasl.oauthbearer.client.secret={SECRET}"],
    ["run", "x", f"--kafka-config=sasl.oauthbearer.client.secret={SECRET}"],
    ["run", "x", "--kafka-config", f"ssl.key.pem=-----BEGIN {SECRET}"],
    ["run", "x", "--kafka-config", f"sasl.jaas.config=org.Login required username=u password={SECRET};"],
    ["run", "x", "--postgres-dsn", f"postgresql://u:{SECRET}@h:5/db"],
    ["run", "x", f"--postgres-dsn=host=h user=u password={SECRET}"],
    ["run", "x", "--postgres-dsn", f"host=h user=u password='{SECRET} x"],    # no parser accepts it
    ["bench", "--bootstrap-servers", "h:1", "--postgres-dsn", f"u:{SECRET}@h"],
])
def test_masked_argv_holds_no_secret(argv):
    out = secret_args.masked(argv)
    assert SECRET not in " ".join(out)
    assert len(out) == len(argv) and out[:2] == argv[:2]


def test_masked_argv_keeps_what_is_not_secret():
    argv = ["run", "dedupe", "--kafka-config", "security.protocol=SASL_SSL", "--kafka-config",
            "sasl.username=alice", "--messages", "100", "--out", "/tmp/r", "--kafka-config",
            f"sasl.password={SECRET}", "--postgres-dsn", "postgresql://h/db"]
    assert secret_args.masked(argv) == [*argv[:-3], "sasl.password=***", "--postgres-dsn", "postgresql://h/db"]


def test_command_line_in_a_report_masks_kafka_secrets(monkeypatch):
    monkeypatch.setattr(sys, "argv", ["/x/harness", "run", "dedupe", "--kafka-config",
                                      f"sasl.oauthbearer.client.secret={SECRET}", "--postgres-dsn",
                                      f"postgresql://harness:{SECRET}@127.0.0.1:1/harness"])
    stack = Stack(kind="external", bootstrap_servers="h:1", postgres_dsn="postgresql://h/db", owned=False)
    line = environment.describe(stack)["command_line"]
    assert SECRET not in line
    assert "sasl.oauthbearer.client.secret=***" in line and line.startswith("harness run dedupe")


def test_the_harness_hides_secrets_from_its_own_argv():
    """A real process: after `hide_own()` /proc/PID/cmdline (what `ps` shows) holds no secret."""
    code = ("import sys, time\n"
            "from harness.clients import secret_args\n"
            "secret_args.hide_own()\n"
            "print('ready', flush=True)\n"
            "time.sleep(30)\n")
    proc = subprocess.Popen([sys.executable, "-c", code, "run", "x", "--kafka-config",
                             f"sasl.password={SECRET}", "--postgres-dsn", f"postgresql://u:{SECRET}@h/db"],
                            cwd=ROOT, stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "ready"
        with open(f"/proc/{proc.pid}/cmdline", "rb") as f:
            shown = f.read().replace(b"\0", b" ").decode()
        assert SECRET not in shown
        assert "sasl.password=***" in shown and "--postgres-dsn" in shown
    finally:
        proc.kill()
        proc.wait()
