"""The few bytes of Kafka's wire protocol the protocol faults read and write, as pure functions.

The protocol proxy (faults/protocol_proxy.py) never decodes a request's body:
it reads a frame's size, the request header (API key and version, correlation
id, client id) to decide whether a fault touches it, and, for `fail-request`,
writes or patches a response whose body is nothing but a throttle time, an
error code and (for some) a producer id and epoch. Those are the only answers
it can forge honestly without a schema per API and version, so `fail-request`
takes only those APIs (`FAILABLE`). Kept apart so it is tested on hand-made
bytes, without a broker.
"""

from __future__ import annotations

import struct

MAX_FRAME = 256 << 20       # larger than any request our clients send: anything bigger is not Kafka's framing

API_KEYS = {"Produce": 0, "Fetch": 1, "ListOffsets": 2, "Metadata": 3, "OffsetCommit": 8, "OffsetFetch": 9,
            "FindCoordinator": 10, "JoinGroup": 11, "Heartbeat": 12, "SyncGroup": 14, "ApiVersions": 18,
            "InitProducerId": 22, "AddPartitionsToTxn": 24, "AddOffsetsToTxn": 25, "EndTxn": 26,
            "TxnOffsetCommit": 28}
API_NAMES = {v: k for k, v in API_KEYS.items()}

# The first version of each API whose request header carries tagged fields (header v2) and whose response
# header does too (v1); ApiVersions' response header never does (so a client can read any broker's answer).
FLEXIBLE_FROM = {"Produce": 9, "Fetch": 12, "ListOffsets": 6, "Metadata": 9, "OffsetCommit": 8, "OffsetFetch": 6,
                 "FindCoordinator": 3, "JoinGroup": 6, "Heartbeat": 4, "SyncGroup": 4, "ApiVersions": 3,
                 "InitProducerId": 2, "AddPartitionsToTxn": 3, "AddOffsetsToTxn": 3, "EndTxn": 3,
                 "TxnOffsetCommit": 3}

# APIs whose whole response body is throttle_time_ms (int32), error_code (int16) and, after them, the fields
# named here (as struct formats with their "none" values), then tagged fields when flexible.
FAILABLE = {"EndTxn": lambda v: (">qh", (-1, -1)) if v >= 5 else ("", ()),
            "AddOffsetsToTxn": lambda v: ("", ()),
            "InitProducerId": lambda v: (">qh", (-1, -1))}

ERRORS = {"UNKNOWN_SERVER_ERROR": -1, "NOT_LEADER_OR_FOLLOWER": 6, "REQUEST_TIMED_OUT": 7, "NETWORK_EXCEPTION": 13,
          "COORDINATOR_LOAD_IN_PROGRESS": 14, "COORDINATOR_NOT_AVAILABLE": 15, "NOT_COORDINATOR": 16,
          "NOT_ENOUGH_REPLICAS": 19, "INVALID_PRODUCER_EPOCH": 47, "INVALID_TXN_STATE": 48,
          "CONCURRENT_TRANSACTIONS": 51, "PRODUCER_FENCED": 90, "TRANSACTION_ABORTABLE": 120}


class WireError(ValueError):
    """Bytes that are not what Kafka's framing says they must be."""


def frame_size(prefix: bytes) -> int:
    """The size a frame's 4-byte prefix announces."""
    (size,) = struct.unpack(">i", prefix)
    if size < 0 or size > MAX_FRAME:
        raise WireError(f"a frame of {size} bytes")
    return size


def request_header(body: bytes) -> dict:
    """A request frame's body (after its size) -> {api_key, api, version, correlation_id, client_id}."""
    if len(body) < 10:
        raise WireError("a request shorter than its header")
    api_key, version, corr, n = struct.unpack(">hhih", body[:10])
    client = None if n < 0 else body[10:10 + n].decode("utf-8", "replace")
    return {"api_key": api_key, "api": API_NAMES.get(api_key, str(api_key)), "version": version,
            "correlation_id": corr, "client_id": client}


def flexible_response(api: str, version: int) -> bool:
    """True when this API at this version answers with a response header that has tagged fields."""
    return api != "ApiVersions" and version >= FLEXIBLE_FROM.get(api, 1 << 15)


def expects_response(head: dict, body: bytes) -> bool:
    """False only for a Produce with acks=0 (v3+: after its transactional id), which the broker never answers."""
    if head["api"] != "Produce":
        return True
    at = 10 + max(0, len((head["client_id"] or "").encode()))
    flexible = head["version"] >= FLEXIBLE_FROM["Produce"]
    if flexible:
        at += 1                                 # the request header's tagged fields (none, from our clients)
    if head["version"] >= 3:
        if flexible:                            # a compact nullable string: its length + 1 as an unsigned varint
            n, used = _uvarint(body, at)
            at += used + max(0, n - 1)
        else:
            (n,) = struct.unpack(">h", body[at:at + 2])
            at += 2 + max(0, n)
    (acks,) = struct.unpack(">h", body[at:at + 2])
    return acks != 0


def _uvarint(data: bytes, at: int) -> tuple[int, int]:
    value = shift = used = 0
    while True:
        if at + used >= len(data) or used > 4:
            raise WireError("a varint past the frame")
        b = data[at + used]
        value |= (b & 0x7F) << shift
        used += 1
        if not b & 0x80:
            return value, used
        shift += 7


def error_response(head: dict, error: int) -> bytes:
    """The whole frame (with its size) a broker would send to fail this request with `error`."""
    extra_fmt, extra = FAILABLE[head["api"]](head["version"])
    flexible = flexible_response(head["api"], head["version"])
    body = struct.pack(">i", head["correlation_id"]) + (b"\0" if flexible else b"")
    body += struct.pack(">ih", 0, error) + (struct.pack(extra_fmt, *extra) if extra_fmt else b"")
    body += b"\0" if flexible else b""
    return struct.pack(">i", len(body)) + body


def with_error(head: dict, response: bytes, error: int) -> bytes:
    """A broker's response frame body (after its size) to a FAILABLE request, its error code replaced."""
    at = 4 + (1 if flexible_response(head["api"], head["version"]) else 0) + 4    # header, throttle time
    if len(response) < at + 2:
        raise WireError("a response shorter than its error code")
    return response[:at] + struct.pack(">h", error) + response[at + 2:]


def response_error(head: dict, response: bytes) -> int | None:
    """The error code of a broker's response to a FAILABLE request (None for any other API)."""
    if head["api"] not in FAILABLE:
        return None
    at = 4 + (1 if flexible_response(head["api"], head["version"]) else 0) + 4
    return struct.unpack(">h", response[at:at + 2])[0] if len(response) >= at + 2 else None
