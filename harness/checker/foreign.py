"""Records in a run's input topic that the run's own producer did not write: named, with their place.

The run marks every payment it produces (workload/signature.py: an HMAC of the
key and value under a secret only the run's process holds). At the end of the
run the input topic is read once, and each record without a valid mark is
foreign: someone else wrote it (another user's producer, another run's
consumer, the consumer under test). It is listed with its partition, offset,
key and payment id (as read; every rendering escapes them), and becomes an
integrity failure whose text says who wrote it is unknown to the run. The ids
it carries then also show up as "ids never sent" in the stores; this says where
they came from. An input topic that cannot be read is an audit error, never
"no foreign record".
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field

from ..core.escape import shown
from ..workload import signature
from .kafka_output import read_log

MAX_NAMED = 20            # records named in the report; the count covers them all
KEY_CHARS = 80


@dataclass
class Record:
    partition: int
    offset: int
    key: str | None       # as read, decoded with replacement, at most KEY_CHARS characters
    id: str | None        # the `id` of a JSON value, if it has one


@dataclass
class Foreign:
    count: int | None                   # None: the topic could not be read
    records: list = field(default_factory=list)    # the first MAX_NAMED, as Records
    error: str | None = None

    def as_dict(self) -> dict:
        return {"count": self.count, "records": [asdict(r) for r in self.records], "error": self.error}

    def failure(self) -> tuple[str, list] | None:
        """(integrity failure text, the places) when foreign records were found."""
        if not self.count:
            return None
        places = [place(r) for r in self.records]
        more = f" (the first {len(places)} named)" if self.count > len(places) else ""
        return (f"input topic foreign records: {self.count} record(s) in the input topic were not written by this "
                f"run's producer; who wrote them is unknown to the run{more}: " + "; ".join(places), places)


def place(r: Record) -> str:
    return (f"partition {r.partition} offset {r.offset} key {shown(r.key) if r.key is not None else '(none)'}"
            + (f" id {shown(r.id)}" if r.id is not None and r.id != r.key else ""))


def _text(data: bytes | None, chars: int = KEY_CHARS) -> str | None:
    return None if data is None else data[:chars * 4].decode(errors="replace")[:chars]


def _id(value: bytes | None) -> str | None:
    try:
        body = json.loads(value) if value is not None and len(value) <= 1_000_000 else None
    except (ValueError, RecursionError):
        return None
    got = body.get("id") if isinstance(body, dict) else None
    return _text(got.encode()) if isinstance(got, str) else None


def unsigned(secret: bytes, partition: int, offset: int, key: bytes | None, value: bytes | None,
             headers) -> Record | None:
    """The record as foreign when it lacks this run's mark; None when the run wrote it."""
    if signature.signed(secret, key, value, headers):
        return None
    return Record(partition, offset, _text(key), _id(value))


def tally(records: list) -> Foreign:
    """Every foreign Record found, in the order read: the count, and the first MAX_NAMED by place."""
    ordered = sorted(records, key=lambda r: (r.partition, r.offset))
    return Foreign(len(records), ordered[:MAX_NAMED])


def read_foreign(bootstrap: str, topic: str, secret: bytes) -> Foreign:
    """Read the input topic (read_uncommitted: everything written) and keep only the foreign records."""
    got = read_log(bootstrap, topic, "read_uncommitted",
                   take=lambda m: unsigned(secret, m.partition(), m.offset(), m.key(), m.value(), m.headers()))
    if got.error:
        return Foreign(None, [], f"input topic {topic}: {got.error}")
    return tally(got.records)
