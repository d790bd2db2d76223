"""The run's share group in numbers, and what its evidence says: pure, so the predictors may read it.

The settings the run gives its share group (lock, session, delivery-count
limit), how the family's input is produced and polled, and the reading of the
evidence the members leave: the records some acknowledgement settled (the
events' `accepted` and `rejected`) and the records a death left at the
delivery-count limit (a crash record's `held`), which the broker archives.
No client, no connection: share_worker.py uses these to run, the predictors
(share_predictors.py) to predict.
"""

import json

LOCK_MS = 3000             # share.record.lock.duration.ms of the run's group (Kafka's default: 30000)
SESSION_MS = 3000          # share.session.timeout.ms (default 45000): a dead member's partitions move on after it
DELIVERY_LIMIT = 5         # share.delivery.count.limit: Kafka's default (--delivery-limit), said in the reports
DELIVERY_LIMIT_RANGE = (2, 10)   # what a group may set: the broker's group.share.{min,max}.delivery.count.limit
GROUP_CONFIG = {
    "share.record.lock.duration.ms": str(LOCK_MS),
    "share.session.timeout.ms": str(SESSION_MS),
    "share.heartbeat.interval.ms": "500",
    "share.auto.offset.reset": "earliest",
    "share.delivery.count.limit": str(DELIVERY_LIMIT),
}
POLL_TIMEOUT_S = 0.2
POLL_RECORDS = 10          # max.poll.records: what one crash holds at most (with one-record batches)
PRODUCER = {"linger.ms": 0, "batch.num.messages": 1}
# The queue counts as done only from acknowledgements the workers announced. One a worker had confirmed but
# not yet announced when an undescribed death struck would keep the run waiting: after this long with no
# record polled by this worker, and the events short of the input, it gives up waiting and says so.
QUIET_S = 6 * (LOCK_MS + SESSION_MS) / 1000


SETTLING = (b'"accepted"', b'"rejected"')
TRANSIENT, PERMANENT = "transient", "permanent"     # share-release's seeded errors


def error_kinds(planned) -> dict:
    """share-release: payment id -> the error its delivery meets, for the crash plan's (seeded) payments: every
    other one in id order a transient error (RELEASE: it comes again), the others a permanent one (REJECT)."""
    return {i: TRANSIENT if n % 2 == 0 else PERMANENT for n, i in enumerate(sorted(planned))}


def limit_of(params) -> int:
    """The run's delivery-count limit: its --delivery-limit (run options or a worker's options), else Kafka's
    default."""
    given = params.get("delivery_limit") if isinstance(params, dict) else getattr(params, "delivery_limit", None)
    return int(given) if given else DELIVERY_LIMIT


def dead_letter_on(params) -> bool:
    """The run asked for a dead-letter topic (--dead-letter on, share_dead_letter.py)."""
    given = params.get("dead_letter") if isinstance(params, dict) else getattr(params, "dead_letter", None)
    return given == "on"


def settled_records(events_path, kinds: tuple = ("accepted", "rejected")) -> set:
    """The (partition, offset) of every record some member's acknowledgement settled for good (accepted or
    rejected; `kinds` names fewer), from the run's events file."""
    out = set()
    try:
        with open(events_path, "rb") as f:
            for line in f:
                if not any(s in line for s in SETTLING):
                    continue
                try:
                    e = json.loads(line)
                except ValueError:
                    continue
                if e.get("event") in kinds:
                    out.update((r[0], r[1]) for r in e.get("records") or ())
    except OSError:
        pass
    return out


def archived(crash: dict, limit: int = DELIVERY_LIMIT) -> dict:
    """payment id -> (partition, offset) of the records a crash left at the delivery-count limit: archived."""
    held = crash.get("held")
    return {i: (v[0], v[1]) for i, v in held.items() if len(v) > 2 and v[2] >= limit} \
        if isinstance(held, dict) else {}


def archived_records(crash_log, limit: int = DELIVERY_LIMIT) -> set:
    """The (partition, offset) of every record the crash log shows archived."""
    from ...runtime import crashlog
    return {po for c in crashlog.read(crash_log) for po in archived(c, limit).values()}


def unseen_after(crashes: list, events: list, limit: int = DELIVERY_LIMIT) -> list:
    """The payments a crash left to come again (held below the limit, not ACCEPTed-and-unapplied) that no
    member was seen with at a later delivery: no acknowledgement event at that delivery count or above, no
    later crash holding them. The broker counts a delivery when it hands records out, and a member's client
    can hold records its worker has not polled yet: a member that dies, or whose lock expires, with such
    records unpolled spends deliveries nobody lists, and a record can reach the limit and be archived unseen.
    Whether such a payment ran its effect once more is unknown. Sorted ids."""
    last, unapplied = {}, set()
    for c in crashes:
        unapplied.update(i for i in c.get("acked_unapplied") or () if isinstance(i, str))
        held = c.get("held") if isinstance(c.get("held"), dict) else {}
        for i, v in held.items():
            if isinstance(v, (list, tuple)) and len(v) > 2 and isinstance(v[2], int) and \
                    (i not in last or v[2] > last[i][2]):
                last[i] = (v[0], v[1], v[2])
    seen = {}
    for e in events:
        if e.get("event") in ("accepted", "rejected", "released"):
            for r in e.get("records") or ():
                if isinstance(r, (list, tuple)) and len(r) > 2 and isinstance(r[2], int):
                    seen[(r[0], r[1])] = max(seen.get((r[0], r[1]), 0), r[2])
    # settled: acknowledged at that delivery (by the member itself, before it died) or at a later one
    return sorted(i for i, (part, off, n) in last.items()
                  if n < limit and i not in unapplied and seen.get((part, off), 0) < n)
