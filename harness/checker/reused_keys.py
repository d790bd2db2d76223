"""Reused keys (key-reuse, key-fingerprint): what happened to each request produced again under a used key.

The run produced a seeded share of payments again with the same id and
another amount (workload/reused_payments.py) and logged each one. A consumer can do three
things with such a request, and each leaves its own trace:

- apply it: a ledger row of that id with the reused amount (also an integrity
  failure: the ledger's amount is not the payment's);
- reject it: a rejects row with that id and the reused amount (key-fingerprint);
- skip it as a redelivery: neither. That is `hidden`: the client's bug went
  unseen, and the request it sent was dropped without a word.

The observation reads the ledger's rows (already read for the effects) and the
rejects table. What could not be read is None with its error, never 0. The
predictor (what each experiment must show) lives in its family's folder:
experiments/key_reuse/key_reuse_predictors.py.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from .effects import MAX_IDS
from ..clients import pgconn


@dataclass
class ReuseAudit:
    reused: int
    has_rejects: bool = False
    applied: int | None = None
    rejected: int | None = None          # rows of the rejects table (None: the run has none, or unreadable)
    hidden: int | None = None
    unreached: int | None = None         # reused requests a stopped run never got to: not hidden, not judged
    ids: dict = field(default_factory=dict)          # metric -> every id behind it
    integrity: list = field(default_factory=list)    # (failure text, ids)

    def metrics(self) -> dict:
        out = {"reuse.applied": self.applied, "reuse.hidden": self.hidden}
        if self.has_rejects:
            out["reuse.rejected"] = self.rejected
        return out

    def section(self, reused: dict) -> dict:
        return {"reused": self.reused, "applied": self.applied, "rejected": self.rejected, "hidden": self.hidden,
                "unreached": self.unreached,
                "reused_requests": [{"id": r.id, "amount": r.amount, "partition": r.partition, "offset": r.offset}
                                    for r in sorted(reused.values(), key=lambda r: r.id)[:MAX_IDS]],
                "hidden_ids": sorted(self.ids.get("reuse.hidden") or [])[:MAX_IDS],
                "unreached_ids": sorted(self.ids.get("reuse.unreached") or [])[:MAX_IDS],
                "rejected_ids": sorted(self.ids.get("reuse.rejected") or [])[:MAX_IDS]}


def compare(reused: dict, ledger_rows: list | None, reject_rows: list | None, has_rejects: bool,
            finished: bool = True, committed: dict | None = None) -> ReuseAudit:
    """Pure part. `reused`: id -> its reused request (`amount`, `partition`, `offset`); `ledger_rows`:
    [(id, amount)] (None: unreadable); `reject_rows`: [(id, amount)] from the rejects table (None: none, or
    unreadable). A run that did not finish decides only the requests below its partitions' committed
    offsets (`committed`, partition -> offset): the rest were never reached, not hidden."""
    a = ReuseAudit(len(reused), has_rejects)
    if ledger_rows is None or (has_rejects and reject_rows is None) or (not finished and committed is None):
        return a                          # what decides `hidden` could not be read: unknown, not 0
    applied = sorted({i for i, amount in ledger_rows if i in reused and amount == reused[i].amount})
    rejected = set()
    if has_rejects:
        a.rejected = len(reject_rows)
        per = Counter(i for i, _ in reject_rows)
        a.ids["reuse.rejected"] = sorted(per)
        stray = sorted({i for i, amount in reject_rows if i not in reused or amount != reused[i].amount})
        if stray:
            a.integrity.append((f"rejects: {len(stray)} id(s) rejected that are no reused request (another id or "
                                f"amount)", stray))
        twice = sorted(i for i, n in per.items() if n > 1)
        if twice:
            a.integrity.append((f"rejects: {len(twice)} id(s) rejected more than once", twice))
        rejected = {i for i, amount in reject_rows if i in reused and amount == reused[i].amount}
    reached = set(reused) if finished else {i for i, r in reused.items() if r.partition is not None
                                            and r.offset is not None and r.offset < committed.get(r.partition, 0)}
    reached |= rejected | set(applied)        # handled past the last commit: its trace says what became of it
    a.unreached = len(reused) - len(reached)
    a.ids["reuse.unreached"] = sorted(set(reused) - reached)
    hidden = sorted(i for i in reached if i not in rejected and i not in set(applied))
    a.applied, a.hidden = len(applied), len(hidden)
    a.ids.update({"reuse.applied": applied, "reuse.hidden": hidden})
    return a


def read_rejects(dsn: str, table: str) -> tuple[list | None, str | None]:
    """[(message_id, amount)] of the rejects table, or (None, why)."""
    from psycopg import sql
    from .ledger import _first_line
    from ..workload.sqlnames import table_identifier
    try:
        with pgconn.connect(dsn, connect_timeout=10) as conn:
            rows = conn.execute(sql.SQL("select message_id, amount from {}").format(table_identifier(table))).fetchall()
            return [(r[0], int(r[1])) for r in rows], None
    except Exception as e:  # noqa: BLE001 - report, never raise
        return None, _first_line(e)
