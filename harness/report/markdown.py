"""report.md: the scoreboard a person reads first, then parameters and crashes."""

from .model import RunReport, fmt


def render(r: RunReport) -> str:
    d = r.data
    out = [f"# {d['experiment']}: {d['verdict']}", "", f"> {r.summary()}", ""]
    if d.get("proves"):
        out += [f"*What it proves:* {d['proves']}  ", f"*Order of steps:* {d.get('steps', '')}", ""]
    out += ["## Scoreboard", "", "| metric | observed | predicted |", "| --- | ---: | ---: |"]
    out += [f"| {m} | {o} | {p} |" for m, o, p in r.scoreboard()]
    pred = d["predicted"]
    if pred.get("note"):
        out += ["", f"Note: {pred['note']}"]
    vd = d.get("verdict_detail") or {}
    if vd.get("failed") or vd.get("differing_ids"):
        out += ["", "## What differed", ""] + [f"- {f}" for f in vd.get("failed", [])]
        out += [f"- {k} ids: {', '.join(v)}" for k, v in (vd.get("differing_ids") or {}).items()]
    an = d["anomalies"]
    out += ["", "## Anomalies (first ids)", "",
            f"- lost ({fmt(an['lost_total'])}): {', '.join(an['lost_ids']) or 'none'}",
            f"- duplicated ({fmt(an['duplicates_total'])}): {', '.join(an['duplicate_ids']) or 'none'}"]
    t = d["timings"]
    rs = t.get("restart_seconds") or []
    out += ["", "## Timings", "",
            f"- wall: {t['wall_seconds']:.1f} s, {fmt(t.get('messages_per_second'))} messages/s",
            f"- restarts: {len(rs)} measured, median {fmt(t.get('restart_median_seconds'))} s, "
            f"max {fmt(t.get('restart_max_seconds'))} s (SIGKILL to the restarted worker's first record)"]
    out += ["", "## Parameters", "", "| parameter | value |", "| --- | --- |"]
    out += [f"| {k} | {v} |" for k, v in d["params"].items()]
    out += ["", "## Stack and environment", "", "| | |", "| --- | --- |"]
    out += [f"| {k} | {v} |" for k, v in {**d["stack"], **d["environment"]}.items()]
    crashes = d["crashes"]
    if crashes:
        out += ["", f"## Crashes ({len(crashes)})", "", "| # | point | message | partition | offset | unacked |",
                "| ---: | --- | --- | ---: | ---: | ---: |"]
        for i, c in enumerate(crashes[:50], 1):
            out.append(f"| {i} | {c['point']} | {c.get('message_id') or ''} | {fmt(c.get('partition'))} | "
                       f"{fmt(c.get('offset'))} | {len(c.get('unacked') or [])} |")
        if len(crashes) > 50:
            out.append(f"\n... and {len(crashes) - 50} more in report.json")
    out += ["", f"Audit it yourself: `{d['stack'].get('ledger_table') or d['stack'].get('output_topic')}` "
            f"stays in place until `harness clean {d['run_id']}`.", ""]
    return "\n".join(out)
