"""Produce one record with nothing but the standard library: `python3 raw_kafka_produce.py HOST:PORT TOPIC KEY VALUE`;
or change a cluster-wide broker setting: `python3 raw_kafka_produce.py --alter-broker-default HOST:PORT NAME VALUE`.

Another local user of the machine has no access to the harness's virtual environment (it lives in root's
home), but any user can run the system's python3 and open a socket to a broker listening on 127.0.0.1.
This speaks the few bytes of Kafka's wire protocol a produce takes (Produce v3, one record batch of one
record, acks=1, partition 0: the local stack has one broker) and prints the answer as one line of JSON:
{"error": <Kafka error code>, "partition": 0, "offset": <the record's offset>}.
The setting is changed as Kafka's own admin client does it with `bootstrap.controllers` (the review's case 8 of
issue 53): IncrementalAlterConfigs v0 for every broker's default, sent to the controller listener; it prints
{"error": <Kafka error code>}. A listener that wants a login closes the connection: EOFError, exit 1.
"""

import json
import socket
import struct
import sys
import time


def _crc32c(data: bytes) -> int:
    crc = 0xFFFFFFFF
    for byte in data:
        crc ^= byte
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 if crc & 1 else 0)
    return crc ^ 0xFFFFFFFF


def _varint(n: int) -> bytes:
    n = (n << 1) ^ (n >> 63)          # zigzag
    out = b""
    while True:
        if n < 0x80:
            return out + bytes([n])
        out += bytes([(n & 0x7F) | 0x80])
        n >>= 7


def _batch(key: bytes, value: bytes) -> bytes:
    body = (b"\0" + _varint(0) + _varint(0) + _varint(len(key)) + key + _varint(len(value)) + value + _varint(0))
    record = _varint(len(body)) + body
    now = int(time.time() * 1000)
    after_crc = struct.pack(">hiqqqhii", 0, 0, now, now, -1, -1, -1, 1) + record
    tail = struct.pack(">ibI", -1, 2, _crc32c(after_crc)) + after_crc
    return struct.pack(">qi", 0, len(tail)) + tail


def _string(s: str) -> bytes:
    return struct.pack(">h", len(s.encode())) + s.encode()


def produce(bootstrap: str, topic: str, key: bytes, value: bytes) -> dict:
    host, port = bootstrap.rsplit(":", 1)
    batch = _batch(key, value)
    request = (struct.pack(">hhi", 0, 3, 1) + _string("stranger")
               + struct.pack(">hhi", -1, 1, 30000) + struct.pack(">i", 1) + _string(topic)
               + struct.pack(">ii", 1, 0) + struct.pack(">i", len(batch)) + batch)
    with socket.create_connection((host, int(port)), timeout=30) as s:
        s.sendall(struct.pack(">i", len(request)) + request)
        size = struct.unpack(">i", _read(s, 4))[0]
        data = _read(s, size)
    pos = 4 + 4                                         # correlation id, topics
    name_len = struct.unpack_from(">h", data, pos)[0]
    pos += 2 + name_len + 4                             # the topic's name, its partitions
    partition, error, offset = struct.unpack_from(">ihq", data, pos)
    return {"error": error, "partition": partition, "offset": offset}


def alter_broker_default(bootstrap: str, name: str, value: str) -> dict:
    """SET `name` = `value` in every broker's dynamic default config (resource BROKER, name "")."""
    host, port = bootstrap.rsplit(":", 1)
    request = (struct.pack(">hhi", 44, 0, 1) + _string("stranger")
               + struct.pack(">ib", 1, 4) + _string("") + struct.pack(">i", 1)
               + _string(name) + struct.pack(">b", 0) + _string(value) + struct.pack(">b", 0))
    with socket.create_connection((host, int(port)), timeout=30) as s:
        s.sendall(struct.pack(">i", len(request)) + request)
        size = struct.unpack(">i", _read(s, 4))[0]
        data = _read(s, size)
    (error,) = struct.unpack_from(">h", data, 4 + 4 + 4)  # correlation id, throttle time, responses
    return {"error": error}


def _read(s, n: int) -> bytes:
    data = b""
    while len(data) < n:
        chunk = s.recv(n - len(data))
        if not chunk:
            raise EOFError("the broker closed the connection")
        data += chunk
    return data


if __name__ == "__main__":
    if sys.argv[1] == "--alter-broker-default":
        print(json.dumps(alter_broker_default(*sys.argv[2:5])))
    else:
        print(json.dumps(produce(sys.argv[1], sys.argv[2], sys.argv[3].encode(), sys.argv[4].encode())))
