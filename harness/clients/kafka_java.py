"""The user's Kafka client settings (librdkafka names) as Java client properties, for the Java workers.

The harness takes client settings in librdkafka's names (kcat's `-F` files);
the Kafka Streams worker of eos-streams and the transactional worker of
`--client java` are Java clients with other names for the same things:

- `sasl.username` + `sasl.password` become `sasl.jaas.config` with the login
  module of the mechanism (ScramLoginModule for SCRAM-SHA-256/512,
  PlainLoginModule for PLAIN);
- `ssl.ca.location` (a PEM file) becomes `ssl.truststore.type=PEM` and
  `ssl.truststore.location`; `ssl.certificate.location` + `ssl.key.location`
  become a PEM keystore given inline (`ssl.keystore.certificate.chain`,
  `ssl.keystore.key`), as Java wants key and chain together;
- `ssl.endpoint.identification.algorithm=none` is Java's empty value.

A setting with no Java equivalent is an error naming it, never silently
dropped: the Java worker would otherwise talk to the cluster differently from
every other client of the run. The result travels to the JVM in the
environment variable `ENV` as properties text (it holds secrets).
"""

from __future__ import annotations

from pathlib import Path

from ..core.errors import HarnessError

ENV = "HARNESS_KAFKA_JAVA_PROPERTIES"

# Same name, same meaning in both clients.
SAME = {"security.protocol", "sasl.kerberos.service.name", "ssl.key.password", "ssl.keystore.location",
        "ssl.keystore.password", "ssl.cipher.suites", "request.timeout.ms", "socket.connection.setup.timeout.ms",
        "socket.connection.setup.timeout.max.ms", "reconnect.backoff.ms", "reconnect.backoff.max.ms",
        "retry.backoff.ms", "retry.backoff.max.ms", "metadata.max.age.ms", "connections.max.idle.ms",
        "client.rack", "sasl.login.refresh.buffer.seconds", "sasl.login.refresh.min.period.seconds"}
# librdkafka-only switches about its own logging and internals: nothing for Java to do.
IGNORED = {"debug", "log_level", "log.connection.close", "api.version.request", "broker.version.fallback",
           "socket.keepalive.enable", "client.id", "statistics.interval.ms"}
# Read here, turned into other Java settings below.
TRANSLATED = {"sasl.mechanism", "sasl.mechanisms", "sasl.username", "sasl.password", "ssl.ca.location",
              "ssl.certificate.location", "ssl.key.location", "ssl.endpoint.identification.algorithm"}
LOGIN_MODULES = {"SCRAM-SHA-256": "org.apache.kafka.common.security.scram.ScramLoginModule",
                 "SCRAM-SHA-512": "org.apache.kafka.common.security.scram.ScramLoginModule",
                 "PLAIN": "org.apache.kafka.common.security.plain.PlainLoginModule"}


STREAMS_APP = "the Kafka Streams app (eos-streams)"
TXN_APP = "the Java transactional client (--client java)"


def java_properties(settings: dict, app: str = STREAMS_APP) -> dict:
    """The Java client properties for librdkafka `settings`; HarnessError naming `app` (the Java program that
    would take them) and what has no equivalent."""
    missing = sorted(k for k in settings if k not in SAME | IGNORED | TRANSLATED)
    if missing:
        raise HarnessError(f"{app} has no Java equivalent for client setting(s) "
                           f"{', '.join(missing)} (the translated ones are listed in harness/clients/kafka_java.py)")
    out = {k: v for k, v in settings.items() if k in SAME}
    mech = settings.get("sasl.mechanism") or settings.get("sasl.mechanisms")
    if mech:
        out["sasl.mechanism"] = mech
    if "sasl.username" in settings or "sasl.password" in settings:
        module = LOGIN_MODULES.get((mech or "GSSAPI").upper())
        if module is None:
            raise HarnessError(f"{app} gets sasl.username/sasl.password only for "
                               f"the mechanisms {', '.join(LOGIN_MODULES)}, not {mech or 'GSSAPI (the default)'}")
        out["sasl.jaas.config"] = (f'{module} required username="{_jaas(settings.get("sasl.username", ""))}" '
                                   f'password="{_jaas(settings.get("sasl.password", ""))}";')
    if "ssl.ca.location" in settings:
        out["ssl.truststore.type"] = "PEM"
        out["ssl.truststore.location"] = settings["ssl.ca.location"]
    if "ssl.certificate.location" in settings or "ssl.key.location" in settings:
        if not ("ssl.certificate.location" in settings and "ssl.key.location" in settings):
            raise HarnessError(f"ssl.certificate.location and ssl.key.location go together for {app}")
        out["ssl.keystore.type"] = "PEM"
        out["ssl.keystore.certificate.chain"] = _read(settings["ssl.certificate.location"], app)
        out["ssl.keystore.key"] = _read(settings["ssl.key.location"], app)
    elif "ssl.keystore.location" in settings:
        out["ssl.keystore.type"] = "PKCS12"     # librdkafka's keystore is always PKCS#12
    algo = settings.get("ssl.endpoint.identification.algorithm")
    if algo is not None:
        out["ssl.endpoint.identification.algorithm"] = "" if algo.lower() == "none" else algo
    return out


def _jaas(value: str) -> str:
    """A value inside a JAAS double-quoted string."""
    return value.replace("\\", "\\\\").replace('"', '\\"')


def _read(path: str, app: str) -> str:
    try:
        return Path(path).read_text()
    except OSError as e:
        raise HarnessError(f"cannot read {path} for {app}: {e.strerror or e}")


def properties_text(props: dict) -> str:
    """`props` in java.util.Properties.load's format (keys and values escaped)."""
    return "".join(f"{_escape(k, True)}={_escape(v, False)}\n" for k, v in props.items())


def _escape(s: str, key: bool) -> str:
    out = []
    for i, ch in enumerate(str(s)):
        if ch == "\\":
            out.append("\\\\")
        elif ch == "\n":
            out.append("\\n")
        elif ch == "\r":
            out.append("\\r")
        elif ch == "\t":
            out.append("\\t")
        elif ch in "=:#!" or (ch == " " and (key or i == 0)):
            out.append("\\" + ch)
        else:
            out.append(ch)
    return "".join(out)
