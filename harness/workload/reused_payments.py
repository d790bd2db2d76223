"""Reused keys: a seeded share of payments produced again, with the same id and another amount.

The reference page's rule: "the same key with a different request payload
should be rejected, as it indicates a client bug". To show it, the run plays
that buggy client: after the payments, it produces again a seeded share of
their ids, each with another amount (and its own `seq`), as a client that
reused an idempotency key for a new request would. Each reused request goes to
its payment's partition after the payment, so every consumer meets the
original first.

The harness logs what it produced (`reused.json` in the run folder: id,
amount, partition and offset of each reused request, as the broker
acknowledged it) before any worker starts, for a reader; the run's predictor
and audit take the same list from memory, and `harness audit` finds the same
requests again in the input topic (a key whose later record carries another
amount).

The ids are drawn apart from the crash plan's (their own seeded stream), so
adding reused keys moves no crash.
"""

from __future__ import annotations

import hashlib
import json
import random
from dataclasses import dataclass, replace
from pathlib import Path

from .payments import Payment

FILE_NAME = "reused.json"


@dataclass(frozen=True)
class Reused:
    """One reused request: the payment id it reuses, its other amount, where the broker put it."""
    id: str
    amount: int
    partition: int | None = None
    offset: int | None = None

    def as_dict(self) -> dict:
        return {"id": self.id, "amount": self.amount, "partition": self.partition, "offset": self.offset}


def plan(payments: list[Payment], rate: float, seed: int) -> list[Payment]:
    """The reused requests: round(len(payments) * rate) of them (at least one), each a payment's id with another amount
    (a seeded amount between 1 and twice the original, never the original) and the next `seq` numbers.
    In the payments' order, so their production order is the same for every run with this seed."""
    if not payments or rate <= 0:
        return []
    rng = random.Random(f"{seed}-reused-keys")
    k = max(1, round(len(payments) * rate))       # a tiny run still shows one
    chosen = set(rng.sample(range(len(payments)), k))
    out, seq = [], max(p.seq for p in payments)
    for n, pay in enumerate(payments):
        if n not in chosen:
            continue
        other = rng.randint(1, 2 * pay.amount)
        if other == pay.amount:
            other = pay.amount + 1
        seq += 1
        out.append(replace(pay, amount=other, seq=seq))
    return out


def fingerprint(value: bytes) -> str:
    """What a consumer stores beside the key to recognise the same request: a hash of the request's
    parameters (its amount and account), not of its delivery details (its seq, its padding)."""
    try:
        body = json.loads(value)
    except (ValueError, TypeError):
        body = None
    params = {k: body.get(k) for k in ("amount", "account")} if isinstance(body, dict) else {"raw": repr(value)}
    return hashlib.sha256(json.dumps(params, sort_keys=True).encode()).hexdigest()[:32]


def save(run_dir: Path, reused: list[Reused]) -> None:
    from ..core.safefile import write_text
    write_text(run_dir / FILE_NAME, json.dumps([r.as_dict() for r in reused]) + "\n")


def by_id(reused: list[Reused]) -> dict:
    """id -> its reused request (one per id: the plan draws each id at most once)."""
    return {r.id: r for r in reused}
