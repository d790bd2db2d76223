"""Set a run's report beside an independent recount, row by row (`harness audit`).

Pure: the report is its JSON, the recount is what `recount` measured. Each
row is one number both sides can state; a row agrees when they are equal. A
number the report does not state (an unknown, a store it has no figure for)
is shown and not judged. For a row that differs, the evidence is the ids the
recount finds that the report accounts for nowhere: not among the ids it
lists (capped at 20 per check) and not in any of its crash records (the
payment a worker died on, and its unacked, acked-but-unapplied and produced
lists).
"""

from dataclasses import dataclass, field

MAX_IDS = 20


@dataclass
class Row:
    store: str
    metric: str
    reported: int | None
    recounted: int | None
    ids: list = field(default_factory=list)    # recount's ids the report did not name, when they differ
    ids_are: str = "ids the report accounts for nowhere"    # what `ids` lists, for a row that differs

    @property
    def agrees(self) -> bool | None:
        if self.reported is None or self.recounted is None:
            return None
        return self.reported == self.recounted


def _plus(*xs):
    return None if any(x is None for x in xs) else sum(xs)


def _new_ids(found: list, named: list, crashed: set) -> list:
    named = set(named or []) | crashed
    return sorted(i for i in found if i not in named)[:MAX_IDS]


def crash_ids(report: dict) -> set:
    """Every id a crash record of the report names."""
    out = set()
    for c in report.get("crashes") or []:
        out.add(c.get("message_id"))
        for key in ("unacked", "acked_unapplied", "produced"):
            out.update(c.get(key) or [])
    out.discard(None)
    return out


def compare(report: dict, sent: dict, ledger=None, outputs: dict | None = None, service=None,
            accounts=None, reuse=None, dead_letters: set | None = None) -> list[Row]:
    """Rows for the input, the ledger (with its dedupe table), a service's stores, the accounts and each
    output isolation."""
    c, an, vd = report.get("counts") or {}, report.get("anomalies") or {}, report.get("verdict_detail") or {}
    judged = report.get("verdict") not in ("audit-failed", None)
    totals = vd.get("differing_totals") or {}
    crashed = crash_ids(report)
    rows = [Row("input", "payments sent", c.get("sent"), len(sent))]
    if ledger is not None:
        effects_row = Row("ledger", "effects", c.get("effects"), ledger.effects)
        dup = Row("ledger", "duplicated effects", c.get("duplicates"), ledger.duplicates)
        dead = "dead_lettered" in c      # a queues run with a dead-letter topic: those are not lost
        missing = Row("ledger", "ids without an effect (lost + unprocessed" + (" + dead-lettered)" if dead else ")"),
                      _plus(c.get("lost"), c.get("unprocessed"), *([c["dead_lettered"]] if dead else [])),
                      len(ledger.missing_ids))
        stray = Row("ledger", "ids never sent", totals.get("ledger ids never sent", 0) if judged else None,
                    len(ledger.stray_ids))
        wrong = Row("ledger", "ids with a wrong amount", totals.get("ledger amounts", 0) if judged else None,
                    len(ledger.wrong_amount_ids))
        total = Row("ledger", "total amount", (report.get("ledger") or {}).get("actual_total"), ledger.total)
        dup.ids = _new_ids(ledger.duplicate_ids, an.get("duplicate_ids"), crashed)
        missing.ids = _new_ids(ledger.missing_ids, (an.get("lost_ids") or []) + (an.get("unprocessed_ids") or []), crashed)
        stray.ids = _new_ids(ledger.stray_ids, (vd.get("differing_ids") or {}).get("ledger ids never sent"), crashed)
        wrong.ids = _new_ids(ledger.wrong_amount_ids, (vd.get("differing_ids") or {}).get("ledger amounts"), crashed)
        total.ids = sorted(set(dup.ids + missing.ids + stray.ids + wrong.ids))[:MAX_IDS]
        effects_row.ids = total.ids
        rows += [effects_row, dup, missing, stray, wrong, total]
        if dead_letters is not None:
            found = sorted(set(ledger.missing_ids) & dead_letters)
            row = Row("dead-letter topic", "payments dead-lettered (no effect, a dead letter there)",
                      c.get("dead_lettered"), len(found))
            named = [x.get("message_id") for x in (report.get("dead_letter") or {}).get("dead_lettered") or []]
            row.ids = _new_ids(found, named, crashed)
            rows.append(row)
        if ledger.dedupe_keys is not None:
            led = report.get("ledger") or {}
            if "dedupe_keys" in led:
                # The keys the run's audit counted: not always one per id with an effect (a key recorded
                # before its effect stays for a payment lost; a key minted per attempt, one per effect).
                rows.append(Row("dedupe table", "keys", led["dedupe_keys"], ledger.dedupe_keys))
            else:       # a report from before it stated its keys: dedupe's keys are the ids with an effect
                applied = None if c.get("effects") is None or c.get("duplicates") is None \
                    else c["effects"] - c["duplicates"]
                rows.append(Row("dedupe table", "keys (= ids with an effect)", applied, ledger.dedupe_keys))
            rows.append(Row("dedupe table", "hits (deliveries that found their key)", c.get("dedupe_hits"), ledger.dedupe_hits))
    if service is not None:
        rows += service_rows(report.get("service") or {}, service, crashed)
    if accounts is not None:
        rows += account_rows(report.get("accounts") or {}, accounts)
    if reuse is not None:
        rows += reuse_rows(report.get("reuse") or {}, reuse)
    ko = report.get("kafka_output") or {}
    for iso, out in (outputs or {}).items():
        rep = ko.get(iso) or {}
        dup = Row(f"output {iso}", "duplicated records", rep.get("duplicates"), out.duplicates)
        dup.ids = _new_ids(out.duplicate_ids, [], crashed)
        missing = Row(f"output {iso}", "ids missing (lost + unprocessed)", _plus(rep.get("lost"), rep.get("unprocessed")),
                      out.missing)
        missing.ids = _new_ids(out.missing_ids, [], crashed)
        rows += [Row(f"output {iso}", "records", rep.get("records"), out.records), dup, missing]
    rows += anomaly_rows(report, outputs or {})
    rows += reader_rows(report, outputs or {})
    return rows


def anomaly_rows(report: dict, outputs: dict) -> list[Row]:
    """The anomaly classes a recount of the output topic can state on its own: `duplicate` (ids at more than
    one offset under read_committed) and, when the values name their transactions, `torn-transaction`."""
    from .recount import torn_transactions
    classes = ((report.get("anomaly_classes") or {}).get("classes") or {})
    stated = {name: (c.get("count") if isinstance(c, dict) else None) for name, c in classes.items()}
    rc, ru = outputs.get("read_committed"), outputs.get("read_uncommitted")
    rows = []
    if rc is not None and "duplicate" in classes:
        rows.append(Row("anomalies", "duplicate: ids at more than one offset (read_committed)", stated["duplicate"],
                        len(rc.duplicate_ids)))
    if rc is not None and ru is not None and ru.txns and "torn-transaction" in classes:
        torn = torn_transactions(rc, ru)
        row = Row("anomalies", "torn-transaction: transactions read_committed saw in part", stated["torn-transaction"],
                  len(torn))
        row.ids = [f"{w}/{a} transaction {n}" for w, a, n in torn][:MAX_IDS]
        row.ids_are = "transactions read_committed saw in part"
        rows.append(row)
    return rows


def reader_rows(report: dict, outputs: dict) -> list[Row]:
    """The read_committed reader that ran during the run: the records it saw, per partition between the
    first and the last offset it got, against the committed records this recount reads there. A
    read_committed reader returns every committed record in offset order, so the two are the same unless
    it skipped records or the log lost some since. The differing partitions are named. A partition whose
    first record is no longer in the topic (retention deleted the log's head) is not judged."""
    seen = (report.get("kafka_output") or {}).get("reader_during_run")
    rc = outputs.get("read_committed")
    if rc is None or not seen:
        return []
    stated, recounted, differ, judged = 0, 0, [], 0
    for p, r in seen.items():
        records, first, last = r["records"], r["first_offset"], r["last_offset"]
        if any(type(x) is not int for x in (records, first, last)):
            raise TypeError("a reader's count is not a whole number")
        offsets = rc.offsets.get(int(p), [])
        if offsets and offsets[0] > first:
            continue                    # its head is gone: nothing to count it against
        here = sum(1 for o in offsets if first <= o <= last)
        stated, recounted, judged = stated + records, recounted + here, judged + 1
        if here != records:
            differ.append(f"partition {p}: {records} records at offsets {first} to {last} (the topic holds {here})")
    row = Row("output read_committed", "records the reader during the run saw, where it got",
              stated if judged else None, recounted if judged else None)
    row.ids, row.ids_are = differ[:MAX_IDS], "where they differ"
    return [row]


# The sections of a report.json that `compare` reads, each an object when present.
SECTIONS = ("stack", "counts", "anomalies", "verdict_detail", "ledger", "kafka_output", "service", "accounts", "params",
            "reuse", "dead_letter")


def shape_error(report: dict) -> str | None:
    """Why `report` (a report.json, which anyone can edit) is not shaped like a run's report, or None."""
    for key in SECTIONS:
        if report.get(key) is not None and not isinstance(report[key], dict):
            return f"its {key!r} is a JSON {type(report[key]).__name__}, not an object"
    crashes = report.get("crashes")
    if crashes is not None and not (isinstance(crashes, list) and all(isinstance(c, dict) for c in crashes)):
        return "its 'crashes' is not a list of crash records"
    return None


def judge(report: dict, sent: dict, ledger=None, outputs: dict | None = None, service=None,
          accounts=None, reuse=None, dead_letters: set | None = None) -> tuple[list[Row], str | None]:
    """(rows, None) from `compare`, or ([], why the report cannot be set beside the recount): a section
    of the wrong shape, a value of the wrong type inside one, a stated number that is not a whole number."""
    why = shape_error(report)
    if why:
        return [], why
    try:
        rows = compare(report, sent, ledger, outputs, service, accounts, reuse, dead_letters)
    except (AttributeError, TypeError, KeyError, ValueError):
        return [], "a section holds a value of the wrong type (a list where ids belong, an object where a number does)"
    for r in rows:
        if r.reported is not None and type(r.reported) is not int:
            return [], f"it states {r.store} {r.metric} as {str(r.reported)[:40]!r}, not a whole number"
    return rows, None


def verdict(rows: list[Row]) -> bool:
    """True when every row that both sides state agrees."""
    return all(r.agrees is not False for r in rows)


def service_rows(svc: dict, rc, crashed: set) -> list[Row]:
    """A service's rows, events and outbox (dual-write, outbox) against the report's `service` section."""
    unpublished = Row("service", "rows without an event", svc.get("unpublished"), len(rc.unpublished_ids))
    unpublished.ids = _new_ids(rc.unpublished_ids, svc.get("unpublished_ids"), crashed)
    orphaned = Row("service", "events without a row", svc.get("orphaned"), len(rc.orphaned_ids))
    orphaned.ids = _new_ids(rc.orphaned_ids, svc.get("orphaned_ids"), crashed)
    dups = Row("service", "duplicated events", svc.get("event_duplicates"), rc.event_duplicates)
    dups.ids = _new_ids(rc.duplicate_event_ids, svc.get("duplicate_event_ids"), crashed)
    out = [Row("service", "rows", svc.get("rows"), rc.rows), Row("service", "events", svc.get("events"), rc.events),
           unpublished, orphaned, dups]
    if rc.outbox_rows is not None:
        out += [Row("service", "outbox rows", svc.get("outbox_rows"), rc.outbox_rows),
                Row("service", "outbox rows never marked sent", svc.get("outbox_unsent"), rc.outbox_unsent)]
    return out


def reuse_rows(section: dict, rc) -> list[Row]:
    """Requests under a reused key (key-reuse, key-fingerprint) against the report's `reuse` section: the
    input topic's keys whose later record carries another amount, and what the ledger and the rejects
    table show of them."""
    # A stopped run never reached some of them: the recount cannot tell those from hidden ones.
    unreached = section.get("unreached") or 0
    hidden = Row("reused keys", "hidden (neither applied nor rejected)" + (", or not reached by the stopped run"
                                                                        if unreached else ""),
                 _plus(section.get("hidden"), unreached), len(rc.hidden_ids))
    hidden.ids = _new_ids(rc.hidden_ids, (section.get("hidden_ids") or []) + (section.get("unreached_ids") or []),
                          set())
    applied = Row("reused keys", "applied (a ledger row of the other amount)", section.get("applied"),
                  len(rc.applied_ids))
    applied.ids = sorted(rc.applied_ids)[:MAX_IDS]
    out = [Row("reused keys", "requests under a used key, another amount (input topic)", section.get("reused"),
               rc.reused), hidden, applied]
    if rc.rejects is not None:
        out += [Row("reused keys", "rejects (rows of the rejects table)", section.get("rejected"), rc.rejects),
                Row("reused keys", "rejects that are a reused request (id and amount)", section.get("rejected"),
                    rc.rejected_reused)]
    return out


def account_rows(section: dict, rc) -> list[Row]:
    """Each account's balance and expected balance (increment, versioned) against the report's `accounts`."""
    stated = {a["account"]: a for a in section.get("accounts") or []}
    out = []
    for acct in sorted(set(stated) | set(rc.balances) | set(rc.expected)):
        rep = stated.get(acct) or {}
        out += [Row("accounts", f"{acct}: balance", rep.get("actual"), rc.balances.get(acct)),
                Row("accounts", f"{acct}: expected (its payments' sum)", rep.get("expected"), rc.expected.get(acct, 0))]
    return out
