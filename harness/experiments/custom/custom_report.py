"""What a custom run's report says of the consumer under test: the claim, the kills, the witnesses.

A foreign consumer keeps no crash records, so the report's consumer section is
built here from what the harness saw itself: its kill log (worker, attempt,
time), the workers' starts, the group's timeline (who owned which partition,
the committed offsets: checker/group_timeline.py) and the ledger rows' insert
times (`applied_at`). Each kill is counted by what its victim could damage, and
timed until the partitions it owned committed again (the group's stall); each
duplicated or lost id gets its witnesses (custom_witnesses.py); and warnings
say when the kills could not say much (`kill_quality`).
"""

from __future__ import annotations

import statistics

from ...checker import group_timeline
from .custom_witnesses import COMMIT_GRACE_S, Placer, rebalance_times, witnesses
from ..launch import assign_partitions
from ...clients import pgconn

FEW_KILLS = 5                 # fewer kills than this say little about a consumer
DEFAULT_CLAIM = "exactly-once"
GROUP_TIMELINE = "group.jsonl"   # the group's samples in the run folder (runtime/group_sampler.py)


def ends_of(positions: dict) -> dict:
    """partition -> its end offset, from the broker's acknowledgements of the produced payments."""
    ends: dict = {}
    for part, off in positions.values():
        ends[part] = max(ends.get(part, 0), off + 1)
    return ends


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


def _effects(dsn: str, ledger: str) -> list | None:
    """(message_id, insert time in epoch seconds, worker, attempt) of every ledger row, in insert order (worker
    and attempt as the consumer wrote them, None when it did not); None when unreadable."""
    from psycopg import sql
    from ...workload.sqlnames import table_identifier
    try:
        with pgconn.connect(dsn, connect_timeout=10) as conn:
            return conn.execute(sql.SQL("select message_id, extract(epoch from applied_at)::float8, worker, "
                                        "attempt from {} order by id").format(table_identifier(ledger))).fetchall()
    except Exception:  # noqa: BLE001 - witnesses are best effort; the verdict does not depend on them
        return None


def read_timeline(path) -> tuple[group_timeline.Timeline, list, dict]:
    """The group timeline's samples, its member ties and its closing facts (protocol, session timeout, a
    failure). The file is read as anyone's: lines that are not what the sampler writes are skipped."""
    from ...runtime import crashlog
    lines = crashlog.read(path)
    samples = [s for s in (group_timeline.normalize(x) for x in lines if "members" in x) if s is not None]
    meta: dict = {}
    for x in lines:
        if "session_timeout_ms" in x or "failed" in x:
            meta.update({k: v for k, v in x.items() if k in ("session_timeout_ms", "protocol", "failed")})
    if not isinstance(meta.get("session_timeout_ms"), int) or isinstance(meta.get("session_timeout_ms"), bool):
        meta["session_timeout_ms"] = None
    meta["protocol"] = meta.get("protocol") if isinstance(meta.get("protocol"), str) else None
    return group_timeline.Timeline(samples), [x for x in lines if "tie" in x], meta


def kill_states(tl, ties, kills, starts, slots: dict, ends: dict, effects, positions, in_group) -> list[dict]:
    """Per kill: what its victim owned and could damage, the effects it applied past its partitions' last
    commit (their offsets at or after the commit, applied by it, as the ledger's worker and attempt say, or
    else applied since it owned the partition and up to COMMIT_GRACE_S after its death: work a redelivery
    will do again), and the group's stall after it: only when no later kill struck before its partitions
    committed again (else `killed_again`, and no stall: the figure would sum restarts)."""
    started = {(s["worker"], s["attempt"]): s["t"] for s in starts}
    by_part: dict = {}
    for mid, t, worker, attempt in effects or []:
        part, offset = positions.get(mid) or (None, None)
        if part is not None and t is not None:
            by_part.setdefault(part, []).append((offset, t, None if worker is None or attempt is None
                                                 else (str(worker), int(attempt))))
    out = []
    for k in kills:
        key = (k.get("worker"), k.get("attempt"))
        begun = started.get(key, 0.0)
        st = group_timeline.kill_state(tl, ties, k, begun, slots.get(k.get("worker"), []), ends, in_group)
        stall = group_timeline.stall_seconds(tl, k["time"], st["unfinished"] or [], st["committed"],
                                             st.pop("stood_at", None))
        again = min((x["time"] for x in kills if x["time"] > k["time"]), default=None)
        st["killed_again"] = again is not None and bool(st["unfinished"]) and (
            stall is None or k["time"] + stall > again)
        st["stall_seconds"] = None if st["killed_again"] else stall
        known = effects is not None and all(st["committed"].get(p) is not None for p in st["partitions"])
        st["effects_since_commit"] = None if not known else sum(
            1 for p in st["partitions"] for off, t, by in by_part.get(p, ())
            if off >= st["committed"][p] and (by == key if by is not None else
                                              st["owned_since"].get(p, begun) <= t <= k["time"] + COMMIT_GRACE_S))
        out.append(st)
    return out


def kill_warnings(states: list[dict], finished_at: float | None, first_start: float | None) -> list[str]:
    """Warnings when most kills could damage nothing, or none could strike before the consumer finished."""
    out = []
    harmless = [x for x in states if x["state"] != group_timeline.DAMAGE]
    if states and len(harmless) * 2 > len(states):
        done = sum(1 for x in harmless if x["state"] == group_timeline.DONE)
        out.append(f"{len(harmless)} of {len(states)} kill(s) struck a worker that could do no damage ({done} after "
                   f"its partitions were committed to their end, {len(harmless) - done} before it owned partitions "
                   f"and worked): the claim was hardly tested")
    if not states and finished_at is not None and first_start is not None:
        out.append(f"your consumer committed every payment {finished_at - first_start:.2f} s after it started, "
                   f"before any kill could strike: the claim was not tested (give more --messages)")
    return out


def gap_warning(states: list[dict], verdict: str) -> list[str]:
    """A warning when no kill landed between an effect and its commit (the ledger showed no effect of the
    victim past its partitions' last commit at any kill): what an effect-then-commit consumer risks was not
    tested, and a held claim rests on weak evidence."""
    damaging = [x for x in states if x["state"] == group_timeline.DAMAGE]
    if not damaging or any(x["effects_since_commit"] is None for x in states) \
            or any(x["effects_since_commit"] for x in states):
        return []
    held = " (the claim held on weak evidence)" if verdict == "as-predicted" else ""
    return [f"0 of {len(states)} kill(s) landed between an effect and its commit ({len(damaging)} struck a worker "
            f"that could do damage, none with an effect past its last commit){held}; "
            f"--fault random-kill:aim=gap waits for that window"]


def why_unfinished(samples: list[dict], starts: list[dict], ties, in_group: bool, ends: dict,
                   slots: dict) -> str | None:
    """What the workers and the group were doing when an unfinished run stopped, in one line: the last
    commits against the ends, when they last moved, the group's rebalances in its last minute, and the
    slots whose attempts never joined the group. None when the timeline holds nothing."""
    if not samples:
        return None
    end = samples[-1]["t"]
    last = next((s["committed"] for s in reversed(samples) if s.get("committed") is not None), None)
    parts = []
    if last is not None:
        parts.append("committed " + ", ".join(f"{q}: {last.get(q) or 0:,} of {e:,}" for q, e in sorted(ends.items())))
        moved, before = None, None
        for s in samples:
            c = s.get("committed")
            if c is not None:
                if before is not None and c != before:
                    moved = s["t"]
                before = c
        parts.append("no commit moved in the run" if moved is None
                     else f"the last commit moved {end - moved:.1f} s before the end")
    else:
        parts.append("the group's committed offsets were never read")
    if in_group:
        window = min(60.0, end - samples[0]["t"])
        n = sum(1 for t in rebalance_times(samples) if t > end - window)
        parts.append(f"the group rebalanced {n} time(s) in its last {window:.0f} s")
        never = [w for w in slots if not any(ties.member_of(w, s["attempt"]) for s in starts if s["worker"] == w)]
        if never:
            parts.append(", ".join(never) + " never joined the group")
    return "; ".join(parts)


def _finished_at(samples: list[dict], ends: dict) -> float | None:
    """When the group's committed offsets first reached the end of every partition."""
    for s in samples:
        c = s.get("committed") or {}
        if c and all((c.get(p) or 0) >= end for p, end in ends.items()):
            return s["t"]
    return None


def annotate(run, result, report) -> None:
    """The report's `consumer` section, and its words in the summary."""
    from ...runtime import crashlog
    from ...stack.stack import redact
    d, p = report.data, run.params
    for key in ("worker_cmd", "audit_sql"):       # the user's own text: no password of theirs in a report
        d["params"][key] = redact(d["params"].get(key))
    claim = p.expect or DEFAULT_CLAIM
    kills = [c for c in crashlog.read(run.crash_log) if c.get("by") == "supervisor" and c.get("time")]
    starts = [e for e in result.events if e.get("event") == "started"]
    slots = {f"w{i}": parts for i, parts in enumerate(assign_partitions(p.partitions, p.workers))}
    tl, tie_records, meta = read_timeline(run.run_dir / GROUP_TIMELINE)
    samples = tl.samples
    ties = group_timeline.MemberTies(run.names.run_id)
    ties.load(tie_records)
    mode = group_timeline.group_mode(samples)
    in_group = mode is True
    ends = ends_of(run.positions)
    effects = None if p.audit_sql else _effects(run.stack.postgres_dsn, run.names.ledger_table)
    states = kill_states(tl, ties, kills, starts, slots, ends, effects, run.positions, mode)
    vd = d["verdict_detail"]
    broken = d["verdict"] == "unexpected"
    lost = vd["differing_ids"].get("lost", []) if broken else []
    # With the ledger, every duplicated id with its effects (time, worker, attempt); with --audit-sql, the ids.
    if effects is not None:
        times: dict = {}
        for mid, t, worker, attempt in effects:
            times.setdefault(mid, []).append((t, worker, attempt))
        dup_times = {i: ts for i, ts in times.items() if len(ts) > 1}
    else:
        dup_times = {i: [] for i in (vd["differing_ids"].get("duplicates", []) if broken else [])}
    t0 = run.progress.t0
    ended = {(k.get("worker"), k.get("attempt")): k["time"] for k in kills}
    placer = Placer(tl, ties, in_group, starts, slots, ended)
    seen, dup_explained, lost_explained, reasons = witnesses(dup_times, lost, kills, placer, run.positions, t0)
    random_asked = next((f.get("kills") for f in d["faults_configured"] if f.get("fault") == "random-kill"), None)
    first_start = min((s["t"] for s in starts), default=None)
    warnings = kill_quality(kills, run.progress.first_commit_at, random_asked)
    warnings += kill_warnings(states, _finished_at(samples, ends), first_start)
    warnings += gap_warning(states, d["verdict"])
    unknown = ties.unidentified(samples) if in_group else []
    if meta.get("failed"):
        warnings.append(f"the group's timeline stopped during the run ({meta['failed']}): no worker was taken "
                        f"as busy after that, so no random kill struck it")
    if mode is None and samples:
        warnings.append("the broker never showed whether your consumers joined the group (no member, and the "
                        "group never seen empty with its offsets): nobody's work could be placed, so no random "
                        "kill struck")
    if ties.disputed:
        warnings.append(f"{len(ties.disputed)} attempt(s) were named by two group members' client.id at once: "
                        f"those members are not tied to a process")
    if unknown:
        warnings.append(f"{len(unknown)} group member(s) could not be tied to a worker process (give your Kafka "
                        f"client HARNESS_CLIENT_ID as its client.id): who owned what is uncertain for them")
    stalls = [x["stall_seconds"] for x in states if x["stall_seconds"] is not None]
    timed = any(dup_times.values())
    unfinished = None if d["verdict"] != "incomplete" else why_unfinished(
        samples, starts, ties, in_group, ends, slots)

    def rel(t):
        return None if t is None else round(t - t0, 3)
    d["consumer"] = {
        "command": redact(p.worker_cmd),
        "claim": claim,
        "claim_held": None if d["verdict"] not in ("as-predicted", "unexpected") else d["verdict"] == "as-predicted",
        "audit": "audit-sql" if p.audit_sql else "ledger",
        "membership": {True: "group", False: "assign", None: "unknown"}[mode],
        "protocol": meta.get("protocol") if in_group else None,
        "session_timeout_ms": meta.get("session_timeout_ms") if in_group else None,
        "members_tied": {by: sum(1 for _, _, b in ties.of.values() if b == by)
                         for by in ("client.id", "first appearance")},
        "members_unidentified": len(unknown),
        "kills_landed": len(kills),
        "kills_by_state": {s: sum(1 for x in states if x["state"] == s) for s in group_timeline.KILL_STATES},
        "kills": [{"worker": k.get("worker"), "attempt": k.get("attempt"), "pid": k.get("pid"),
                   "t": rel(k["time"]), "by": k.get("point"), "state": st["state"], "partitions": st["partitions"],
                   "committed": {str(q): v for q, v in st["committed"].items()},
                   "effects_since_commit": st["effects_since_commit"], "stall_seconds": st["stall_seconds"],
                   "killed_again": st["killed_again"],
                   "duplicates_explained": dup_explained.get(n, 0) if timed else None,
                   "lost_explained": lost_explained.get(n, 0) if lost else None}
                  for n, (k, st) in enumerate(zip(kills, states))],
        "first_commit_seconds": None if run.progress.first_commit_at is None
        else round(run.progress.first_commit_at - t0, 3),
        "restart_median_seconds": round(statistics.median(stalls), 3) if stalls else None,
        "restart_max_seconds": max(stalls) if stalls else None,
        "killed_again_before_recovery": sum(1 for x in states if x["killed_again"]),
        "kills_in_gap": None if any(x["effects_since_commit"] is None for x in states)
        else sum(1 for x in states if x["effects_since_commit"]),
        "duplicates_by_explanation": reasons,
        "unfinished": unfinished,
        "starts": [{"worker": s["worker"], "attempt": s["attempt"], "pid": s.get("pid"), "t": rel(s["t"])}
                   for s in starts],
        "warnings": warnings,
        "witnesses": seen,
    }
    _summary(d, claim, kills, dup_explained, lost_explained, warnings)


def _summary(d: dict, claim: str, kills: list, dup_explained: dict, lost_explained: dict, warnings: list) -> None:
    c = d["consumer"]
    # A claim is tested, not predicted from crash records: say so in the sentence's verdict words.
    for said, meant in (("exactly as predicted from the crash log", "as claimed"), ("exactly as predicted", "as claimed"),
                        ("NOT as predicted", "NOT as claimed")):
        if said in d["summary"]:
            d["summary"] = d["summary"].replace(said, meant, 1)
            break
    text = f"Claim {claim}: " + {True: "held", False: "BROKEN", None: "not judged"}[c["claim_held"]]
    text += f"; {len(kills)} kill(s) landed"
    if kills:
        text += f" ({c['kills_by_state'][group_timeline.DAMAGE]} could do damage)"
    if c["restart_median_seconds"] is not None:
        text += (f"; after a kill the victim's partitions committed again {c['restart_median_seconds']:.2f} s "
                 f"later (median)")
        if c["membership"] == "group":
            text += f", the group's stall ({c['protocol'] or 'unknown'} protocol)"
    if c.get("killed_again_before_recovery"):
        text += (f"; {c['killed_again_before_recovery']} kill(s) had another kill strike before their partitions "
                 f"recovered (not in the median)")
    text += "."
    if dup_explained:
        text += (f" {len(dup_explained)} of {len(kills)} kill(s) left duplicated effects behind "
                 f"({sum(dup_explained.values()):,} effects of their attempts applied again).")
    text += no_kill_sentence(c.get("duplicates_by_explanation") or {})
    if lost_explained:
        text += f" {len(lost_explained)} of {len(kills)} kill(s) explain lost effects."
    w = c["witnesses"][0] if c["witnesses"] else None
    if w:
        eff = ", ".join(f"+{e['t']:.3f} s (" + (f"{e['worker']} attempt {e['attempt']}" if e.get("worker")
                                                 else " or ".join(e.get("owners") or ["unknown"])) + ")"
                        for e in w["effects"] if e["t"] is not None)
        ks = ", ".join(f"{k['worker']} attempt {k['attempt']} at +{k['t']:.3f} s" for k in w["kills"][:3])
        text += (f" Witness: {w['id']} {w['kind']}" + (f", applied at {eff}" if eff else "")
                 + (f"; kill(s): {ks}" if ks else "")
                 + NO_KILL.get(w.get("explained_by"), "") + ".")
    text += "".join(f" Warning: {x}." for x in warnings)
    why = [f"Why the run did not finish: {c['unfinished']}."] if c.get("unfinished") else []
    d["summary_detail"] = why + [text.strip()] + list(d.get("summary_detail") or [])


NO_KILL = {"group change": " (no kill: its partition moved to another attempt at a group change)",
           "rebalance": " (no kill: the same attempt applied it again across a rebalance of the group, e.g. a "
                        "transaction aborted there)",
           "unexplained": " (no kill, no group change: unexplained)"}


def no_kill_sentence(reasons: dict) -> str:
    """How many duplicated ids no kill explains, and what does."""
    said = [(reasons.get(k, 0), words) for k, words in (
        ("rebalance", "applied twice by the same attempt across a rebalance"),
        ("group change", "moved to another attempt at a group change"), ("unexplained", "unexplained"))]
    n = sum(x for x, _ in said)
    if not n:
        return ""
    return f" {n:,} duplicated id(s) had no kill: " + ", ".join(f"{x:,} {w}" for x, w in said if x) + "."
