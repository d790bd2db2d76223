"""Jepsen's anomaly classes over the workers' histories and the topics' logs.

The ledger check counts effects per payment id; it cannot see a consumer that
skipped a record and was saved by a later redelivery, a read_committed reader
that saw a record of an aborted transaction (G1a, the KAFKA-17754 shape), or
an acknowledged write that no reader ever reached. Jepsen's Kafka checker
(jepsen.tests.kafka) finds those in a history of operations and the log; the
classes below carry its names so that users can look them up:

- lost-write: a write acknowledged (its transaction committed) at an offset
  below the highest offset a reader reached in its partition, never read;
- duplicate: one value at more than one offset (read_committed);
- inconsistent-offsets: one offset, two values, between any two sources
  (the final drains, the reader that ran during the run, the writers' acks);
- aborted-read: a read_committed reader saw a record whose transaction the
  writer aborted (or died in before it asked to commit), known from the
  writer's delivery report or, without one, from the record's own tag (our
  transactional writers put their worker, attempt and transaction number in
  each value);
- torn-transaction: a transaction some of whose records a read_committed
  reader saw and others (below where it read to) it did not: the shape of a
  paused client's delayed writes landing in the wrong transaction (KAFKA-17754);
- poll-skip: one consumer, two polls (no assignment or seek between), and
  records of the input log between them it was never given;
- nonmonotonic-poll: one consumer went back in a partition without a seek;
- nonmonotonic-send: one producer's acknowledged offsets went back in a partition;
- unseen: a committed write beyond where the final read_committed reader could go;
- out-of-order: an output partition that holds records in another order than
  its input partition (or a record in another partition than its input's),
  where the experiment promises the order (each record written to its
  input's partition, in the order polled);
- hanging-transaction: at the end, a partition whose last stable offset stays
  below its end: a transaction still open holds every read_committed reader
  back (what `kafka-transactions.sh find-hanging` looks for).

Each class is a count, the first witnesses (ids, partitions, offsets, the
process and its attempt, times) and whether the experiment allows it. A class
the run cannot check (no history of sends, a reader that failed) has no count
(None) and says why: never 0. Pure: `check` takes parsed histories and logs.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field

from .hanging_witness import holders

CLASSES = ("lost-write", "duplicate", "inconsistent-offsets", "aborted-read", "torn-transaction", "out-of-order",
           "poll-skip", "nonmonotonic-poll", "nonmonotonic-send", "unseen", "hanging-transaction")
MEANING = {
    "lost-write": "acknowledged (committed) write below the highest offset a reader reached, never read (its "
                  "offset empty, or holding another record)",
    "duplicate": "one value at more than one offset (read_committed)",
    "inconsistent-offsets": "one offset, two values",
    "aborted-read": "a read_committed reader saw a record of an aborted transaction (G1a)",
    "torn-transaction": "a read_committed reader saw some records of a transaction and not the others",
    "out-of-order": "an output partition holds records in another order than its input partition",
    "poll-skip": "a consumer was never given records between two of its polls",
    "nonmonotonic-poll": "a consumer went back in a partition without a seek",
    "nonmonotonic-send": "a producer's acknowledged offsets went back in a partition",
    "unseen": "a committed write the final read_committed reader never reached",
    "hanging-transaction": "a transaction still open at the end: the last stable offset stays below the end",
}
MAX_WITNESSES = 20
COMMITTED, ABORTED, UNKNOWN = "committed", "aborted", "unknown"


@dataclass
class Process:
    """One worker process's history (runtime/history.py): its ops in order, after the "open" line."""
    worker: str
    attempt: int
    ops: list = field(default_factory=list)
    lines_lost: int = 0          # lines of its file set aside as malformed: what they held is unknown

    @property
    def name(self) -> str:
        return f"{self.worker}/{self.attempt}"


@dataclass
class Logs:
    """What the readers saw of the output topic, each as {(partition, offset): key}; None when unread.
    `reached`: per partition, the offset the final read_committed reader got to (its position); `open_at`:
    {partition: (last stable offset, end)} of partitions a transaction was still open on ({}: none; None:
    not known); `tags`: {(partition, offset): (writer process, transaction number)} of every record in the
    log whose value names them (None: unread); `producers`: per open partition, the producers holding a
    transaction open there (id, epoch, its first offset), or why they are unknown (checker/open_transactions.py)."""
    committed: dict | None = None
    uncommitted: dict | None = None
    concurrent: dict | None = None
    reached: dict | None = None
    open_at: dict | None = None
    tags: dict | None = None
    producers: dict | None = None


@dataclass
class Found:
    name: str
    count: int | None
    allowed: bool = False
    witnesses: list = field(default_factory=list)
    unchecked: str | None = None      # why the run could not check this class

    def named(self) -> list[str]:
        """Each witness in a few words: its payment id, or where it is."""
        out = []
        for w in self.witnesses:
            if w.get("id") is not None:
                out.append(str(w["id"]))
            elif "visible" in w:
                out.append(f"{w.get('writer')} transaction {w.get('txn')}")
            elif "skipped_offsets" in w:
                out.append(f"{w['consumer']} partition {w['partition']} offsets {w['skipped_offsets'][0]}.."
                           f"{w['skipped_offsets'][-1]}")
            else:
                out.append(f"partition {w.get('partition')} offset {w.get('offset', w.get('got'))}")
        return sorted(set(out))

    def as_dict(self) -> dict:
        return {"count": self.count, "allowed": self.allowed, "meaning": MEANING[self.name],
                "witnesses": self.witnesses[:MAX_WITNESSES], "unchecked": self.unchecked}


@dataclass
class Send:
    process: str
    t: float
    topic: str
    partition: int
    offset: int
    key: str | None
    outcome: str = COMMITTED      # committed, aborted or unknown (a commit asked for, never answered)


# A transaction's last recorded step -> the outcome of its sends. "begin" last: the process ended before it
# asked to commit (no EndTxn(commit) was sent), so the transaction can only have been aborted.
OUTCOME_AFTER = {"commit": COMMITTED, "abort": ABORTED, "committing": UNKNOWN, "begin": ABORTED}


def sends_of(proc: Process, topic: str | None = None) -> list[Send]:
    """Every acknowledged send (to `topic`, when given) with its transaction's outcome: committed when
    commit_transaction returned, aborted when abort_transaction returned or the process ended before it
    asked to commit, unknown when it ended between asking and the answer (or its transaction was never
    seen to begin, or the file lost lines: a "begin" seen last may then hide the lines after it). A send
    outside any transaction is committed once acknowledged. An acknowledgement without a place in the log
    (librdkafka reports a duplicate sequence number as a success with no offset) is left out: it names
    no offset to check."""
    outcomes = txn_outcomes(proc)
    out = []
    for op in proc.ops:
        if op[1] == "send" and op[4] >= 0 and (topic is None or op[2] == topic):
            n = op[6]
            outcome = COMMITTED if n is None else outcomes.get(n, UNKNOWN)
            out.append(Send(proc.name, op[0], op[2], int(op[3]), int(op[4]), op[5], outcome))
    return out


def txn_outcomes(proc: Process) -> dict[int, str]:
    """{transaction number: committed, aborted or unknown} of one process, from its last recorded step."""
    last_step: dict = {}
    for op in proc.ops:
        if op[1] == "txn":
            last_step[op[3]] = op[2]
    after = dict(OUTCOME_AFTER, begin=UNKNOWN) if proc.lines_lost else OUTCOME_AFTER
    return {n: after.get(step, UNKNOWN) for n, step in last_step.items()}


def _witness(s: Send, **more) -> dict:
    return {"id": s.key, "partition": s.partition, "offset": s.offset, "writer": s.process, "t": s.t, **more}


def poll_anomalies(procs: list[Process], input_log: dict | None, topic: str) -> tuple[Found, Found]:
    """poll-skip and nonmonotonic-poll on `topic`, whose log is {partition: sorted offsets} (None: unknown).
    An "assign" or "seek" says where the next poll must start; a group's "join" only where it may not
    start before (the consumer fetches its committed offset again after the callback, and a commit may
    land between), so the first poll after it is not checked for a skip."""
    skips, backs = [], []
    for proc in procs:
        expected: dict[int, int] = {}
        loose: set = set()
        for op in proc.ops:
            kind = op[1]
            if kind in ("assign", "seek", "join") and op[2] == topic:
                expected.update({int(p): int(o) for p, o in op[3].items()})
                loose = (loose | {int(p) for p in op[3]}) if kind == "join" else (loose - {int(p) for p in op[3]})
            elif kind == "revoke" and op[2] == topic:
                for p in op[3]:
                    expected.pop(int(p), None)
            elif kind == "poll" and op[2] == topic:
                for p, runs in op[3].items():
                    p = int(p)
                    for first, last in runs:
                        want = expected.get(p)
                        if want is not None and first < want:
                            backs.append({"consumer": proc.name, "partition": p, "expected": want, "got": first,
                                          "t": op[0]})
                        elif want is not None and first > want and input_log is not None and p not in loose:
                            offs = input_log.get(p, ())
                            missed = offs[bisect.bisect_left(offs, want):bisect.bisect_left(offs, first)]
                            if missed:
                                skips.append({"consumer": proc.name, "partition": p, "skipped_offsets": missed[:20],
                                              "skipped": len(missed), "t": op[0]})
                        expected[p] = last + 1
                        loose.discard(p)
    skip = Found("poll-skip", len(skips), witnesses=skips) if input_log is not None else \
        Found("poll-skip", None, unchecked="the input log's offsets are unknown")
    return skip, Found("nonmonotonic-poll", len(backs), witnesses=backs)


READERS = (("final read_committed reader", "committed"), ("read_committed reader during the run", "concurrent"))


def tagged_aborted_reads(procs: list[Process], logs: Logs, already: set) -> list[dict]:
    """aborted-read witnesses from the records' own tags: a record a read_committed reader saw whose tag
    names a transaction its writer's history ended aborted (places in `already` are witnessed by a send)."""
    if not logs.tags:
        return []
    outcomes = {p.name: txn_outcomes(p) for p in procs}
    out = []
    for reader, attr in READERS:
        seen = getattr(logs, attr)
        for place, key in sorted((seen or {}).items()):
            tag = logs.tags.get(place)
            if tag is None or (reader, place) in already:
                continue
            writer, n = tag
            if outcomes.get(writer, {}).get(n) == ABORTED:
                out.append({"id": key, "partition": place[0], "offset": place[1], "writer": writer, "txn": n,
                            "reader": reader, "known_from": "the record's tag (no delivery report)"})
    return out


def torn_transactions(logs: Logs, tagged: bool = False) -> Found | None:
    """Transactions (by the writer and number their records are tagged with) that the final read_committed
    reader saw in part: some records below where it read to visible, others there not. A transaction with
    a record beyond where the reader got is not judged. None when the writers do not tag their records
    (`tagged` false and none tagged); unknown when they do and no tag could be read."""
    if not logs.tags:
        if not tagged:
            return None
        if logs.tags is None:
            return Found("torn-transaction", None, unchecked="the final read_uncommitted reader failed")
        if logs.uncommitted:
            return Found("torn-transaction", None, unchecked="no record of the output names its transaction")
        return Found("torn-transaction", 0)
    if logs.committed is None or logs.reached is None:
        return Found("torn-transaction", None, unchecked="the final read_committed reader failed")
    groups: dict = {}
    for place, tag in logs.tags.items():
        groups.setdefault(tag, []).append(place)
    torn = []
    for (writer, n), places in sorted(groups.items(), key=lambda kv: (str(kv[0][0]), kv[0][1])):
        if any(o >= logs.reached.get(p, 0) for p, o in places):
            continue
        seen = sorted(pl for pl in places if pl in logs.committed)
        unseen = sorted(pl for pl in places if pl not in logs.committed)
        if seen and unseen:
            torn.append({"writer": writer, "txn": n, "visible": [list(x) for x in seen[:10]],
                         "invisible": [list(x) for x in unseen[:10]], "records": len(places),
                         "partition": seen[0][0], "offset": seen[0][1]})
    return Found("torn-transaction", len(torn), witnesses=torn)


def send_anomalies(sends: list[Send], logs: Logs, procs: list[Process] = ()) -> list[Found]:
    """aborted-read, lost-write, unseen and nonmonotonic-send over the writers' acknowledged sends (and,
    for aborted-read, the records' tags)."""
    aborted, lost, unseen, backs = [], [], [], []
    last: dict[tuple, int] = {}
    for s in sends:
        k = (s.process, s.topic, s.partition)
        if k in last and s.offset <= last[k]:
            backs.append(_witness(s, previous_offset=last[k]))
        last[k] = max(last.get(k, -1), s.offset)
    for reader, attr in READERS:
        seen = getattr(logs, attr)
        for s in sends:
            if seen is not None and s.outcome == ABORTED and (s.partition, s.offset) in seen:
                aborted.append(_witness(s, reader=reader))
    aborted += tagged_aborted_reads(list(procs), logs, {(w["reader"], (w["partition"], w["offset"])) for w in aborted})
    if logs.committed is not None and logs.reached is not None:
        for s in sends:
            place = (s.partition, s.offset)
            if s.outcome != COMMITTED or (place in logs.committed and logs.committed[place] == s.key):
                continue            # there, or (another record at its offset) overwritten: lost below
            if s.offset < logs.reached.get(s.partition, 0):
                lost.append(_witness(s))
            elif s.partition not in (logs.open_at or {}):     # behind an open transaction: counted there
                unseen.append(_witness(s, reached=logs.reached.get(s.partition, 0)))
    unread = "the final read_committed reader failed" if logs.committed is None else None
    return [Found("aborted-read", len(aborted), witnesses=aborted)
            if logs.committed is not None or logs.concurrent is not None
            else Found("aborted-read", None, unchecked="no read_committed reader finished"),
            Found("lost-write", None if unread else len(lost), witnesses=lost, unchecked=unread),
            Found("unseen", None if unread else len(unseen), witnesses=unseen, unchecked=unread),
            Found("nonmonotonic-send", len(backs), witnesses=backs)]


def log_anomalies(logs: Logs, sends: list[Send] | None) -> list[Found]:
    """duplicate (read_committed) and inconsistent-offsets across every source that names an offset."""
    if logs.committed is None:
        dup = Found("duplicate", None, unchecked="the final read_committed reader failed")
    else:
        at: dict = {}
        for (p, o), key in logs.committed.items():
            at.setdefault(key, []).append([p, o])
        dups = [{"id": k, "at": sorted(v)} for k, v in sorted(at.items(), key=lambda kv: str(kv[0])) if len(v) > 1]
        dup = Found("duplicate", len(dups), witnesses=dups)
    sources = {"final read_committed reader": logs.committed, "final read_uncommitted reader": logs.uncommitted,
               "read_committed reader during the run": logs.concurrent,
               "writers' acknowledgements": {(s.partition, s.offset): s.key for s in sends or ()}}
    read = [(source, seen) for source, seen in sources.items() if seen]
    differ: dict = {}
    for i, (a, seen_a) in enumerate(read):            # each pair once, walking the smaller of the two
        for b, seen_b in read[i + 1:]:
            small, large = (seen_a, seen_b) if len(seen_a) <= len(seen_b) else (seen_b, seen_a)
            for place, key in small.items():
                if place in large and large[place] != key:
                    differ.setdefault(place, {}).update({a: seen_a[place], b: seen_b[place]})
    bad = [{"partition": p, "offset": o, "values": by} for (p, o), by in sorted(differ.items())]
    inconsistent = Found("inconsistent-offsets", len(bad), witnesses=bad) if len(read) >= 2 else \
        Found("inconsistent-offsets", None, unchecked="fewer than two sources named offsets")
    if logs.open_at is None:
        hanging = Found("hanging-transaction", None, unchecked="the last stable offsets are unknown")
    else:
        hanging = Found("hanging-transaction", len(logs.open_at), witnesses=[
            {"partition": p, "offset": lso, "last_stable_offset": lso, "high_watermark": hw,
             **holders((logs.producers or {}).get(p, "not asked"), logs.tags, p, lso)}
            for p, (lso, hw) in sorted(logs.open_at.items())])
    return [dup, inconsistent, hanging]


def out_of_order(committed: dict | None, positions: dict | None) -> Found:
    """Each output partition, as the final read_committed reader saw it, against the input: a record must sit
    in its input's partition, after every record of that partition that came before it in the input. Ids the
    input does not hold, and later copies of an id (the duplicate class counts them), are not judged."""
    if committed is None:
        return Found("out-of-order", None, unchecked="the final read_committed reader failed")
    if positions is None:
        return Found("out-of-order", None, unchecked="the input log's offsets are unknown")
    bad, last, seen = [], {}, set()
    for (p, o), key in sorted(committed.items()):
        where = positions.get(key)
        if where is None or (p, key) in seen:
            continue
        seen.add((p, key))
        ip, io = where
        if ip != p:
            bad.append({"id": key, "partition": p, "offset": o, "input_partition": ip, "input_offset": io})
        elif io < last.get(p, -1):
            bad.append({"id": key, "partition": p, "offset": o, "input_offset": io, "after_input_offset": last[p]})
        else:
            last[p] = io
    return Found("out-of-order", len(bad), witnesses=bad)


def check(procs: list[Process], input_topic: str, input_log: dict | None, logs: Logs | None,
          allowed: frozenset = frozenset(), output_topic: str | None = None, tagged: bool = False,
          ordered: bool = False, positions: dict | None = None) -> dict[str, Found]:
    """Every class the run can check. Poll classes need polls of the input; send classes need an output
    topic with the writers' sends recorded; the others need an output topic. A class that does not apply
    to the run is absent; one that applies and cannot be checked has count None and says why. `tagged`:
    the writers name each output record's transaction in its value; `ordered`: the experiment promises each
    output partition its input partition's order, judged against `positions` ({id: (input partition,
    offset)})."""
    out: dict[str, Found] = {}
    if any(op[1] == "poll" for p in procs for op in p.ops):
        for f in poll_anomalies(procs, input_log, input_topic):
            out[f.name] = f
    if logs is not None:
        sends = [s for p in procs for s in sends_of(p, output_topic)]
        recorded = any(op[1] in ("send", "send-error") for p in procs for op in p.ops)
        for f in log_anomalies(logs, sends if recorded else None) + (send_anomalies(sends, logs, procs)
                                                                      if recorded else []):
            out[f.name] = f
        acked = [op for p in procs for op in p.ops if op[1] == "send" and (output_topic is None or op[2] == output_topic)]
        if acked and not sends:         # acknowledged, and none names its offset (acks=0): nothing was checked
            for name in ("lost-write", "unseen", "nonmonotonic-send"):
                out[name] = Found(name, None, unchecked="no acknowledgement named an offset (acks=0 returns none)")
        if not recorded and logs.tags and (logs.committed is not None or logs.concurrent is not None):
            # no delivery report (every writer died first): the tags name the transactions, the histories their ends
            ends = any(op[1] == "txn" for p in procs for op in p.ops)
            found = tagged_aborted_reads(procs, logs, set()) if ends else []
            out["aborted-read"] = Found("aborted-read", len(found) if ends else None, witnesses=found,
                                        unchecked=None if ends else "no writer's history says how its transactions ended")
        if ordered:
            out["out-of-order"] = out_of_order(logs.committed, positions)
        if (torn := torn_transactions(logs, tagged)) is not None:
            out[torn.name] = torn
    for f in out.values():
        f.allowed = f.name in allowed
    return {name: out[name] for name in CLASSES if name in out}
