"""What a custom run's report says of the consumer under test: the claim, the kills, the witnesses.

A foreign consumer keeps no crash records, so the report's consumer section is
built here from what the harness saw itself: its kill log (worker, attempt,
time), the workers' starts, and the ledger rows' insert times (`applied_at`),
placed side by side per duplicated or lost id (the witnesses); and whether the
kills were enough to say much (`kill_quality`).
"""

from __future__ import annotations

import statistics

from .launch import assign_partitions

FEW_KILLS = 5                 # fewer kills than this say little about a consumer
MAX_WITNESSES = 20
DEFAULT_CLAIM = "exactly-once"


def kill_quality(kills: list[dict], first_commit_at: float | None, requested: int | None) -> list[str]:
    """Warnings when the kills cannot say much about the consumer."""
    out = []
    if len(kills) < FEW_KILLS:
        out.append(f"only {len(kills)} kill(s) landed{'' if requested is None else f' of {requested} asked'}: "
                   f"too few to mean much (give more --messages so the kills have time to land, or more --kills)")
    if kills and (first_commit_at is None or all(k["time"] < first_commit_at for k in kills)):
        out.append("every kill struck before the group's first committed offset: they tested start-up, "
                   "not processing")
    return out


def slot_of(partition: int | None, slots: list[list[int]]) -> str | None:
    for i, parts in enumerate(slots):
        if partition in parts:
            return f"w{i}"
    return None


def attempt_at(starts: list[dict], worker: str | None, t: float) -> int | None:
    """The attempt of `worker` that was running at time t (the last one started before t)."""
    runs = [s for s in starts if s["worker"] == worker and s["t"] <= t]
    return max(runs, key=lambda s: s["t"])["attempt"] if runs else None


def _explaining(times: list, worker: str | None, kills: list[dict]) -> list[dict]:
    """The kills that can explain a duplicate: those between its first and last effect, its slot's first."""
    if len(times) < 2:
        return []
    between = [k for k in kills if times[0] <= k["time"] <= times[-1]]
    return [k for k in between if k.get("worker") == worker] or between


def witnesses(dup_times: dict, lost_ids: list, kills: list[dict], starts: list[dict],
              positions: dict, slots: list, t0: float) -> tuple[list[dict], dict]:
    """Per violating id: its partition and slot, each effect's time and the attempt running then, and the
    kills that explain it (for a duplicate: the kills between its first and last effect). Witnesses are
    taken in turn from each explaining kill, so every kill that caused a duplicate is shown; also
    returned: how many duplicated ids each kill explains (by its index in `kills`)."""
    def rel(t):
        return None if t is None else round(t - t0, 3)

    def kill_row(k):
        return {"worker": k.get("worker"), "attempt": k.get("attempt"), "pid": k.get("pid"), "t": rel(k["time"])}

    def row(i, kind, near, times=()):
        part = (positions.get(i) or (None, None))[0]
        worker = slot_of(part, slots)
        return {"id": i, "kind": kind, "partition": part, "worker": worker,
                "effects": [{"t": rel(t), "attempt": attempt_at(starts, worker, t)} for t in times],
                "kills": [kill_row(k) for k in near]}

    by_kill: dict = {}                    # index of the first explaining kill -> ids, in id order
    explained: dict = {}
    for i in sorted(dup_times):
        times = sorted(dup_times[i])
        worker = slot_of((positions.get(i) or (None, None))[0], slots)
        near = _explaining(times, worker, kills)
        key = kills.index(near[0]) if near else None
        if not times:                      # effects counted by --audit-sql: no insert times to place them
            near = ([k for k in kills if k.get("worker") == worker] or kills)[:5]
        by_kill.setdefault(key, []).append((i, times, near))
        if key is not None:
            explained[key] = explained.get(key, 0) + 1
    out: list = []
    room = MAX_WITNESSES - min(len(lost_ids), MAX_WITNESSES // 2)     # lost ids get their share of the rows
    queues = [by_kill[k] for k in sorted(by_kill, key=lambda k: (k is None, k or 0))]
    while queues and len(out) < room:
        for q in list(queues):
            if len(out) >= room:
                break
            i, times, near = q.pop(0)
            out.append(row(i, "duplicated", near, times))
            if not q:
                queues.remove(q)
    for i in lost_ids:
        if len(out) >= MAX_WITNESSES:
            break
        worker = slot_of((positions.get(i) or (None, None))[0], slots)
        out.append(row(i, "lost", ([k for k in kills if k.get("worker") == worker] or kills)[:5]))
    return out, explained


def _duplicate_times(dsn: str, ledger: str) -> dict | None:
    """id -> the insert times (epoch seconds) of its ledger rows, for every id with more than one; None
    when unreadable."""
    import psycopg
    from psycopg import sql
    from ..workload.sqlnames import table_identifier
    try:
        with psycopg.connect(dsn, connect_timeout=10) as conn:
            rows = conn.execute(sql.SQL(
                "select message_id, array_agg(extract(epoch from applied_at)::float8 order by id) from {} "
                "group by message_id having count(*) > 1").format(table_identifier(ledger))).fetchall()
    except Exception:  # noqa: BLE001 - witnesses are best effort; the verdict does not depend on them
        return None
    return {mid: [float(t) for t in ts] for mid, ts in rows}


def annotate(run, result, report) -> None:
    """The report's `consumer` section, and its words in the summary."""
    from ..runtime import crashlog
    from ..stack.stack import redact
    d, p = report.data, run.params
    for key in ("worker_cmd", "audit_sql"):       # the user's own text: no password of theirs in a report
        d["params"][key] = redact(d["params"].get(key))
    claim = p.expect or DEFAULT_CLAIM
    kills = [c for c in crashlog.read(run.crash_log) if c.get("by") == "supervisor" and c.get("time")]
    starts = [e for e in result.events if e.get("event") == "started"]
    slots = assign_partitions(p.partitions, p.workers)
    vd = d["verdict_detail"]
    broken = d["verdict"] == "unexpected"
    dup = vd["differing_ids"].get("duplicates", []) if broken else []
    lost = vd["differing_ids"].get("lost", []) if broken else []
    # With the ledger, every duplicated id with the times of its effects; with --audit-sql, the named ids.
    dup_times = (_duplicate_times(run.stack.postgres_dsn, run.names.ledger_table) if broken and dup
                 and not p.audit_sql else None)
    if dup_times is None:
        dup_times = {i: [] for i in dup}
    t0 = run.progress.t0
    random_asked = next((f.get("kills") for f in d["faults_configured"] if f.get("fault") == "random-kill"), None)
    warnings = kill_quality(kills, run.progress.first_commit_at, random_asked)
    seen, explained = witnesses(dup_times, lost, kills, starts, run.positions, slots, t0)
    rs = d["timings"].get("restart_seconds") or []
    d["consumer"] = {
        "command": redact(p.worker_cmd),
        "claim": claim,
        "claim_held": None if d["verdict"] not in ("as-predicted", "unexpected") else d["verdict"] == "as-predicted",
        "audit": "audit-sql" if p.audit_sql else "ledger",
        "kills_landed": len(kills),
        "kills": [{"worker": k.get("worker"), "attempt": k.get("attempt"), "pid": k.get("pid"),
                   "t": round(k["time"] - t0, 3), "by": k.get("point"),
                   "duplicates_explained": explained.get(n, 0) if dup_times and any(dup_times.values()) else None}
                  for n, k in enumerate(kills)],
        "first_commit_seconds": None if run.progress.first_commit_at is None
        else round(run.progress.first_commit_at - t0, 3),
        "restart_median_seconds": round(statistics.median(rs), 3) if rs else None,
        "restart_max_seconds": max(rs) if rs else None,
        "starts": [{"worker": s["worker"], "attempt": s["attempt"], "pid": s.get("pid"), "t": round(s["t"] - t0, 3)}
                   for s in starts],
        "warnings": warnings,
        "witnesses": seen,
    }
    c = d["consumer"]
    # A claim is tested, not predicted from crash records: say so in the sentence's verdict words.
    for said, meant in (("exactly as predicted from the crash log", "as claimed"), ("exactly as predicted", "as claimed"),
                        ("NOT as predicted", "NOT as claimed")):
        if said in d["summary"]:
            d["summary"] = d["summary"].replace(said, meant, 1)
            break
    text = f" Claim {claim}: " + {True: "held", False: "BROKEN", None: "not judged"}[c["claim_held"]]
    text += f"; {len(kills)} kill(s) landed"
    if rs:
        text += f", restarts took {c['restart_median_seconds']:.2f} s (median) to commit again"
    text += "."
    if explained:
        text += f" {len(explained)} of {len(kills)} kill(s) left duplicated effects behind."
    w = c["witnesses"][0] if c["witnesses"] else None
    if w:
        eff = ", ".join(f"+{e['t']:.3f} s (attempt {e['attempt']})" for e in w["effects"] if e["t"] is not None)
        ks = ", ".join(f"{k['worker']} attempt {k['attempt']} at +{k['t']:.3f} s" for k in w["kills"][:3])
        text += (f" Witness: {w['id']} {w['kind']}" + (f", applied at {eff}" if eff else "")
                 + (f"; kill(s): {ks}" if ks else "") + ".")
    text += "".join(f" Warning: {x}." for x in warnings)
    d["summary"] += text
