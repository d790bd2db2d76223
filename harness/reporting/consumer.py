"""The `consumer` section of a `custom` run (a consumer the user brought), as rows both renderings share.

Markdown and HTML show the same things from report.json's `consumer`: the claim
and whether it held, the kills that landed and the restarts, the warnings when
the kills mean little, per kill what its victim could damage and how long its
partitions took to commit again, and per violating id its witnesses (each
effect's time and the attempt that applied it, and the kill that explains it),
so a reader sees which kill caused which duplicate.
"""

from ..core.escape import md
from ..experiments.custom.custom_report import NO_KILL
from .shared import fmt


def facts(c: dict) -> list[tuple[str, str]]:
    held = {True: "held", False: "BROKEN", None: "not judged (the run did not finish, or the audit failed)"}
    return [("command", c.get("command") or ""),
            ("claim", f"{c['claim']}: {held[c.get('claim_held')]}"),
            ("effects counted by", "your --audit-sql query" if c.get("audit") == "audit-sql" else "the ledger table"),
            ("partitions owned by", _membership(c)),
            ("kills landed", fmt(c.get("kills_landed")) + _by_state(c)),
            ("first committed offset", _secs(c.get("first_commit_seconds"))),
            ("after a kill, its partitions committed again", f"median {_secs(c.get('restart_median_seconds'))}, "
                                                             f"max {_secs(c.get('restart_max_seconds'))}"
             + (f" ({fmt(c['killed_again_before_recovery'])} kill(s) had another kill strike before their "
                f"partitions recovered: not counted)" if c.get("killed_again_before_recovery") else "")),
            ("kills between an effect and its commit", fmt(c.get("kills_in_gap")))] \
        + ([("why the run did not finish", c["unfinished"])] if c.get("unfinished") else [])


def _membership(c: dict) -> str:
    if c.get("membership") != "group":
        return "HARNESS_PARTITIONS (your consumer assigns them)"
    session = c.get("session_timeout_ms")
    tied = c.get("members_tied") or {}
    return (f"the group ({c.get('protocol') or 'unknown'} protocol; session timeout "
            + (f"{session} ms" if session is not None else "set by your client, not shown by the broker")
            + f"); members tied by client.id {fmt(tied.get('client.id'))}, by first appearance "
            f"{fmt(tied.get('first appearance'))}, not tied {fmt(c.get('members_unidentified'))}")


def _by_state(c: dict) -> str:
    states = c.get("kills_by_state") or {}
    return (" (" + ", ".join(f"{fmt(n)} {s}" for s, n in states.items()) + ")") if states else ""


def witness_rows(c: dict) -> list[tuple[str, str, str, str, str]]:
    """(id, what, slot and partition, effects, kills) per witnessed id."""
    rows = []
    for w in c.get("witnesses") or []:
        effects = ", ".join(f"{_at(e.get('t'))} ({_who(e)})" for e in w.get("effects") or [])
        if w.get("explained_by") in NO_KILL:
            kills_note = NO_KILL[w["explained_by"]]
        elif w.get("kind") == "lost" and w.get("committed_past_at") is not None:
            kills_note = f" (the group's commit passed it at {_at(w['committed_past_at'])})"
        else:
            kills_note = ""
        kills = ", ".join(f"{k.get('worker')} attempt {fmt(k.get('attempt'))} pid {k.get('pid')} at {_at(k.get('t'))}"
                          for k in w.get("kills") or [])
        rows.append((w["id"], w["kind"], f"{w.get('worker') or 'unknown'} / partition {fmt(w.get('partition'))}",
                     effects or "none", (kills or "none") + kills_note))
    return rows


def _who(effect: dict) -> str:
    if effect.get("worker"):
        return f"{effect['worker']} attempt {fmt(effect.get('attempt'))}"
    if effect.get("owners"):
        return " or ".join(effect["owners"])
    return f"attempt {fmt(effect.get('attempt'))}"


KILL_HEADS = ("#", "worker", "attempt", "pid", "at", "could it do damage", "its partitions: last commit",
              "effects past it", "partitions committed again after", "duplicated ids it explains")


def kill_rows(c: dict) -> list[tuple]:
    """One row per kill (KILL_HEADS)."""
    return [(str(i), k.get("worker") or "", fmt(k.get("attempt")), str(k.get("pid") or ""), _at(k.get("t")),
             k.get("state") or "unknown",
             ", ".join(f"{p}: {fmt(o)}" for p, o in (k.get("committed") or {}).items()) or "none",
             fmt(k.get("effects_since_commit")), _secs(k.get("stall_seconds")), fmt(k.get("duplicates_explained")))
            for i, k in enumerate(c.get("kills") or [], 1)]


def _secs(v) -> str:
    return "unknown" if v is None else f"{v:.3f} s"


def _at(v) -> str:
    return "unknown" if v is None else f"+{v:.3f} s"


def markdown(c: dict) -> list[str]:
    out = ["", "## Your consumer", "", "| | |", "| --- | --- |"]
    out += [_row(row) for row in facts(c)]
    out += [f"\n**Warning:** {md(w)}." for w in c.get("warnings") or []]
    rows = witness_rows(c)
    if rows:
        out += ["", "### Witnesses (times since the workers started)", "",
                "| id | what | slot / partition | effects applied at | kills |", "| --- | --- | --- | --- | --- |"]
        out += [_row(r) for r in rows]
    kills = kill_rows(c)
    if kills:
        out += ["", "### Kills", "", "| " + " | ".join(KILL_HEADS) + " |",
                "| ---: | --- | ---: | ---: | ---: | --- | --- | ---: | ---: | ---: |"]
        out += [_row(r) for r in kills[:100]]
    return out


def _row(cells) -> str:
    """One Markdown table row, each cell escaped (report.json is not trusted)."""
    return "| " + " | ".join(md(c) for c in cells) + " |"
