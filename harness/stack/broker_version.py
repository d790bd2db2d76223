"""What an existing cluster says about its Kafka version: its finalized `metadata.version`, and its settings.

A broker never states its release over the protocol. The nearest thing it
does say is the cluster's finalized `metadata.version` feature level (KIP-584),
in the answer to an ApiVersions request (v3+, tagged field 2): the level every
broker of the cluster runs at, and so the Kafka release whose behaviour runs
(the binaries may be newer). librdkafka keeps that answer to itself, so this
module sends the one request over a plain socket. On a listener that wants
TLS or SASL first, or on any surprise, the answer is None (unknown).
"""

import socket
import struct

API_VERSIONS, VERSION = 18, 3
FINALIZED_FEATURES_TAG = 2
# metadata.version feature levels, from Kafka 4.4.0's MetadataVersion (level -> name; 34, 4.5-IV0, is unreleased).
LEVELS = {7: "3.3-IV3", 8: "3.4-IV0", 9: "3.5-IV0", 10: "3.5-IV1", 11: "3.5-IV2", 12: "3.6-IV0", 13: "3.6-IV1",
          14: "3.6-IV2", 15: "3.7-IV0", 16: "3.7-IV1", 17: "3.7-IV2", 18: "3.7-IV3", 19: "3.7-IV4",
          20: "3.8-IV0", 21: "3.9-IV0", 22: "4.0-IV0", 23: "4.0-IV1", 24: "4.0-IV2", 25: "4.0-IV3",
          26: "4.1-IV0", 27: "4.1-IV1", 28: "4.2-IV0", 29: "4.2-IV1", 30: "4.3-IV0", 31: "4.4-IV0", 32: "4.4-IV1",
          33: "4.4-IV2", 34: "4.5-IV0"}


def _uvarint(n: int) -> bytes:
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def _compact_string(s: str) -> bytes:
    b = s.encode()
    return _uvarint(len(b) + 1) + b


def request(correlation_id: int = 1) -> bytes:
    """An ApiVersions v3 request, framed (request header v2, flexible body)."""
    client = b"harness"
    header = struct.pack(">hhih", API_VERSIONS, VERSION, correlation_id, len(client)) + client + _uvarint(0)
    body = _compact_string("harness") + _compact_string("1") + _uvarint(0)
    payload = header + body
    return struct.pack(">i", len(payload)) + payload


class _Reader:
    def __init__(self, data: bytes):
        self.data, self.pos = data, 0

    def take(self, n: int) -> bytes:
        if self.pos + n > len(self.data):
            raise ValueError("truncated ApiVersions answer")
        out = self.data[self.pos:self.pos + n]
        self.pos += n
        return out

    def int16(self) -> int:
        return struct.unpack(">h", self.take(2))[0]

    def int32(self) -> int:
        return struct.unpack(">i", self.take(4))[0]

    def uvarint(self) -> int:
        shift = value = 0
        while True:
            b = self.take(1)[0]
            value |= (b & 0x7F) << shift
            if not b & 0x80:
                return value
            shift += 7

    def compact_string(self) -> str:
        n = self.uvarint() - 1
        return self.take(n).decode(errors="replace") if n > 0 else ""

    def tags(self) -> dict:
        return {self.uvarint(): self.take(self.uvarint()) for _ in range(self.uvarint())}


def finalized_features(response_body: bytes) -> dict:
    """{feature name: finalized max level} from an ApiVersions v3 response (after its correlation id)."""
    r = _Reader(response_body)
    if r.int16() != 0:
        raise ValueError("the broker answered ApiVersions with an error")
    for _ in range(r.uvarint() - 1):          # api keys: key, min, max, tags
        r.take(6)
        r.tags()
    r.int32()                                  # throttle time
    raw = r.tags().get(FINALIZED_FEATURES_TAG)
    if raw is None:
        return {}
    f, out = _Reader(raw), {}
    for _ in range(f.uvarint() - 1):
        name = f.compact_string()
        out[name] = f.int16()                  # max version level
        f.int16()                              # min version level
        f.tags()
    return out


def features(bootstrap: str, timeout: float = 5.0) -> dict | None:
    """{feature: finalized level} as the first bootstrap broker answers, or None when it cannot be asked
    this way. A feature the cluster has not finalized (transaction.version on 3.9) is absent."""
    host, _, port = bootstrap.split(",")[0].strip().rpartition(":")
    try:
        with socket.create_connection((host.strip("[]") or "127.0.0.1", int(port)), timeout=timeout) as s:
            s.sendall(request())
            size = struct.unpack(">i", _recv(s, 4))[0]
            if not 0 < size < 1 << 20:
                return None
            data = _recv(s, size)
        return finalized_features(data[4:])
    except (OSError, ValueError, struct.error):
        return None


def metadata_version(found: dict | None) -> str | None:
    """e.g. "4.1-IV1" from the finalized features, or None."""
    level = (found or {}).get("metadata.version")
    return None if level is None else LEVELS.get(level, f"level {level}")


def transaction_version(found: dict | None) -> str:
    """The transaction protocol the cluster finalized (KIP-890: transaction.version 2 bumps the producer
    epoch on every transaction), e.g. "2"; "0" when the cluster names no such feature (before 4.0, or not
    finalized); "unknown" when the broker could not be asked."""
    if found is None:
        return "unknown"
    return str(found.get("transaction.version", 0))


def broker_settings(bootstrap: str, keys: tuple, timeout: float = 15.0) -> dict:
    """{setting: value} of `keys` as a broker of the cluster describes its configuration (the admin API, with
    the run's client settings); the keys it does not describe are absent, and everything is absent when the
    cluster does not let us describe it (so callers treat a missing value as unknown)."""
    from confluent_kafka.admin import AdminClient, ConfigResource
    from ..clients import kafka_client
    try:
        admin = AdminClient(kafka_client.config(bootstrap, {"log_level": 0}))
        brokers = admin.list_topics(timeout=timeout).brokers
        res = ConfigResource(ConfigResource.Type.BROKER, str(min(brokers)))
        cfg = admin.describe_configs([res], request_timeout=timeout)[res].result(timeout=timeout + 1)
        return {k: cfg[k].value for k in keys if k in cfg}
    except Exception:  # noqa: BLE001 - a fact when it can be had, unknown otherwise
        return {}


def describe(bootstrap: str, timeout: float = 5.0) -> str | None:
    """e.g. "metadata.version 4.1-IV1", or None when the broker cannot be asked this way."""
    said = metadata_version(features(bootstrap, timeout))
    return None if said is None else f"metadata.version {said}"


def _recv(s: socket.socket, n: int) -> bytes:
    buf = bytearray()
    while len(buf) < n:
        chunk = s.recv(n - len(buf))
        if not chunk:
            raise OSError("connection closed")
        buf += chunk
    return bytes(buf)
