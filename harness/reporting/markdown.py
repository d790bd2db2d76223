"""report.md: the scoreboard a person reads first, then parameters and crashes.

Every value taken from report.json goes through escape.md (or md_code, fence), so an id or a name
holding newlines, pipes, HTML or link syntax shows as text and cannot add a line, a cell or a link.
"""

from .recount_by_hand import commands
from ..core.escape import fence, md, md_code
from .legend import PREDICTED_NOTE
from .scoreboard import main_store
from .shared import dead_letter_lines, fault_table, fmt, plain


def render(r, folder=None) -> str:
    """report.md of `r`, a model.RunReport (the class is not imported: see writer.py), to be written in
    `folder` (when known: the audit command it suggests then finds it)."""
    d = r.data
    out = [f"# {md(d['experiment'])}: {md(d['verdict'])}", "", f"> {md(r.summary())}", ""]
    if r.summary_detail():
        out += [f"- {md(x)}" for x in r.summary_detail()] + [""]
    if d.get("proves"):
        out += [f"*What it proves:* {md(d['proves'])}  ", f"*Order of steps:* {md(d.get('steps', ''))}", ""]
    if d.get("lesson"):
        out += [f"**Lesson:** {md(d['lesson'])}", ""]
    if isinstance(d.get("source"), dict):
        src = d["source"]
        over = ", ".join(map(str, src.get("overridden") or [])) or "none"
        out += [f"*From the experiment file* {md_code(str(src.get('file')))} ({md(str(src.get('purpose')))}); "
                f"flags that overrode it: {md(over)}", ""]
    out += ["## Scoreboard", "", _row(r.SCOREBOARD_COLUMNS), "| --- | --- | ---: | ---: |"]
    out += [_row(row) for row in r.scoreboard()]
    out += ["", "<details><summary>What each count means</summary>", ""]
    out += [f"- **{md(m)}**: {md(text)}" for m, text in r.legend()] + ["", md(PREDICTED_NOTE), "", "</details>"]
    if isinstance(d.get("guesses"), dict):
        from .guesses import COLUMNS, board, score_line
        rows = board(d["guesses"].get("guesses") or {}, d)
        out += ["", "## Your predictions", "", f"Recorded before the run started ({md(plain(d['guesses'].get('recorded_at')))}"
                f"). {md(score_line(rows))}", "", _row(COLUMNS), "| --- | ---: | ---: | --- |"] + [_row(x) for x in rows]
    if r.balance_rows():
        out += ["", "## Balances", "", "| " + " | ".join(r.BALANCE_COLUMNS) + " |",
                "| --- |" + " ---: |" * (len(r.BALANCE_COLUMNS) - 1)]
        out += [_row(row) for row in r.balance_rows()]
    pred = d["predicted"]
    if pred.get("note"):
        out += ["", f"Note: {md(pred['note'])}"]
    if pred.get("evidence"):
        out += ["", "## What each kill cost (from the evidence)", "",
                "| worker | attempt | last applied (partition: offset) | successor resumed from | redelivered | skipped |",
                "| --- | ---: | --- | --- | ---: | ---: |"]
        out += [_row((e['worker'], e['attempt'], _offsets(e['last_applied']), _offsets(e['resumed_from']),
                      e['redelivered'], e['skipped'])) for e in pred["evidence"][:50]]
    vd = d.get("verdict_detail") or {}
    if vd.get("failed") or vd.get("differing_ids"):
        out += ["", "## What differed", ""] + [f"- {md(f)}" for f in vd.get("failed", [])]
        totals = vd.get("differing_totals") or {}
        out += [f"- {md(k)} ids ({md(fmt(totals.get(k, len(v))))}): {md(', '.join(map(str, v)))}"
                for k, v in (vd.get("differing_ids") or {}).items()]
    for e in vd.get("audit_errors") or []:
        out += ["", f"**Audit error:** {md(e)} (the affected numbers are unknown)"]
    deaths = vd.get("unplanned_deaths") or []
    if deaths:
        out += ["", f"**{len(deaths)} worker death(s) no fault caused:** " + ", ".join(
            f"{md(x['worker'])} attempt {md(x['attempt'])} (exit {md(x['exit_code'])})" for x in deaths[:10])]
    stopped = vd.get("killed_at_stop") or []
    if stopped:
        out += ["", f"**{len(stopped)} busy worker(s) SIGKILLed by the stop:** " + ", ".join(
            f"{md(x['worker'])} attempt {md(x['attempt'])} (pid {md(x['pid'])}"
            + (f"; its transaction {md(x['transaction'])}" if x.get("transaction") else "") + ")" for x in stopped[:10])]
    ended = [x for x in vd.get("unrestarted_at_stop") or [] if x.get("transaction")]
    if ended:
        out += ["", f"**{len(ended)} worker(s) crashed at their point just before the stop, no successor started:** "
                + ", ".join(f"{md(x['worker'])} attempt {md(x['attempt'])} (its transaction {md(x['transaction'])})"
                            for x in ended[:10])]
    logs = d.get("worker_logs") or {}
    cut = {k: n for k, n in (logs.get("dropped_bytes") or {}).items() if n != 0}
    if cut:
        out += ["", f"**Worker logs capped at {md(fmt(logs['cap_bytes']))} bytes a slot; output dropped past it:** "
                + ", ".join(f"{md(k)} {md(fmt(n))} bytes" for k, n in sorted(cut.items()))]
    left = vd.get("left_behind") or []
    if left:
        out += ["", f"**{len(left)} process(es) the consumer left behind were ended:** " + ", ".join(
            f"pid {md(x['pid'])} ({md(x['command'])})" for x in left[:10])]
    if d.get("consumer"):
        from .consumer import markdown as consumer_section
        out += consumer_section(d["consumer"])
    an = d["anomalies"]
    out += ["", "## Anomalies (first ids)", "", f"counted in the {md(main_store(d))}", "",
            f"- lost ({md(fmt(an['lost_total']))}): {_ids(an['lost_ids'], an['lost_total'])}",
            f"- duplicated ({md(fmt(an['duplicates_total']))}): {_ids(an['duplicate_ids'], an['duplicates_total'])}"]
    dl = d.get("dead_letter")
    if dl:
        out += [f"- {md(x)}" for x in dead_letter_lines(dl, (d.get("counts") or {}).get("dead_lettered"))]
    svc = d.get("service")
    if svc:
        for label, n, ids in (("rows without an event", svc["unpublished"], svc["unpublished_ids"]),
                              ("events without a row", svc["orphaned"], svc["orphaned_ids"]),
                              ("extra copies of events in the topic", svc["event_duplicates"],
                               svc["duplicate_event_ids"])):
            out.append(f"- {label} ({md(fmt(n))}): {_ids(ids, n)}")
    if an.get("unexpected_ids"):
        out.append(f"- effects for ids never sent: {md(', '.join(map(str, an['unexpected_ids'])))}")
    if an.get("unprocessed_total"):
        out.append(f"- not yet processed when the run stopped ({md(fmt(an['unprocessed_total']))}): "
                   f"{md(', '.join(map(str, an['unprocessed_ids'])))}")
    classes = r.anomaly_class_rows()
    if classes:
        out += ["", "## Anomaly classes (Jepsen's names)", "", md(r.history_line()), "",
                _row(r.ANOMALY_COLUMNS), "| --- | --- | ---: | --- | --- |"] + [_row(c) for c in classes]
    t = d["timings"]
    rs = t.get("restart_seconds") or []
    out += ["", "## Timings", "",
            f"- wall: {t['wall_seconds']:.1f} s, {md(fmt(t.get('messages_per_second')))} messages/s",
            f"- restarts: {len(rs)} measured, median {md(fmt(t.get('restart_median_seconds')))} s, "
            f"max {md(fmt(t.get('restart_max_seconds')))} s (SIGKILL to the restarted worker's first record)"]
    ph = t.get("phases") or {}
    if ph:
        out.append("- where the time went: " + ", ".join(f"{md(k.replace('_', ' '))} {md(fmt(v))} s"
                                                        for k, v in ph.items()))
    if t.get("read_committed_stall_median_seconds") is not None:
        out.append(f"- read_committed stall: median {md(fmt(t['read_committed_stall_median_seconds']))} s, max "
                   f"{md(fmt(t.get('read_committed_stall_max_seconds')))} s (kill to the crashed worker's next visible "
                   f"output record)")
    if d.get("kill_points"):
        out += ["", "## Kill points of this experiment", "", "| point | after | before | a crash here |",
                "| --- | --- | --- | --- |"]
        out += [_row((k['name'], k['after'], k['before'] or '(last step)', k['says'])) for k in d["kill_points"]]
    heads, rows, left_out = fault_table(d.get("faults") or [])
    if rows:
        out += ["", "## Faults", "", _row(heads), "| " + " | ".join("---" for _h in heads) + " |"]
        out += [_row(row) for row in rows]
        if left_out:
            out += ["", f"({left_out:,} more in report.json)"]
    for name, story in (d.get("fault_details") or {}).items():
        times = story.get("times_since_pause") or {}
        if times:
            out += ["", f"### {md(name)}", ""] + [f"- {md(k.replace('_', ' '))}: {v:.3f} s" for k, v in times.items()]
    out += ["", "## Parameters", "", "| parameter | value |", "| --- | --- |"]
    out += [_row(row) for row in r.parameter_rows()]
    out += ["", "## Stack and environment", "", "| | |", "| --- | --- |"]
    out += [_row(row) for row in [*{**d["stack"], **d["environment"]}.items(), *r.client_rows()]]
    crashes = d["crashes"]
    if crashes:
        out += ["", f"## Crashes ({len(crashes)})", "",
                "| # | point | message | worker | partition | offset | unacked | acked, unapplied | produced "
                "| restart s | stall s |",
                "| ---: | --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
        for i, c in enumerate(crashes[:50], 1):
            out.append(_row((i, c['point'], c.get('message_id') or '', c.get('worker') or '', fmt(c.get('partition')),
                             fmt(c.get('offset')), len(c.get('unacked') or []), len(c.get('acked_unapplied') or []),
                             len(c.get('produced') or []), fmt(c.get('restart_seconds')),
                             _opt(c.get('read_committed_stall_seconds')))))
        if len(crashes) > 50:
            out.append(f"\n... and {len(crashes) - 50} more in report.json")
    written = (d["stack"].get("tables") or []) + (d["stack"].get("topics") or [])
    out += ["", "## Audit it yourself", "",
            (f"This run wrote {', '.join(md_code(n) for n in written)}; they stay" if written else
             "The run's topics and tables stay") + f" until {md_code('harness clean ' + str(d['run_id']))}. "
            "With the stack up:", ""]
    out += fence([line for what, cmd in commands(d, folder) for line in (f"# {what}", cmd)], "bash")
    out += [""]
    return "\n".join(out)


def _row(cells) -> str:
    """One Markdown table row, each cell escaped."""
    return "| " + " | ".join(md(plain(c)) for c in cells) + " |"


def _offsets(m: dict) -> str:
    return ", ".join(f"{p}: {o}" for p, o in m.items()) or "none"


def _opt(v) -> str:
    return "" if v is None else fmt(v)


def _ids(ids: list, total) -> str:
    if total is None:
        return "unknown"
    return md(", ".join(map(str, ids))) or "none"
