"""Build report.json from a finished run: typed sections, one function (`assemble`), no rendering.

The report is the last step of the run's pipeline (run -> audit -> predict ->
judge -> render): it lays out the run's declaration, its faults, the crash log,
the audit and the checker's `Outcome` (checker/run_outcome.py: the prediction and
the verdict), and decides nothing itself: it neither predicts nor judges.

The contract is docs/report.schema.json (schema_version 4); every report the
tests write is validated against it. The sections are dataclasses so a field
cannot be misspelt in one place and read under another name elsewhere. Numbers
the harness could not measure are None (null in JSON, "unknown" when shown),
never 0.
"""

from __future__ import annotations

import statistics
from dataclasses import asdict, dataclass, field

from ..checker.effects import MAX_IDS
from ..stack.environment import describe
from ..runtime.crashlog import restart_seconds
from ..workers.logcap import CAP_BYTES
from ..stack.stack import redact
from .run_report import CRASH_FAULTS, SCHEMA_VERSION, RunReport
from .summary import compose

# The experiment file a run came from ({file, purpose, overridden}), as `harness run FILE` records it
# before the run: one run per process, so the value of this process is its run's.
_source: dict | None = None


def record_source(source: dict | None) -> None:
    """The experiment file this process's run came from, and the flags that overrode it (None: flags only)."""
    global _source
    _source = dict(source) if source else None



@dataclass
class Counts:
    sent: int
    deliveries: int | None
    effects: int | None
    duplicates: int | None
    lost: int | None
    unprocessed: int | None      # never acknowledged: the run stopped before them (not lost)
    dedupe_hits: int | None
    dead_lettered: int | None = None   # queues with a dead-letter topic: never applied, in it (not lost)


@dataclass
class Predicted:
    duplicates: int | None
    lost: int | None
    dedupe_hits: int | None
    exact: bool
    note: str
    expectations: list
    kafka_output: dict | None = None
    ranges: dict | None = None       # metric -> [low, high] when the prediction is a range
    evidence: list | None = None     # per crash, what the prediction read beyond the crash log
    service: dict | None = None      # a service's rows and events: unpublished, orphaned, event_duplicates
    reuse: dict | None = None        # requests under a reused key: hidden, rejected, applied
    dead_lettered: int | None = None   # queues with a dead-letter topic


@dataclass
class Crash:
    point: str | None
    message_id: str | None
    partition: int | None
    offset: int | None
    worker: str | None
    attempt: int | None
    time: float | None
    unacked: list = field(default_factory=list)
    acked_unapplied: list = field(default_factory=list)
    produced: list = field(default_factory=list)
    by: str = "worker"                              # "worker" (planned) or "supervisor" (random kill)
    restart_seconds: float | None = None            # kill -> the same slot's next first record
    read_committed_stall_seconds: float | None = None   # kill -> the same worker's next visible output record


@dataclass
class Anomalies:
    lost_ids: list
    lost_total: int | None
    duplicate_ids: list
    duplicates_total: int | None
    unexpected_ids: list
    unprocessed_ids: list
    unprocessed_total: int | None


@dataclass
class VerdictDetail:
    failed: list
    differing_ids: dict
    differing_totals: dict
    reason: str | None
    audit_errors: list
    unplanned_deaths: list
    killed_at_stop: list
    unrestarted_at_stop: list      # {worker, attempt, time, transaction, transactional_ids}: crashed just before
                                   # the stop, no successor started (its open transaction fenced by the run)
    left_behind: list | None       # {pid, command}: processes the workers left that the end of the run ended


def without_dead_letters(section: dict, audit) -> dict:
    """`dead_lettered` is stated only by a run that had a dead-letter topic."""
    if getattr(audit, "dead_letter", None) is None:
        section.pop("dead_lettered", None)
    return section


def dead_letter_topics(audit) -> list[str]:
    """The run's dead-letter topic, when it had one (its broker wrote there, the run created it)."""
    found = getattr(audit, "dead_letter", None)
    return [found.topic] if found is not None else []


def dead_letter_section(audit) -> dict | None:
    """A queues run's dead-letter topic as its audit read it: each dead-lettered payment (no effect, its record
    there) with where the broker wrote it and the delivery count it reached; None for a run without one."""
    found = getattr(audit, "dead_letter", None)
    if found is None:
        return None
    dead = (audit.evidence.ids.get("ledger.dead_lettered") or [])
    return {"topic": found.topic, "records": found.records, "strays": found.strays,
            "awaited_missing": [list(x) for x in found.missing][:MAX_IDS], "error": found.error,
            "dead_lettered": [{"message_id": d.message_id, "partition": d.partition, "offset": d.offset,
                               "dead_letter_partition": d.dead_letter_partition,
                               "dead_letter_offset": d.dead_letter_offset, "delivery_count": d.delivery_count,
                               "reason": d.reason} for d in (found.by_id[i] for i in dead[:MAX_IDS])]}


def crash_entries(crashes: list[dict], restarts: list, stalls: list | None) -> list[dict]:
    out = []
    for i, c in enumerate(crashes):
        out.append(asdict(Crash(
            point=c.get("point"), message_id=c.get("message_id"), partition=c.get("partition"),
            offset=c.get("offset"), worker=c.get("worker"), attempt=c.get("attempt"), time=c.get("time"),
            unacked=list(c.get("unacked") or []), acked_unapplied=list(c.get("acked_unapplied") or []),
            produced=list(c.get("produced") or []), by=c.get("by") or "worker",
            restart_seconds=restarts[i] if i < len(restarts) else None,
            read_committed_stall_seconds=stalls[i] if stalls and i < len(stalls) else None)))
    return out


def timings(wall: float, sent: int, crashes: list[dict], phases: dict | None = None) -> dict:
    rs = [c["restart_seconds"] for c in crashes if c.get("restart_seconds") is not None]
    st = [c["read_committed_stall_seconds"] for c in crashes if c.get("read_committed_stall_seconds") is not None]
    return {"wall_seconds": round(wall, 3), "phases": breakdown(phases or {}, rs),
            "restart_seconds": rs,
            "restart_median_seconds": round(statistics.median(rs), 3) if rs else None,
            "restart_max_seconds": max(rs) if rs else None,
            "read_committed_stall_median_seconds": round(statistics.median(st), 3) if st else None,
            "read_committed_stall_max_seconds": max(st) if st else None,
            "messages_per_second": round(sent / wall, 1) if wall > 0 else None}


def breakdown(phases: dict, restart_seconds: list) -> dict:
    """Where the run's time went, in seconds: the runner's phases as measured (set-up, produce,
    preparing the workers, the workers' run, waiting for dead transactions, the audit), and within
    the workers' run the measured restart waits (SIGKILL to the restarted worker's first record,
    summed; crashes whose slot had nothing left are not waits) and the rest. Restart waits of
    workers restarting at the same time overlap, so with several workers the sum can exceed the
    workers' time: then `workers_other` is unknown."""
    out = {k: v for k, v in phases.items()}
    if "workers" in out:
        waits = round(sum(restart_seconds), 3)
        out["restart_waits"] = waits
        other = out["workers"] - waits
        out["workers_other"] = round(other, 3) if other >= 0 else None
    return out


def timeline(samples, crashes: list[dict], events: list[dict], t0: float, faults: list[dict]) -> dict:
    """Progress samples, crashes, restarts and other faults, in seconds since the workers started (t0)."""
    starts = [e["t"] - t0 for e in events if e.get("event") == "started" and e.get("attempt", 1) > 1]
    return {"progress": [[t, v] for t, v in samples],
            "crashes": [round(c["time"] - t0, 3) for c in crashes if c.get("time")],
            "restarts": [round(s, 3) for s in starts],
            "faults": [{"fault": f["fault"], "t": round(f["time"] - t0, 3),
                        **({"until": round(f["back_at"] - t0, 3)} if f.get("back_at") else {}),
                        **({"mark": f["mark"]} if f.get("mark") else {})} for f in faults
                       if f.get("time") and f["fault"] not in CRASH_FAULTS]}


def group_story(protocol: str, events: list[dict], t0: float) -> dict:
    """--assignment group: assignments and revocations per worker, from their events (times since t0)."""
    assigned = [e for e in events if e.get("event") == "assigned"]
    revoked = [e for e in events if e.get("event") == "revoked" and e.get("partitions")]
    lost = [e for e in events if e.get("event") == "commit_lost"]
    rows = [{"t": round(e["t"] - t0, 3), "event": e["event"], "worker": e.get("worker"), "attempt": e.get("attempt"),
             "partitions": e.get("partitions"), **({"lost": True} if e.get("lost") else {})}
            for e in assigned + revoked]
    return {"protocol": protocol, "assignments": len(assigned), "revocations": len(revoked),
            "revoked_partitions": sum(len(e["partitions"]) for e in revoked),
            "lost_assignments": sum(1 for e in revoked if e.get("lost")), "commits_lost": len(lost),
            "redelivered_at_most": sum(len(e.get("unacked") or []) for e in lost),
            "events": sorted(rows, key=lambda r: r["t"])[:200]}


def balances(rows: list | None, pred) -> dict:
    """Each account's expected (its payments), predicted (from the crash log) and actual balance."""
    out = []
    for row in rows or []:
        e = pred.get(f"accounts.{row['account']}.balance")
        out.append({**row, "predicted": e.value if e else None, "predicted_op": e.op if e else None})
    known = [r for r in out if r["actual"] is not None]
    return {"accounts": out,
            "expected_total": sum(r["expected"] for r in out),
            "actual_total": sum(r["actual"] for r in known) if len(known) == len(out) else None}


def capped(ids) -> list:
    return list(ids or [])[:MAX_IDS]


def assemble(r, faults: list, reports_deliveries: bool, result, crashes: list, audit, outcome, stalls,
             stall_of=None) -> RunReport:
    """The report's data, from the run's declaration, its faults, the crash log, the audit and the
    checker's Outcome (its prediction, judgement and verdict, and the faults' stories)."""
    params, exp, names, stack = r.params, r.exp, r.names, r.stack
    fault_details = outcome.stories
    deaths = list(result.unplanned_deaths)
    pred, v, verdict = outcome.prediction, outcome.judgement, outcome.verdict

    head = audit.headline()
    prefix = "ledger." if exp.stores.ledger else "kafka.read_committed."
    delivered = [c.get("delivered") for c in crashes if c.get("by") != "supervisor"] + \
        [e.get("delivered") for e in result.events if e.get("event") in ("done", "fenced", "txn_stuck", "overlap_left")]
    # Known only when every process reported its count: a supervisor's kill leaves no record, and
    # some workers (Streams) report deliveries only in their crash lines.
    # (and a resumed worker killed before it left said nothing either)
    described = all(c.get("by") != "supervisor" for c in crashes) and not any(
        isinstance(s, dict) and s.get("unknown_outcome") for s in fault_details.values())
    deliveries = (sum(x for x in delivered if isinstance(x, int))
                  if reports_deliveries and described and result.status == "complete" else None)
    counts = Counts(sent=len(r.sent_ids), deliveries=deliveries, effects=head.effects,
                          duplicates=head.duplicates, lost=head.lost, unprocessed=head.unprocessed,
                          dedupe_hits=audit.dedupe_hits if exp.stores.dedupe or exp.stores.accounts else None,
                          dead_lettered=audit.metrics.get("ledger.dead_lettered"))
    predicted = Predicted(
        duplicates=pred.value(prefix + "duplicates"), lost=pred.value(prefix + "lost"),
        dedupe_hits=pred.value("ledger.dedupe_hits"), exact=pred.exact, note=pred.note,
        expectations=[e.text() for e in pred.expectations],
        kafka_output=({iso: {"duplicates": pred.value(f"kafka.{iso}.duplicates"), "lost": pred.value(f"kafka.{iso}.lost")}
                       for iso in ("read_committed", "read_uncommitted")} if exp.stores.output else None),
        ranges={k: rg for k, m in (("duplicates", prefix + "duplicates"), ("lost", prefix + "lost"),
                                   ("dedupe_hits", "ledger.dedupe_hits"), ("dead_lettered", "ledger.dead_lettered"))
                if (rg := pred.range(m))} or None,
        evidence=pred.evidence or None, dead_lettered=pred.value("ledger.dead_lettered"),
        service=({"unpublished": pred.value("events.unpublished"), "orphaned": pred.value("events.orphaned"),
                  "event_duplicates": pred.value("events.duplicates"), "outbox_unsent": pred.value("outbox.unsent")}
                 if exp.stores.events else None),
        reuse=({k: pred.value(f"reuse.{k}") for k in ("hidden", "rejected", "applied")}
               if getattr(r, "reused", None) or exp.stores.rejects else None))
    crash_rows = crash_entries(crashes, restart_seconds(crashes, result.events), stalls)
    fault_rows = sorted((e for f in faults for e in f.entries(crashes, result.events)), key=lambda e: e.get("time") or 0)
    if stall_of is not None:
        # Per fault that is not a crash (those have their own): how long read_committed readers of the
        # output saw nothing new after it (any partition: a broker fault is not one worker's).
        others = [row for row in fault_rows if row["fault"] not in CRASH_FAULTS]
        for row, stall in zip(others, stall_of([{"time": row.get("time")} for row in others])):
            row["read_committed_stall_seconds"] = stall
    ko = None
    if audit.output:
        ko = {iso: {"records": audit.output[iso].effects, "duplicates": audit.output[iso].duplicates,
                    "lost": audit.output[iso].lost, "unprocessed": audit.output[iso].unprocessed}
              for iso in ("read_committed", "read_uncommitted")}
        ko["aborted_records"] = audit.output["aborted_records"]
        ko["reader_during_run"] = audit.during_run     # per partition, what the reader beside the workers saw
        if "producer.acked" in audit.metrics:      # a producer under test: what its delivery reports said
            ko["delivery_log"] = {"acked": audit.metrics["producer.acked"], "unacked": audit.metrics["producer.unacked"],
                              "reordered": audit.metrics["producer.reordered"],
                              "reordered_ids": capped(audit.evidence.ids.get("producer.reordered"))}
    data = {
        "schema_version": SCHEMA_VERSION,
        "run_id": names.run_id,
        "experiment": exp.name,
        "status": result.status,
        "proves": exp.proves,
        "lesson": exp.lesson or None,
        "steps": exp.steps_text(),
        "kill_points": [p.describe() for p in exp.kill_points],
        "params": params.as_dict(),
        "environment": describe(stack),
        "stack": {"kind": stack.kind, "bootstrap_servers": stack.bootstrap_servers,
                  "kafka_auth": stack.kafka_auth,      # protocol, mechanism, user: never a secret
                  "postgres_dsn": redact(stack.postgres_dsn),
                  "consumers_postgres_role": r.db_role.said if getattr(r, "db_role", None) else None,
                  "consumers_kafka_user": r.kafka_user.said if getattr(r, "kafka_user", None) else None,
                  "input_topic": names.input_topic,
                  "output_topic": names.output_topic if exp.stores.output_topic else None,
                  "consumer_group": names.group,
                  "ledger_table": names.ledger_table if exp.stores.ledger else None,
                  "dedupe_table": names.dedupe_table if exp.stores.dedupe else None,
                  "accounts_table": names.accounts_table if exp.stores.accounts else None,
                  "rejects_table": names.rejects_table if exp.stores.rejects else None,
                  "tables": written_tables(exp, names),
                  "topics": written_topics(exp, names) + dead_letter_topics(audit),
                  "consumer_groups": [names.group] + ([names.downstream_group] if exp.stores.events else [])},
        "faults_configured": [f.describe() for f in faults],
        "faults": fault_rows,
        "fault_details": {k: v for k, v in fault_details.items() if v},
        "crashes": crash_rows,
        "counts": without_dead_letters(asdict(counts), audit),
        "predicted": without_dead_letters(asdict(predicted), audit),
        "dead_letter": dead_letter_section(audit),
        "kafka_output": ko,
        "service": audit.service.section() if audit.service is not None else None,
        "reuse": audit.reuse.section(r.reused) if getattr(audit, "reuse", None) is not None else None,
        "ledger": {"expected_total": sum(r.amounts.values()),
                   "actual_total": audit.ledger_total if exp.stores.ledger else None,
                   "dedupe_keys": audit.dedupe_keys if exp.stores.dedupe else None},
        "accounts": balances(audit.accounts, pred) if exp.stores.accounts else None,
        "anomalies": asdict(Anomalies(
            lost_ids=capped(head.lost_ids), lost_total=head.lost,
            duplicate_ids=capped(head.duplicate_ids), duplicates_total=head.duplicates,
            unexpected_ids=capped(head.unexpected_ids),
            unprocessed_ids=capped(head.unprocessed_ids), unprocessed_total=head.unprocessed)),
        "verdict": verdict,
        "verdict_detail": asdict(VerdictDetail(
            failed=v.failed, differing_ids=v.differing_ids, differing_totals=v.differing_totals,
            reason=result.reason, audit_errors=list(audit.evidence.errors),
            unplanned_deaths=deaths, killed_at_stop=list(result.killed_at_stop),
            unrestarted_at_stop=list(getattr(result, "unrestarted_at_stop", None) or []),
            left_behind=getattr(result, "left_behind", []))),
        "timings": timings(result.wall_seconds, len(r.sent_ids), crash_rows, getattr(r, "phases", None)),
        "restarts": result.restarts,
        "timeline": timeline(r.progress.samples, crashes, result.events, r.progress.t0, fault_rows),
        "anomaly_classes": anomaly_classes(outcome.anomalies, audit.history),
    }
    if _source is not None:
        data["source"] = dict(_source)
    from .guesses import take
    guessed = take()
    if guessed is not None:
        data["guesses"] = guessed
    if params.assignment == "group":
        data["consumer_group"] = group_story(params.group_protocol or "classic", result.events, r.progress.t0)
    data["outside_calls"] = outside_calls(result.events)
    dropped = getattr(result, "log_bytes_dropped", None)
    data["worker_logs"] = {"cap_bytes": CAP_BYTES, "dropped_bytes": dropped} if dropped is not None else None
    foreign = getattr(audit, "foreign", None)
    data["input_foreign_records"] = foreign.as_dict() if foreign is not None else None
    data["summary"], data["summary_detail"] = compose(
        data, [f.sentence(fault_details[f.name]) + f.shortfall(crashes, fault_details[f.name]) for f in faults])
    return RunReport(data)


def outside_calls(events: list) -> dict | None:
    """Calls to a system outside the transaction (the provider) that needed more than one attempt, from each
    call's `call_unanswered` event: attempts refused (never sent: nothing charged) and attempts cut once
    sent (charged or not: the caller could not know). None when no call needed a second attempt."""
    calls = [e for e in events if e.get("event") == "call_unanswered"]
    if not calls:
        return None
    count = lambda k: sum(e[k] for e in calls if type(e.get(k)) is int)  # noqa: E731
    return {"calls_retried": len(calls), "calls_with_unknown_outcome": sum(1 for e in calls if e.get("unknown")),
            "attempts_not_sent": count("not_sent"), "attempts_unknown": count("unknown")}


def anomaly_classes(found: dict | None, history: dict | None) -> dict | None:
    """Jepsen's anomaly classes as the checker found them (checker/anomalies.py), with what the histories
    held; None when the run kept no history (a run stopped before its workers started)."""
    if found is None:
        return None
    return {"history": history, "classes": {name: f.as_dict() for name, f in found.items()}}


def written_tables(exp, names) -> list[str]:
    """Every Postgres table the run created and wrote."""
    st = exp.stores
    return [t for t, on in ((names.ledger_table, st.ledger), (names.dedupe_table, st.dedupe),
                            (names.accounts_table, st.accounts), (names.rows_table, st.rows),
                            (names.outbox_table, st.outbox), (names.rejects_table, st.rejects)) if on]


def written_topics(exp, names) -> list[str]:
    """Every Kafka topic the run created and wrote."""
    return [names.input_topic] + [t for t, on in ((names.output_topic, exp.stores.output),
                                                  (names.events_topic, exp.stores.events)) if on]
