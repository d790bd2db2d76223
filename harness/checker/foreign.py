"""Records in a run's input topic that the run's own producer did not write: named, with their place.

The run marks every payment it produces (workload/signature.py: an HMAC of the
key and value under a secret only the run's process holds). At the end of the
run the input topic is read once, and each record without a valid mark is
foreign: someone else wrote it (another user's producer, another run's
consumer, the consumer under test). So is a copy of one of the run's own
records that someone else wrote again (a replay, whose mark is valid: the same
key and value): the run's idempotent producer writes each record once, and the
broker acknowledged it for that key at another partition and offset. A marked
record whose key the run was never acknowledged for (a send that a time limit
cut short, which the broker may still have written) is not called a copy.
It is listed with its partition, offset,
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
    copy_of: list | None = None     # a replay: [partition, offset] of the run's own record with this key


@dataclass
class Foreign:
    count: int | None                   # None: the topic could not be read
    records: list = field(default_factory=list)    # the first MAX_NAMED, as Records
    error: str | None = None
    copies: int = 0                     # how many of `count` are copies of the run's own records

    def as_dict(self) -> dict:
        return {"count": self.count, "records": [asdict(r) for r in self.records], "error": self.error}

    def failure(self) -> tuple[str, list] | None:
        """(integrity failure text, the places) when foreign records were found."""
        if not self.count:
            return None
        places = [place(r) for r in self.records]
        more = f" (the first {len(places)} named)" if self.count > len(places) else ""
        copies = self.copies
        said = f" ({copies} of them copies of the run's own records)" if copies else ""
        return (f"input topic foreign records: {self.count} record(s) in the input topic were not written by this "
                f"run's producer{said}; who wrote them is unknown to the run{more}: " + "; ".join(places), places)


def place(r: Record) -> str:
    return (f"partition {r.partition} offset {r.offset} key {shown(r.key) if r.key is not None else '(none)'}"
            + (f" id {shown(r.id)}" if r.id is not None and r.id != r.key else "")
            + (f" (a copy of the run's record at partition {r.copy_of[0]} offset {r.copy_of[1]})"
               if r.copy_of else ""))


def _text(data: bytes | None, chars: int = KEY_CHARS) -> str | None:
    return None if data is None else data[:chars * 4].decode(errors="replace")[:chars]


def _id(value: bytes | None) -> str | None:
    try:
        body = json.loads(value) if value is not None and len(value) <= 1_000_000 else None
    except (ValueError, RecursionError):
        return None
    got = body.get("id") if isinstance(body, dict) else None
    return _text(got.encode()) if isinstance(got, str) else None


def placements(positions: dict | None, reused: dict | None) -> dict | None:
    """Key -> every (partition, offset) the broker acknowledged to the run's producer for it: the payments'
    `positions` (id -> (partition, offset)) and the requests produced again with a reused id (`reused`: id ->
    workload/reused_payments.Reused). None when the run kept no positions (nothing is then called a copy)."""
    if positions is None:
        return None
    placed: dict = {}
    for key, (partition, offset) in positions.items():
        placed.setdefault(key, set()).add((int(partition), int(offset)))
    for key, r in (reused or {}).items():
        if r.partition is not None and r.offset is not None:
            placed.setdefault(key, set()).add((int(r.partition), int(r.offset)))
    return placed


def unsigned(secret: bytes, partition: int, offset: int, key: bytes | None, value: bytes | None,
             headers, placed: dict | None = None) -> Record | None:
    """The record as foreign when it lacks this run's mark, or when it is a copy of one of the run's own
    records (`placed`, from placements(): the run was acknowledged for its key elsewhere, never here);
    None when the run wrote it."""
    if not signature.signed(secret, key, value, headers):
        return Record(partition, offset, _text(key), _id(value))
    ours = placed.get(key.decode(errors="replace")) if placed and key is not None else None
    if not ours or (partition, offset) in ours:
        return None
    return Record(partition, offset, _text(key), _id(value), copy_of=list(min(ours)))


def tally(records: list) -> Foreign:
    """Every foreign Record found, in the order read: the count, and the first MAX_NAMED by place."""
    ordered = sorted(records, key=lambda r: (r.partition, r.offset))
    return Foreign(len(records), ordered[:MAX_NAMED], copies=sum(1 for r in records if r.copy_of))


def read_foreign(bootstrap: str, topic: str, secret: bytes, placed: dict | None = None) -> Foreign:
    """Read the input topic (read_uncommitted: everything written) and keep only the foreign records."""
    got = read_log(bootstrap, topic, "read_uncommitted",
                   take=lambda m: unsigned(secret, m.partition(), m.offset(), m.key(), m.value(), m.headers(),
                                           placed))
    if got.error:
        return Foreign(None, [], f"input topic {topic}: {got.error}")
    return tally(got.records)
