"""The SCRAM settings of the local broker and its client.properties (no broker started here)."""

import stat

from harness.clients import kafka_client
from harness.stack import local_record, local_services
from harness.stack.local_kafka import LocalKafka, _argfile_quote


def _mode(p):
    return stat.S_IMODE(p.stat().st_mode)


def test_scram_config_has_one_sasl_listener_and_private_files(tmp_path):
    k = LocalKafka(tmp_path)
    k.write_config(19092, 19093, "scram")
    props = kafka_client.parse_properties(k.props.read_text())
    assert props["listeners"] == "SASL_PLAINTEXT://127.0.0.1:19092,CONTROLLER://127.0.0.1:19093"
    assert props["advertised.listeners"] == "SASL_PLAINTEXT://127.0.0.1:19092"
    assert props["inter.broker.listener.name"] == "SASL_PLAINTEXT"
    assert props["sasl.enabled.mechanisms"] == props["sasl.mechanism.inter.broker.protocol"] == "SCRAM-SHA-512"
    client = k.client_settings()
    assert client["security.protocol"] == "SASL_PLAINTEXT" and client["sasl.mechanism"] == "SCRAM-SHA-512"
    assert client["sasl.username"] == "harness" and len(client["sasl.password"]) >= 20
    assert f'password="{client["sasl.password"]}"' in \
        props["listener.name.sasl_plaintext.scram-sha-512.sasl.jaas.config"]
    assert _mode(k.props) == 0o600 and _mode(k.client_file) == 0o600


def test_the_controller_listener_takes_a_plain_login_of_the_controller_user_only(tmp_path):
    k = LocalKafka(tmp_path)
    k.write_config(19092, 19093, "scram")
    props = kafka_client.parse_properties(k.props.read_text())
    assert props["listener.security.protocol.map"] == "CONTROLLER:SASL_PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT"
    assert props["listener.name.controller.sasl.enabled.mechanisms"] == "PLAIN"
    assert props["sasl.mechanism.controller.protocol"] == "PLAIN"
    secret = tmp_path / "kafka-controller.properties"
    pw = kafka_client.load_file(secret)["password"]
    assert _mode(secret) == 0o600 and len(pw) >= 20 and pw != k.client_settings()["sasl.password"]
    jaas = props["listener.name.controller.plain.sasl.jaas.config"]
    assert jaas.startswith("org.apache.kafka.common.security.plain.PlainLoginModule required")
    # The one user the listener lets in, and the login this node uses towards the controllers.
    assert f'username="controller" password="{pw}" user_controller="{pw}";' in jaas
    assert jaas.count("user_") == 1
    k.write_config(1, 2, "scram")
    assert kafka_client.load_file(secret)["password"] == pw, "the password changed across a restart"


def test_the_proxied_listener_of_a_scram_node_takes_the_same_login(tmp_path):
    k = LocalKafka(tmp_path, 1)
    k.write_config(19092, 19093, "scram", voters="1@127.0.0.1:19093", proxied=(19094, 29094))
    props = kafka_client.parse_properties(k.props.read_text())
    assert props["listeners"] == ("SASL_PLAINTEXT://127.0.0.1:19092,CONTROLLER://127.0.0.1:19093,"
                                  "PROXIED://127.0.0.1:19094")
    assert props["advertised.listeners"] == "SASL_PLAINTEXT://127.0.0.1:19092,PROXIED://127.0.0.1:29094"
    assert props["listener.security.protocol.map"].endswith(",PROXIED:SASL_PLAINTEXT")
    assert props["listener.name.proxied.scram-sha-512.sasl.jaas.config"] == \
        props["listener.name.sasl_plaintext.scram-sha-512.sasl.jaas.config"]
    k.write_config(19092, 19093, voters="1@127.0.0.1:19093", proxied=(19094, 29094))
    assert kafka_client.parse_properties(k.props.read_text())["listener.security.protocol.map"] == \
        "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,PROXIED:PLAINTEXT"


def test_requests_go_through_the_standard_authorizer_with_only_our_own_users_super(tmp_path):
    k = LocalKafka(tmp_path)
    k.write_config(1, 2, "scram")
    props = kafka_client.parse_properties(k.props.read_text())
    assert props["authorizer.class.name"] == "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
    assert props["super.users"] == "User:harness;User:controller"
    assert props["allow.everyone.if.no.acl.found"] == "false"
    k.write_config(1, 2)
    assert "authorizer" not in k.props.read_text(), "the plaintext stack has no principal to authorize"


def test_every_scram_node_snapshots_its_metadata_within_seconds(tmp_path):
    """A node that starts from its metadata log alone can lose every SCRAM user (a deleted user first in Kafka's
    ScramDelta.apply); from a snapshot it cannot. Kafka's default is an hour: every node, of one or three,
    snapshots within seconds instead, and keeps old snapshots no longer than a few minutes."""
    for k, voters in ((LocalKafka(tmp_path / "one"), None), (LocalKafka(tmp_path / "three", 2), "1@h:1,2@h:2,3@h:3")):
        k.write_config(1, 2, "scram", voters=voters)
        props = kafka_client.parse_properties(k.props.read_text())
        assert 0 < int(props["metadata.log.max.snapshot.interval.ms"]) <= 10_000
        assert int(props["metadata.max.retention.ms"]) <= 3_600_000


def test_a_password_the_harness_did_not_write_is_refused(tmp_path):
    import pytest
    from harness.core.errors import HarnessError
    (tmp_path / "kafka-controller.properties").write_text('password=x" user_evil="x\n')
    with pytest.raises(HarnessError, match="did not write"):
        LocalKafka(tmp_path).write_config(1, 2, "scram")


def test_the_password_is_kept_across_restarts(tmp_path):
    k = LocalKafka(tmp_path)
    k.write_config(1, 2, "scram")
    first = k.client_settings()["sasl.password"]
    k.write_config(3, 4, "scram")
    assert k.client_settings()["sasl.password"] == first


def test_plaintext_config_has_no_sasl_and_no_client_file(tmp_path):
    k = LocalKafka(tmp_path)
    k.write_config(1, 2)
    assert "SASL" not in k.props.read_text() and not k.client_file.exists()
    assert local_record.client_properties_file(tmp_path) is None


def test_client_properties_file_follows_the_recorded_auth(tmp_path):
    k = LocalKafka(tmp_path)
    k.write_config(1, 2, "scram")
    (tmp_path / "stack.json").write_text('{"kind": "local", "auth": "scram"}')
    assert local_record.client_properties_file(tmp_path) == tmp_path / "client.properties"
    (tmp_path / "stack.json").write_text('{"kind": "local", "auth": "none"}')
    assert local_record.recorded_auth(tmp_path) == "none" and local_record.client_properties_file(tmp_path) is None


def test_a_lost_stack_json_does_not_lose_the_auth(tmp_path):
    LocalKafka(tmp_path).write_config(1, 2, "scram")
    assert local_record.recorded_auth(tmp_path) == "scram"
    LocalKafka(tmp_path).write_config(1, 2)
    assert local_record.recorded_auth(tmp_path) == "none"


def test_a_new_stack_gets_scram_and_one_set_up_plaintext_keeps_it(tmp_path):
    """Issue 53: a new local stack has SCRAM and the authorizer unless asked otherwise (it was plaintext). A stack
    recorded as `none`, or whose nodes were set up plaintext (a lost stack.json), stays so: switching needs
    `harness down --purge`."""
    new, cluster, old = tmp_path / "new", tmp_path / "cluster", tmp_path / "old"
    assert local_record.recorded_auth(new) == "scram"
    assert local_services._choose_auth(new, [LocalKafka(new)], False, None) == "scram"
    assert local_services._choose_auth(new, [LocalKafka(new)], False, "none") == "none", "--auth none on a new stack"
    LocalKafka(cluster, 2).write_config(1, 2)             # node 2 of a plaintext cluster, no stack.json
    assert local_record.recorded_auth(cluster) == "none"
    old.mkdir()
    (old / "stack.json").write_text('{"kind": "local", "auth": "none"}')
    assert local_services._choose_auth(old, [LocalKafka(old)], False, None) == "none"


def test_argfile_quoting():
    assert _argfile_quote('SCRAM-SHA-512=[name=harness,password=a"b\\c]') == \
        '"SCRAM-SHA-512=[name=harness,password=a\\"b\\\\c]"'


def test_every_node_of_a_cluster_gets_the_same_listeners_and_users(tmp_path):
    from harness.stack.local_kafka import nodes, voters
    quorum = voters([19193, 19293, 19393])
    props = []
    for k, port in zip(nodes(tmp_path, 3), (19192, 19292, 19392)):
        k.write_config(port, port + 1, "scram", voters=quorum)
        props.append(kafka_client.parse_properties(k.props.read_text()))
    for p, port in zip(props, (19192, 19292, 19392)):
        assert p["listeners"] == f"SASL_PLAINTEXT://127.0.0.1:{port},CONTROLLER://127.0.0.1:{port + 1}"
        assert p["controller.quorum.voters"] == quorum and p["min.insync.replicas"] == "2"
    for key in ("listener.name.sasl_plaintext.scram-sha-512.sasl.jaas.config",
                "listener.name.controller.plain.sasl.jaas.config", "super.users"):
        assert len({p[key] for p in props}) == 1, f"the nodes differ in {key}"
