"""Who holds a hanging partition open, as its witness names it: pure, so the checker judges without a connection.

A hanging partition (anomalies.py) says that a transaction is open, not whose. Two things name its
owner: the brokers' answer (open_transactions.py: each open transaction's producer id, epoch and first
offset, and its transactional.id where ListTransactions lists it), and the first record of each open
transaction, whose value our transactional workers tag with their worker and attempt (a custom consumer
may tag its own the same way). The report ties a transaction to a worker the harness's stop killed by
these (reporting/stop_excuse.py).
"""

from __future__ import annotations


def holders(described, tags: dict | None, partition: int, lso: int) -> dict:
    """A hanging partition's witness fields naming who holds it open: the writer the record at its last stable
    offset names in its value (our transactional workers tag each record with their worker and attempt), and
    each open transaction's producer (id, epoch, first offset, its transactional.id where ListTransactions
    listed it, the writer its first record names), or why the producers are unknown."""
    def writer(offset):
        tag = (tags or {}).get((partition, offset))
        return tag[0] if tag else None
    out = {"writer": writer(lso)} if writer(lso) else {}
    if isinstance(described, str):
        return {**out, "producers": None, "producers_unknown": described}
    return {**out, "producers": [{**{k: d.get(k) for k in ("producer_id", "producer_epoch", "transaction_start_offset",
                                                           "last_timestamp", "transactional_id")},
                                  "first_record_writer": writer(d.get("transaction_start_offset"))}
                                 for d in described[:5]]}
