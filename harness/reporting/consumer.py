"""The `consumer` section of a `custom` run (a consumer the user brought), as rows both renderings share.

Markdown and HTML show the same things from report.json's `consumer`: the claim
and whether it held, the kills that landed and the restarts, the warnings when
the kills mean little, and per violating id its witnesses (each effect's time and
the attempt running then, and the kills around it), so a reader sees which kill
caused which duplicate.
"""

from ..escape import md
from .shared import fmt


def facts(c: dict) -> list[tuple[str, str]]:
    held = {True: "held", False: "BROKEN", None: "not judged (the run did not finish, or the audit failed)"}
    return [("command", c.get("command") or ""),
            ("claim", f"{c['claim']}: {held[c.get('claim_held')]}"),
            ("effects counted by", "your --audit-sql query" if c.get("audit") == "audit-sql" else "the ledger table"),
            ("kills landed", fmt(c.get("kills_landed"))),
            ("first committed offset", _secs(c.get("first_commit_seconds"))),
            ("restart to next commit", f"median {_secs(c.get('restart_median_seconds'))}, "
                                       f"max {_secs(c.get('restart_max_seconds'))}")]


def witness_rows(c: dict) -> list[tuple[str, str, str, str, str]]:
    """(id, what, slot and partition, effects, kills) per witnessed id."""
    rows = []
    for w in c.get("witnesses") or []:
        effects = ", ".join(f"{_at(e.get('t'))} (attempt {fmt(e.get('attempt'))})" for e in w.get("effects") or [])
        kills = ", ".join(f"{k.get('worker')} attempt {fmt(k.get('attempt'))} pid {k.get('pid')} at {_at(k.get('t'))}"
                          for k in w.get("kills") or [])
        rows.append((w["id"], w["kind"], f"{w.get('worker') or 'unknown'} / partition {fmt(w.get('partition'))}",
                     effects or "none", kills or "none"))
    return rows


def kill_rows(c: dict) -> list[tuple[str, str, str, str, str, str]]:
    """(#, worker, attempt, pid, time, duplicated ids it explains) per kill."""
    return [(str(i), k.get("worker") or "", fmt(k.get("attempt")), str(k.get("pid") or ""), _at(k.get("t")),
             fmt(k.get("duplicates_explained")))
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
        out += ["", "### Kills", "", "| # | worker | attempt | pid | at | duplicated ids it explains |",
                "| ---: | --- | ---: | ---: | ---: | ---: |"]
        out += [_row(r) for r in kills[:100]]
    return out


def _row(cells) -> str:
    """One Markdown table row, each cell escaped (report.json is not trusted)."""
    return "| " + " | ".join(md(c) for c in cells) + " |"
