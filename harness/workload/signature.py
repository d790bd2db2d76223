"""The run's own mark on each payment it produces, so a record someone else wrote is told apart.

On a shared stack the input topic can hold records the run did not write: another
local user's producer (a stack without authentication), another run's consumer
writing to the wrong topic, the consumer under test itself. Their ids then look
like "ids never sent", with nothing saying where they came from. So the run's
payment producer adds one header to every record, `harness-mac`: an
HMAC-SHA256 of the record's key and value (not its partition or offset, which
the broker chooses) under a secret made for the run. The secret lives only in
the memory of the run's own process: never in a file, an argument, a worker's
environment or a report. Nobody else can make a valid header, so at the end of
the run every input record without one is foreign (checker/foreign.py).
"""

import hashlib
import hmac
import secrets
import struct

HEADER = "harness-mac"


def new_secret() -> bytes:
    return secrets.token_bytes(32)


def _field(data: bytes | None) -> bytes:
    """Length-prefixed, so (key, value) pairs never collide and a missing key differs from an empty one."""
    return struct.pack(">q", -1) if data is None else struct.pack(">q", len(data)) + data


def mac(secret: bytes, key: bytes | None, value: bytes | None) -> bytes:
    return hmac.new(secret, _field(key) + _field(value), hashlib.sha256).digest()


def headers(secret: bytes, key: bytes | None, value: bytes | None) -> list[tuple[str, bytes]]:
    """The headers to produce the record with."""
    return [(HEADER, mac(secret, key, value))]


def signed(secret: bytes, key: bytes | None, value: bytes | None, record_headers) -> bool:
    """Whether a record read back carries a valid mark of this run (headers as a consumer returns them: a
    list of (name, bytes) pairs, or None)."""
    want = mac(secret, key, value)
    return any(name == HEADER and isinstance(got, bytes) and hmac.compare_digest(got, want)
               for name, got in (record_headers or ()))
