"""Observe a finished run: read its stores and turn them into the observations the verdict judges.

This is the run's own count, taken as it ends (the first step of the checker's
pipeline: observe -> predict -> judge). `harness audit` is the other count, a
recount from the stack at any later time (recount.py, crosscheck.py).

Reads each store the experiment declares (the ledger, dedupe and accounts
tables in Postgres, the output topic under read_committed and read_uncommitted, a
service's rows, outbox and events topic), counts
effects per id, checks each effect against its payment, and splits ids with
no effect into `lost` (acknowledged, never applied) and `unprocessed` (the run
stopped before acknowledging them: an interrupted run is not a lossy one).
Whatever could not be read is None with its error, never 0. An output topic a
consumer may leave unused (`Stores.output_if_written`) is audited only when it
holds records.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from . import anomalies as anomaly_classes
from . import deliveries as delivery_log
from . import output_watcher
from .foreign import placements, read_foreign
from .effects import EffectCounts, count_effects, integrity, split_missing
from .accounts import audit_accounts, read_accounts
from .kafka_output import audit_output, audited, read_ids
from .ledger import LedgerRows, read_ledger
from .verdict import Evidence

ISOLATIONS = ("read_committed", "read_uncommitted")


@dataclass
class StoreCounts:
    effects: int | None
    duplicates: int | None
    lost: int | None
    unprocessed: int | None
    duplicate_ids: list = field(default_factory=list)
    lost_ids: list = field(default_factory=list)
    unexpected_ids: list = field(default_factory=list)
    unprocessed_ids: list = field(default_factory=list)
    per_id: dict = field(default_factory=dict)


UNKNOWN = StoreCounts(None, None, None, None)


@dataclass
class Observation:
    ledger: StoreCounts | None = None
    ledger_total: int | None = None
    dedupe_hits: int | None = None
    dedupe_keys: int | None = None        # rows of the dedupe table (None: no table, unreadable, or purged keys)
    output: dict | None = None            # per isolation: StoreCounts; plus "aborted_records"
    accounts: list | None = None          # per account: {account, expected, actual, version, stale_updates}
    service: object = None                # a service's rows, outbox and events (checker/systems.py)
    reuse: object = None                  # what became of the requests produced under a used key (checker/reused_keys.py)
    anomalies: dict | None = None         # class name -> anomalies.Found, over the histories and the logs
    history: dict | None = None           # what the histories held: processes, operations, lines set aside
    during_run: dict | None = None        # per output partition, what the read_committed reader during the run saw
    foreign: object = None                # input records the run's producer did not write (checker/foreign.py)
    dead_letter: object = None            # a queues run's dead letters (experiments/queues/share_dead_letter.py)
    metrics: dict = field(default_factory=dict)
    evidence: Evidence = field(default_factory=Evidence)

    def headline(self) -> StoreCounts:
        """The numbers a person reads first: the ledger when there is one, else read_committed output."""
        if self.ledger is not None:
            return self.ledger
        return self.output["read_committed"] if self.output else UNKNOWN


def _split(c: EffectCounts, positions, committed, finished: bool) -> StoreCounts:
    if committed is None and not finished:
        # Without the committed offsets an unfinished run cannot tell lost from not yet processed.
        return StoreCounts(c.effects, c.duplicates, None, None, c.duplicate_ids, [], c.unexpected_ids, [], c.per_id)
    lost, unprocessed = split_missing(c.lost_ids, positions, committed if not finished else None)
    return StoreCounts(c.effects, c.duplicates, len(lost), len(unprocessed), c.duplicate_ids, lost,
                       c.unexpected_ids, unprocessed, c.per_id)


def _counts(kout: dict) -> list:
    """Each reader's record count, None for a reader that failed."""
    return [None if kout[iso].get("error") else kout[iso].get("records") or 0 for iso in ISOLATIONS]


def observe_run(exp, stack, names, amounts: dict, positions: dict | None, committed: dict | None,
              finished: bool, ledger_reader=read_ledger, output_reader=audit_output, accounts: dict | None = None,
              accounts_reader=read_accounts, deliveries: "delivery_log.DeliveryLog | None" = None,
              order_reader=read_ids, histories=None, concurrent: dict | None = None,
              reused: dict | None = None, secret: bytes | None = None, foreign_reader=read_foreign,
              dead_letter_reader=None) -> Observation:
    """`histories`: the workers' (checker/histories.py), None when the run kept none; `concurrent`:
    {(partition, offset): key} of the output topic as a read_committed reader saw it during the run;
    `reused`: id -> the request the run produced again under that id (workload/reused_payments.py); `secret`: the
    run's producer's (workload/signature.py): the input topic is read for records it did not write, copies of
    its own at places it was not acknowledged for (`positions`, `reused`) included; `dead_letter_reader()`: a
    queues run's dead letters, whose payments are dead-lettered, not lost."""
    a = Observation()
    if secret is not None:
        a.foreign = foreign_reader(stack.bootstrap_servers, names.input_topic, secret,
                                   placements(positions, reused))
        if a.foreign.error:
            a.evidence.errors.append(a.foreign.error)
        elif a.foreign.failure():
            a.evidence.integrity.append(a.foreign.failure())
    kout = None
    sent = list(amounts)
    if exp.stores.ledger:
        # A dedupe table whose keys the worker purges has lost the hit counts of the purged keys: not evidence.
        counted_dedupe = exp.stores.dedupe and not exp.stores.dedupe_expires
        rows: LedgerRows = ledger_reader(stack.postgres_dsn, names.ledger_table,
                                         names.dedupe_table if counted_dedupe else None)
        if rows.rows is None:
            a.ledger = UNKNOWN
            a.evidence.errors.append(f"ledger: {rows.error}")
        else:
            a.ledger = _split(count_effects(sent, [r[0] for r in rows.rows]), positions, committed, finished)
            integ = integrity(amounts, rows.rows)
            a.ledger_total = integ.actual_total
            a.evidence.integrity += integ.failures("ledger")
            a.evidence.ledger_per_id = a.ledger.per_id
            a.evidence.ledger_lost_ids = a.ledger.lost_ids if a.ledger.lost is not None else None
        if counted_dedupe:
            if rows.dedupe_rows is None:
                a.evidence.errors.append(f"dedupe table: {rows.dedupe_error}")
            else:
                a.dedupe_hits = rows.dedupe_hits
                a.dedupe_keys = len(rows.dedupe_rows)
                per_id: dict = {}              # a table without a unique key may hold a key twice
                for i, h in rows.dedupe_rows:
                    per_id[i] = per_id.get(i, 0) + h
                a.evidence.dedupe_hits_per_id = per_id
        if dead_letter_reader is not None:
            _dead_letters(a, dead_letter_reader())
        a.metrics.update({"ledger.duplicates": a.ledger.duplicates, "ledger.lost": a.ledger.lost,
                          "ledger.dedupe_hits": a.dedupe_hits})
        a.evidence.ids.update({"ledger.duplicates": a.ledger.duplicate_ids, "ledger.lost": a.ledger.lost_ids})
        if reused or exp.stores.rejects:
            _observe_reuse(a, exp, stack, names, reused or {}, rows.rows, finished, committed)
    if exp.stores.accounts:
        audit_accounts(a, accounts_reader(stack.postgres_dsn, names.accounts_table), amounts, accounts or {},
                       hits_from_accounts=not exp.stores.dedupe)
    if exp.stores.output_topic:
        kout = output_reader(stack.bootstrap_servers, names.output_topic, sent, amounts)
        if not audited(exp.stores.output, _counts(kout)):
            kout = None                    # an optional output topic nobody wrote to: nothing to audit
    if kout is not None:
        a.output = {"aborted_records": kout.get("aborted_records")}
        for iso in ISOLATIONS:
            k = kout[iso]
            if k.get("error"):
                a.output[iso] = UNKNOWN
                a.evidence.errors.append(f"output {iso}: {k['error']}")
            else:
                c = EffectCounts(k["records"], k["duplicates"], k["lost"], len(k.get("unexpected_ids") or []),
                                 k["duplicate_ids"], k["lost_ids"],
                                 k.get("unexpected_ids") or [], k.get("per_id") or {})
                a.output[iso] = _split(c, positions, committed, finished)
                if k.get("unexpected_ids"):
                    a.evidence.integrity.append((f"kafka.{iso} ids never sent: {len(k['unexpected_ids'])} id(s) "
                                                 f"with records but no payment", k["unexpected_ids"]))
                if k.get("bad_value_ids"):
                    a.evidence.integrity.append((f"kafka.{iso} values: {len(k['bad_value_ids'])} id(s) with a "
                                                 f"record whose value does not match its payment", k["bad_value_ids"]))
            a.metrics[f"kafka.{iso}.duplicates"] = a.output[iso].duplicates
            a.metrics[f"kafka.{iso}.lost"] = a.output[iso].lost
            a.evidence.ids.update({f"kafka.{iso}.duplicates": a.output[iso].duplicate_ids,
                                   f"kafka.{iso}.lost": a.output[iso].lost_ids})
        if a.output["read_uncommitted"] is not UNKNOWN:
            a.evidence.uncommitted_per_id = a.output["read_uncommitted"].per_id
    if exp.stores.deliveries and exp.stores.output:
        _audit_deliveries(a, stack, names, deliveries, positions, sent, order_reader)
    if exp.stores.events:
        from .systems import audit_service
        a.service = svc = audit_service(exp, stack, names, amounts)
        a.metrics.update(svc.metrics())
        a.evidence.ids.update(svc.ids)
        a.evidence.integrity += svc.integrity
        a.evidence.errors += svc.errors
    if exp.stores.output:
        a.during_run = output_watcher.reach_of(concurrent)
    if histories is not None:
        _check_histories(a, exp, names, histories, positions, kout, concurrent, reused)
    return a


def _dead_letters(a: Observation, found) -> None:
    """A payment without an effect whose record the dead-letter topic holds is dead-lettered, not lost; with the
    topic unreadable, lost and dead-lettered are both unknown (the missing ids stay named, as lost)."""
    a.dead_letter = found
    if found.error is not None:
        a.evidence.errors.append(found.error)
        a.metrics["ledger.dead_lettered"] = None
        if a.ledger.lost is not None:
            a.ledger = replace(a.ledger, lost=None)
        return
    if a.ledger.lost is None:
        a.metrics["ledger.dead_lettered"] = None
        return
    lost, dead = split_dead_lettered(a.ledger.lost_ids, found.by_id)
    a.ledger = replace(a.ledger, lost=len(lost), lost_ids=lost)
    a.evidence.ledger_lost_ids = lost
    a.metrics["ledger.dead_lettered"] = len(dead)
    a.evidence.ids["ledger.dead_lettered"] = dead


def split_dead_lettered(lost_ids, dead_letters: dict) -> tuple[list, list]:
    """(still lost, dead-lettered) of the ids without an effect: dead-lettered when `dead_letters` (payment id ->
    its dead letter) holds one, lost otherwise (archived without a dead letter, or ACCEPTed and never applied)."""
    return [i for i in lost_ids if i not in dead_letters], [i for i in lost_ids if i in dead_letters]


def _observe_reuse(a: Observation, exp, stack, names, reused: dict, ledger_rows, finished: bool,
                   committed: dict | None) -> None:
    from . import reused_keys as reuse
    reject_rows = None
    if exp.stores.rejects:
        reject_rows, err = reuse.read_rejects(stack.postgres_dsn, names.rejects_table)
        if err:
            a.evidence.errors.append(f"rejects table: {err}")
    a.reuse = found = reuse.compare(reused, ledger_rows, reject_rows, exp.stores.rejects, finished, committed)
    a.metrics.update(found.metrics())
    a.evidence.ids.update(found.ids)
    a.evidence.integrity += found.integrity


def _check_histories(a: Observation, exp, names, histories, positions: dict | None, kout: dict | None,
                     concurrent: dict | None, reused: dict | None = None) -> None:
    """Jepsen's anomaly classes over the histories, the input log (where each payment was acknowledged)
    and the output topic's readers; each forbidden class becomes a metric the verdict holds to 0."""
    input_log = None
    if positions:
        input_log = {}
        for p, o in list(positions.values()) + [(r.partition, r.offset) for r in (reused or {}).values()
                                                if r.partition is not None]:
            input_log.setdefault(p, []).append(o)
        input_log = {p: sorted(offs) for p, offs in input_log.items()}
    logs = None
    if kout is not None:
        rc, ru = kout["read_committed"], kout["read_uncommitted"]
        logs = anomaly_classes.Logs(rc.get("at") if not rc.get("error") else None,
                                    ru.get("at") if not ru.get("error") else None, concurrent,
                                    rc.get("reached") if not rc.get("error") else None,
                                    kout.get("open_transactions"), ru.get("tags") if not ru.get("error") else None,
                                    kout.get("open_transaction_producers"))
    from . import write_outcomes as outcomes
    a.history = {"processes": len(histories.processes), "operations": histories.ops(),
                 "bad_lines": histories.bad_lines, "problems": histories.problems[:20],
                 "outcomes": outcomes.count(histories.processes, names.output_topic)}
    try:
        a.anomalies = anomaly_classes.check(histories.processes, names.input_topic, input_log, logs, exp.allows,
                                            names.output_topic, exp.tagged_output, exp.ordered_output, positions)
    except Exception as e:  # noqa: BLE001 - the run keeps its report; the classes say they were not checked
        why = f"the checker failed: {type(e).__name__}: {str(e)[:200]}"
        a.anomalies = {n: anomaly_classes.Found(n, None, unchecked=why) for n in anomaly_classes.CLASSES}
        return
    if histories.problems or histories.bad_lines:
        partial = (f"the histories are incomplete ({histories.bad_lines} lines set aside, "
                   f"{len(histories.problems)} files unread): the counts cover what could be read")
        for f in a.anomalies.values():
            f.unchecked = f.unchecked or partial


def _audit_deliveries(a: Observation, stack, names, log, positions: dict | None, sent: list, order_reader) -> None:
    """The producer under test: `lost` is what the broker acknowledged and the topic lacks; what was never
    acknowledged (a failed or missing delivery report) is set aside as `unprocessed`, not lost."""
    a.metrics.update({"producer.acked": None, "producer.unacked": None, "producer.reordered": None})
    if log is None or log.error:
        a.evidence.errors.append(log.error if log else "no delivery log")
        for iso in ISOLATIONS:
            a.metrics[f"kafka.{iso}.lost"] = None
        return
    a.metrics["producer.acked"] = len(log.acked)
    a.metrics["producer.unacked"] = sum(1 for i in sent if i not in log.acked)
    for iso in ISOLATIONS:
        c = a.output[iso]
        if c is UNKNOWN or c.lost is None:
            continue
        missing = list(c.lost_ids) + list(c.unprocessed_ids)
        lost = sorted(i for i in missing if i in log.acked)
        unacked = sorted(i for i in missing if i not in log.acked)
        a.output[iso] = replace(c, lost=len(lost), lost_ids=lost, unprocessed=len(unacked), unprocessed_ids=unacked)
        a.metrics[f"kafka.{iso}.lost"] = len(lost)
        a.evidence.ids[f"kafka.{iso}.lost"] = lost
    records, err = order_reader(stack.bootstrap_servers, names.output_topic, "read_uncommitted")
    if err or positions is None:
        a.evidence.errors.append(f"output order: {err or 'input positions unknown'}")
        return
    moved = delivery_log.reordered([r[0] for r in records], positions)
    a.metrics["producer.reordered"] = len(moved)
    a.evidence.ids["producer.reordered"] = moved
