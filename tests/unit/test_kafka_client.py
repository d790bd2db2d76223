"""Kafka client settings: parsing, the config every client gets, checks, secrets kept out of output."""

import json
import os
import subprocess
import sys

import pytest

from harness.clients import kafka_client
from harness.core.errors import HarnessError
from harness.stack.stack import Stack
from tests.conftest import ROOT, harness

SECRET = "hunter2-S3cret"


@pytest.fixture(autouse=True)
def clean_state(monkeypatch):
    """Each test starts with no bound or requested settings, and leaves none behind."""
    monkeypatch.delenv(kafka_client.ENV, raising=False)
    monkeypatch.setattr(kafka_client, "_bound", {})
    monkeypatch.setattr(kafka_client, "_requested", {})


def test_properties_file_syntax():
    text = ("# a comment\n! another\n\nsecurity.protocol=SASL_SSL\n  sasl.mechanism = SCRAM-SHA-512  \n"
            f"sasl.username: alice\nsasl.password={SECRET}=x\nssl.ca.location=/etc/ca.pem\n")
    assert kafka_client.parse_properties(text) == {
        "security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512", "sasl.username": "alice",
        "sasl.password": f"{SECRET}=x", "ssl.ca.location": "/etc/ca.pem"}


def test_a_bad_line_is_named_without_its_text_when_it_may_hold_a_secret():
    with pytest.raises(HarnessError, match="f.properties line 2: expected key=value") as e:
        kafka_client.parse_properties("a=b\nnot a property line\n", "f.properties")
    assert "not a property" in str(e.value)
    with pytest.raises(HarnessError) as e:
        kafka_client.parse_properties(f"=password {SECRET}\n", "f.properties")
    assert SECRET not in str(e.value)


def test_pairs_later_wins_and_bad_pairs_hide_secrets():
    assert kafka_client.parse_pairs(["a=1", "b=x=y", "a=2"]) == {"a": "2", "b": "x=y"}
    with pytest.raises(HarnessError, match="--kafka-config takes KEY=VALUE"):
        kafka_client.parse_pairs(["novalue"])
    with pytest.raises(HarnessError) as e:
        kafka_client.parse_pairs([f"sasl.password{SECRET}"])
    assert SECRET not in str(e.value)


def test_options_file_then_pairs(tmp_path):
    f = tmp_path / "client.properties"
    f.write_text("security.protocol=SASL_PLAINTEXT\nsasl.password=fromfile\n")
    got = kafka_client.from_options(["sasl.password=frompair"], str(f))
    assert got == {"security.protocol": "SASL_PLAINTEXT", "sasl.password": "frompair"}
    with pytest.raises(HarnessError, match="cannot read the Kafka client settings file"):
        kafka_client.from_options([], str(tmp_path / "missing"))
    with pytest.raises(HarnessError, match="--bootstrap-servers"):
        kafka_client.from_options(["bootstrap.servers=elsewhere:9092"])


@pytest.mark.parametrize("key", ["sasl.password", "ssl.key.password", "ssl.keystore.password",
                                 "sasl.oauthbearer.client.secret", "sasl.jaas.config", "ssl.key.pem"])
def test_secret_keys(key):
    assert kafka_client.is_secret(key)
    assert kafka_client.public({key: SECRET, "sasl.username": "alice"}) == {key: "***", "sasl.username": "alice"}


def test_not_secret_keys():
    for key in ("security.protocol", "sasl.username", "ssl.ca.location", "sasl.mechanism"):
        assert not kafka_client.is_secret(key)


def test_scrub_removes_every_secret_value():
    settings = {"sasl.password": SECRET, "ssl.key.password": "kp-123456", "sasl.username": "alice"}
    msg = f"failed for alice with {SECRET} and kp-123456"
    assert kafka_client.scrub(msg, settings) == "failed for alice with *** and ***"


def test_config_call_site_entries_win_and_the_address_is_the_stacks():
    kafka_client.use("h:1", {"security.protocol": "SASL_SSL", "isolation.level": "read_uncommitted"})
    conf = kafka_client.config("h:1", {"isolation.level": "read_committed", "group.id": "g"})
    assert conf == {"bootstrap.servers": "h:1", "security.protocol": "SASL_SSL",
                    "isolation.level": "read_committed", "group.id": "g"}
    assert kafka_client.config("other:2") == {"bootstrap.servers": "other:2"}


def test_bound_settings_reach_child_processes_through_the_environment_only():
    kafka_client.use("h:1", {"security.protocol": "SASL_PLAINTEXT", "sasl.password": SECRET})
    code = "import json; from harness.clients import kafka_client; print(json.dumps(kafka_client.config('h:1')))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True,
                         env={**os.environ, "PYTHONPATH": str(ROOT)}).stdout
    assert json.loads(out)["sasl.password"] == SECRET


def test_resolve_lays_the_users_settings_over_the_stacks():
    kafka_client.request({"sasl.password": "override"})
    own = {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN", "sasl.username": "u",
           "sasl.password": "own"}
    got = kafka_client.resolve("h:1", own)
    assert got == {**own, "sasl.password": "override"}
    assert kafka_client.settings_for("h:1") == got


def test_resolve_takes_a_parents_settings_when_the_stack_has_none():
    kafka_client.use("h:1", {"security.protocol": "SSL"})
    kafka_client._bound.clear()          # as in a child process: only the environment knows
    assert kafka_client.resolve("h:1") == {"security.protocol": "SSL"}


def test_a_parents_settings_reach_a_child_on_a_stack_with_its_own_file_which_wins_where_both_say():
    """`harness suite` or `hunt --kafka-config socket.timeout.ms=2000` on the SCRAM stack: the child runs resolve
    with the stack's client.properties; the parent's timeout used to be dropped there."""
    own = {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "SCRAM-SHA-512", "sasl.username": "u",
           "sasl.password": "fresh"}
    kafka_client.use("h:1", {**own, "sasl.password": "older", "socket.timeout.ms": "2000"})
    kafka_client._bound.clear()          # as in a child process: only the environment knows
    assert kafka_client.resolve("h:1", own) == {**own, "socket.timeout.ms": "2000"}


def test_unknown_property_is_one_clear_error():
    with pytest.raises(HarnessError, match='Kafka client settings rejected: No such configuration property: "foo.bar"'):
        kafka_client.check({"foo.bar": "1"})


def test_invalid_value_error_has_no_secret():
    with pytest.raises(HarnessError, match="security.protocol") as e:
        kafka_client.check({"security.protocol": SECRET, "sasl.password": SECRET})
    assert SECRET not in str(e.value)


def test_valid_settings_pass():
    kafka_client.check({"security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512",
                        "sasl.username": "u", "sasl.password": SECRET})


def test_describe():
    assert kafka_client.describe({}) == "PLAINTEXT"
    assert kafka_client.describe({"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "SCRAM-SHA-512",
                                  "sasl.username": "harness", "sasl.password": SECRET}) == \
        "SASL_PLAINTEXT SCRAM-SHA-512 as harness"
    assert kafka_client.describe({"security.protocol": "SSL"}) == "SSL"


def test_stack_public_and_repr_hide_the_kafka_secrets():
    st = Stack("external", "h:1", "postgresql://u:pgpw@h/db", owned=False,
               kafka_config={"security.protocol": "SASL_SSL", "sasl.password": SECRET})
    pub = st.public()
    assert pub["kafka_config"] == {"security.protocol": "SASL_SSL", "sasl.password": "***"}
    assert pub["kafka_auth"] == "SASL_SSL"
    assert SECRET not in json.dumps(pub) and SECRET not in repr(st)


@pytest.fixture
def isolated(tmp_path):
    return {"HARNESS_HOME": str(tmp_path / "state"), "HARNESS_CACHE": str(tmp_path / "cache"),
            "HARNESS_BOOTSTRAP_SERVERS": "", "HARNESS_POSTGRES_DSN": "", "HARNESS_KAFKA_CONFIG_FILE": ""}


def _one_line(proc):
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr + proc.stdout
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, lines
    return lines[0]


def test_cli_unknown_property_exits_2_in_one_line(isolated):
    line = _one_line(harness("run", "dedupe", "--bootstrap-servers", "127.0.0.1:1", "--postgres-dsn",
                             "postgresql://u:p@127.0.0.1:1/db", "--kafka-config", "foo.bar=1",
                             "--kafka-config", f"sasl.password={SECRET}", env=isolated, timeout=60))
    assert 'No such configuration property: "foo.bar"' in line and SECRET not in line


def test_cli_settings_file_from_the_environment(isolated, tmp_path):
    f = tmp_path / "client.properties"
    f.write_text(f"security.protocol={SECRET}\nsasl.password={SECRET}\n")
    line = _one_line(harness("clean", "--all", "--bootstrap-servers", "127.0.0.1:1", "--postgres-dsn",
                             "postgresql://u:p@127.0.0.1:1/db",
                             env={**isolated, "HARNESS_KAFKA_CONFIG_FILE": str(f)}, timeout=60))
    assert "security.protocol" in line and SECRET not in line


def test_cli_auth_is_for_the_stacks_the_harness_starts(isolated):
    line = _one_line(harness("up", "--auth", "scram", "--bootstrap-servers", "127.0.0.1:1", env=isolated))
    assert "--auth sets up the stack the harness starts" in line


def test_the_bare_benchmark_worker_reads_the_same_environment():
    from harness.bench import bare_worker
    kafka_client.use("h:1", {"security.protocol": "SSL"})
    assert bare_worker.client_settings("h:1") == {"security.protocol": "SSL"}
    assert bare_worker.client_settings("other:2") == {}


def test_a_settings_file_that_is_not_text_is_one_clear_error(tmp_path):
    """A binary (or non-UTF-8) file is refused in one line that shows none of its bytes."""
    f = tmp_path / "client.properties"
    f.write_bytes(b"\xff\xfesasl.password=" + SECRET.encode() + b"\n")
    with pytest.raises(HarnessError, match="is not a text file") as e:
        kafka_client.load_file(str(f))
    assert SECRET not in str(e.value)


def test_a_probe_error_without_a_message_is_named_by_its_type():
    """A future's result(timeout) raises a TimeoutError with no message: the probe's note indexed its
    lines and `harness up` died with an IndexError traceback (seen in CI on a loaded machine)."""
    from concurrent.futures import TimeoutError as FutureTimeout
    from harness.core.errors import first_line
    assert first_line(FutureTimeout()) == "TimeoutError"
    assert first_line(ValueError("bad\nsecond line")) == "bad"
    assert first_line(ValueError("  ")) == "ValueError"


def test_the_kafka_probe_reports_a_silent_timeout_instead_of_dying(monkeypatch):
    from concurrent.futures import TimeoutError as FutureTimeout
    import confluent_kafka.admin as admin_mod
    from harness.stack import health

    class Admin:
        def __init__(self, conf):
            pass

        def list_topics(self, timeout):
            raise FutureTimeout()

        def poll(self, t):
            return 0
    monkeypatch.setattr(admin_mod, "AdminClient", Admin)
    assert health.kafka_probe("127.0.0.1:1", 0.5) == "TimeoutError"


def test_a_producer_is_connected_first_and_a_broker_that_does_not_answer_changes_nothing(monkeypatch):
    import confluent_kafka
    import pytest
    from harness.clients import kafka_client
    calls = []

    class Fake:
        def __init__(self, conf):
            self.conf = conf

        def list_topics(self, topic=None, timeout=None):
            calls.append((topic, timeout))
            if self.conf.get("down") or (self.conf.get("no second answer") and len(calls) > 1):
                raise confluent_kafka.KafkaException("no broker")
    monkeypatch.setattr(confluent_kafka, "Producer", Fake)
    p = kafka_client.connected_producer("127.0.0.1:1", {"enable.idempotence": True}, "harness.t")
    assert p.conf["bootstrap.servers"] == "127.0.0.1:1" and p.conf["enable.idempotence"] is True
    # an idempotent producer asks twice (the first answer may come through the bootstrap connection:
    # tests/integration/test_connected_producer.py), the second within what is left of the same connect_s
    assert [c[0] for c in calls] == ["harness.t"] * 2 and calls[0][1] == kafka_client.CONNECT_S
    assert 0.1 <= calls[1][1] <= kafka_client.CONNECT_S
    del calls[:]
    kafka_client.connected_producer("127.0.0.1:1", {"transactional.id": "t"})
    kafka_client.connected_producer("127.0.0.1:1", {"enable.idempotence": "true"})
    assert len(calls) == 4
    del calls[:]
    kafka_client.connected_producer("127.0.0.1:1", {"acks": "1"}, "harness.t")     # no producer id: once
    assert len(calls) == 1
    del calls[:]
    assert kafka_client.connected_producer("127.0.0.1:1", {"down": True}).conf["down"] is True
    assert len(calls) == 1          # no answer: not asked again
    # a transactional worker that cannot reach the cluster says so at once, as before
    with pytest.raises(confluent_kafka.KafkaException):
        kafka_client.connected_producer("127.0.0.1:1", {"down": True, "transactional.id": "t"}, connect_s=30,
                                        required=True)
    assert calls[-1] == (None, 30)
    # reached once but not twice: handed out as it is, required or not (its own calls then say what is wrong)
    for required in (False, True):
        del calls[:]
        p = kafka_client.connected_producer("127.0.0.1:1", {"no second answer": True, "transactional.id": "t"},
                                            required=required)
        assert p.conf["transactional.id"] == "t" and len(calls) == 2


def test_forget_undoes_use_in_this_process_and_its_children(monkeypatch):
    from harness.clients import kafka_client as kc
    monkeypatch.setenv(kc.ENV, json.dumps({"other:1": {"a": "b"}}))
    kc.use("h:9", {"sasl.username": "u"})
    kc.forget("h:9")
    assert kc.settings_for("h:9") == {} and json.loads(os.environ[kc.ENV]) == {"other:1": {"a": "b"}}
