"""Which transactions still open at the end the harness's own stop left: tied by identity, never by count.

An interrupt or a time limit SIGKILLs the busy workers where they stand, often inside a transaction.
Such a transaction is the harness's doing, not an anomaly of the system under test, but only when its
evidence ties it to a worker the stop killed. Counting is not enough: a consumer whose own bug leaves
a transaction hanging while the stop also killed a worker would be excused. A hanging partition's
witness (checker/anomalies.py) names who holds it open: each open transaction's producer id, epoch,
first offset and, where Kafka's ListTransactions lists it, its transactional.id, and the writer its
first record names in its value (worker and attempt, as our transactional workers tag every record).
A transaction is tied when its transactional.id is one the stop's entry for a killed worker names
(`verdict_detail.killed_at_stop[].transactional_ids`: ours, as the launchers know them; or of a worker whose
planned crash came just before the stop, with no successor to fence it: `unrestarted_at_stop`), or when its
first record names a worker attempt the stop killed. A partition is the stop's when every transaction
known to be open on it is tied; with its producers unknown, the one known is the transaction its last
stable offset starts. Anything else stays a forbidden anomaly with its evidence, and says why: owner
unknown, or named and not killed by the stop. Pure: it reads report data.
"""

from __future__ import annotations


def stop_excuses(d: dict) -> list[dict]:
    """One entry per hanging partition when the stop SIGKILLed workers (empty when it killed none):
    {partition, offset, excused, why, unrestarted}; `unrestarted`: a tie is to a worker whose crash the stop left
    without a successor, not one it killed. Partitions the witnesses leave out (the cap) are not excused."""
    vd = d.get("verdict_detail") or {}
    stopped = [x for x in vd.get("killed_at_stop") or [] if isinstance(x, dict)]
    ended = [{**x, "ended": True} for x in vd.get("unrestarted_at_stop") or [] if isinstance(x, dict)]
    klass = ((d.get("anomaly_classes") or {}).get("classes") or {}).get("hanging-transaction") or {}
    if not (stopped or ended) or not klass.get("count"):
        return []
    by_id = {str(t): x for x in stopped + ended for t in (x.get("transactional_ids") or [])}
    by_writer = {f"{x.get('worker')}/{x.get('attempt')}": x for x in stopped + ended}
    out = []
    for w in (klass.get("witnesses") or [])[:klass["count"]]:
        if not isinstance(w, dict):
            continue
        producers = w.get("producers")
        known = producers if isinstance(producers, list) and producers else \
            [{"transaction_start_offset": w.get("offset"), "first_record_writer": w.get("writer")}]
        ties = [_tie(p, by_id, by_writer) for p in known if isinstance(p, dict)]
        excused = bool(ties) and all(t[0] for t in ties)
        unrestarted = excused and any(t[2] for t in ties)
        why = "; ".join(t[1] for t in ties) or "owner unknown: nothing names who holds it open"
        if not isinstance(producers, list) or not producers:
            why += f" (its producers: {w.get('producers_unknown') or 'none described'})"
        out.append({"partition": w.get("partition"), "offset": w.get("offset"), "excused": excused, "why": why,
                    "unrestarted": unrestarted})
    return out


def _tie(p: dict, by_id: dict, by_writer: dict) -> tuple[bool, str, bool]:
    """(tied to a worker of the stop, why, that worker's crash was left without a successor) for one open
    transaction as its witness describes it."""
    tid, writer = p.get("transactional_id"), p.get("first_record_writer")
    who = ", ".join(f"{name} {p[k]}" for k, name in (("producer_id", "producer id"), ("transactional_id",
                                                     "transactional.id")) if p.get(k) is not None)
    start = f"from offset {p.get('transaction_start_offset')}" + (f" ({who})" if who else "")
    x = by_id.get(str(tid)) if tid is not None else None
    if x is not None:
        return True, f"{start}: the transactional.id of {x.get('worker')} attempt {x.get('attempt')}, " + \
            ("whose crash the stop left without a successor" if x.get("ended") else "killed by the stop"), \
            bool(x.get("ended"))
    x = by_writer.get(str(writer)) if writer is not None else None
    if x is not None:
        return True, f"{start}: its first record names {writer}, " + \
            ("whose crash the stop left without a successor" if x.get("ended") else "killed by the stop"), \
            bool(x.get("ended"))
    if tid is None and writer is None:
        return False, f"{start}: owner unknown (no transactional.id listed, its first record names no writer)", False
    return False, f"{start}: " + (f"first record by {writer}, " if writer is not None else "") + \
        "not a worker the stop killed", False


def left_open_by_stop(d: dict) -> int:
    """How many of the run's hanging partitions its own stop left (stop_excuses): 0 when it killed no worker."""
    return sum(1 for e in stop_excuses(d) if e["excused"])


def unexcused(d: dict, excuses: list[dict] | None = None) -> int | None:
    """The hanging-transaction count the system under test answers for (None when it is unknown); `excuses`:
    stop_excuses(d) when the caller has them already."""
    count = (((d.get("anomaly_classes") or {}).get("classes") or {}).get("hanging-transaction") or {}).get("count")
    if not isinstance(count, int):
        return count
    return count - (left_open_by_stop(d) if excuses is None else sum(1 for e in excuses if e["excused"]))
