"""librdkafka client settings translated for the Java Kafka Streams app."""

import pytest

from harness.core.errors import HarnessError
from harness.clients.kafka_java import TXN_APP, java_properties, properties_text

SCRAM = {"security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512", "sasl.username": "alice",
         "sasl.password": 'p"w\\1'}


def test_scram_becomes_a_jaas_config_with_quotes_escaped():
    got = java_properties(SCRAM)
    assert got == {"security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512",
                   "sasl.jaas.config": 'org.apache.kafka.common.security.scram.ScramLoginModule required '
                                       'username="alice" password="p\\"w\\\\1";'}


def test_plain_uses_the_plain_login_module_and_sasl_mechanisms_is_accepted():
    got = java_properties({"security.protocol": "SASL_PLAINTEXT", "sasl.mechanisms": "PLAIN",
                           "sasl.username": "u", "sasl.password": "p"})
    assert got["sasl.mechanism"] == "PLAIN"
    assert got["sasl.jaas.config"].startswith("org.apache.kafka.common.security.plain.PlainLoginModule required")


def test_ca_location_becomes_a_pem_truststore():
    got = java_properties({"security.protocol": "SSL", "ssl.ca.location": "/etc/ca.pem",
                           "ssl.endpoint.identification.algorithm": "none"})
    assert got == {"security.protocol": "SSL", "ssl.truststore.type": "PEM",
                   "ssl.truststore.location": "/etc/ca.pem", "ssl.endpoint.identification.algorithm": ""}


def test_client_certificate_and_key_become_an_inline_pem_keystore(tmp_path):
    cert, key = tmp_path / "c.pem", tmp_path / "k.pem"
    cert.write_text("-----BEGIN CERTIFICATE-----\nAAA\n-----END CERTIFICATE-----\n")
    key.write_text("-----BEGIN PRIVATE KEY-----\nBBB\n-----END PRIVATE KEY-----\n")
    got = java_properties({"security.protocol": "SSL", "ssl.certificate.location": str(cert),
                           "ssl.key.location": str(key), "ssl.key.password": "kp"})
    assert got["ssl.keystore.type"] == "PEM"
    assert got["ssl.keystore.certificate.chain"] == cert.read_text()
    assert got["ssl.keystore.key"] == key.read_text()
    assert got["ssl.key.password"] == "kp"


def test_a_setting_without_java_equivalent_is_named():
    with pytest.raises(HarnessError, match="enable.ssl.certificate.verification"):
        java_properties({"security.protocol": "SSL", "enable.ssl.certificate.verification": "false"})


def test_the_error_names_the_java_worker_that_would_take_the_settings(monkeypatch, tmp_path):
    """Before: `--client java` refused a setting saying "the Kafka Streams app (eos-streams)"."""
    import types
    from harness.clients import kafka_client
    from harness.experiments.eos.txn_java import TxnJavaWorkers
    from harness.experiments.launch import StreamsWorkers
    monkeypatch.setattr(kafka_client, "settings_for", lambda servers: {"enable.ssl.certificate.verification": "false"})
    stack = types.SimpleNamespace(bootstrap_servers="127.0.0.1:9092")
    with pytest.raises(HarnessError, match=r"^the Java transactional client \(--client java\) has no Java equivalent"):
        TxnJavaWorkers().check(stack)
    with pytest.raises(HarnessError, match=r"^the Kafka Streams app \(eos-streams\) has no Java equivalent"):
        StreamsWorkers().check(stack)
    with pytest.raises(HarnessError, match=r"cannot read .* for the Java transactional client"):
        java_properties({"ssl.certificate.location": str(tmp_path / "no"), "ssl.key.location": str(tmp_path / "no")},
                        TXN_APP)


def test_credentials_for_an_untranslatable_mechanism_are_refused():
    with pytest.raises(HarnessError, match="GSSAPI"):
        java_properties({"security.protocol": "SASL_SSL", "sasl.username": "u", "sasl.password": "p"})


def test_librdkafka_only_switches_are_left_out():
    assert java_properties({"debug": "all", "log_level": "7"}) == {}


def test_properties_text_escapes_what_java_would_misread():
    text = properties_text({"sasl.jaas.config": 'M required password="a=b:c#d";',
                            "ssl.keystore.key": "-----BEGIN\nX\n", "k": " lead"})
    assert text == ('sasl.jaas.config=M required password\\="a\\=b\\:c\\#d";\n'
                    "ssl.keystore.key=-----BEGIN\\nX\\n\n"
                    "k=\\ lead\n")
