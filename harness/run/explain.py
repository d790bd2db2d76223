"""`harness hunt --explain`: the broker's side of an invalid run, beside the requests the protocol proxy held.

The client's history says a payment was lost (its input offset committed, its
output never); whether a late EndTxn was applied to the transaction after the
one it belonged to (KAFKA-17754) only the brokers' own records can say. Right
after the run, while its topics are still on the local cluster, this reads
them with Kafka's DumpLogSegments (stack/broker_records.py): the coordinator's
records of the run's transactional ids, the output partitions' records and
COMMIT/ABORT markers, and the group's offset commits with the marker that
settled each. For each request `delay-request` held, it says what the
coordinator had done while it was held and what it found when it landed:
when the transaction it belonged to had ended and a later one was open under
the same producer id and epoch (transactions v1), the coordinator took the
late request for that later transaction; under v2 the epoch differs and the
request is fenced. Whether that cost a payment the offset commits and markers
say: an input offset committed while the payment's output record was
aborted, or never written. Written as broker-side.json and broker-side.md in the run's
folder. Pure but for `explain`, which reads the node folders.
"""

from __future__ import annotations

import json
from pathlib import Path

# The proxy stamps a held request's time just before it writes it, the broker its records in whole ms: a step
# this close before that time may already be the request's doing.
LANDING_SLACK_MS = 5
WINDOW_MS = 2000                # the page shows the records this near a held request
PAGE_ROWS = 40
NAME = "broker-side"


def fate(rows: list[dict], row: dict) -> str | None:
    """COMMIT or ABORT: the first marker after `row` in its partition from the same producer; None: none yet."""
    for r in rows:
        if (r["partition"] == row["partition"] and r["offset"] > row["offset"] and "marker" in r
                and r["producer_id"] == row["producer_id"]):
            return r["marker"]
    return None


def held_requests(proxy_rows: list[dict]) -> list[dict]:
    """The EndTxn requests delay-request held: when the proxy took them and when they reached the node (ms)."""
    out = []
    for r in proxy_rows:
        if r.get("action") == "delay" and r.get("api") == "EndTxn" and isinstance(r.get("time"), (int, float)):
            landed = round(r["time"] * 1000)
            out.append({"correlation_id": r.get("correlation_id"), "node": r.get("node"),
                        "taken": landed - int(r.get("held_ms") or r.get("ms") or 0), "landed": landed,
                        "client_gone": r.get("client_gone")})
    return out


def judge(held: dict, steps: list[dict]) -> dict:
    """What the coordinator did around one held EndTxn: the steps while it was held, the transaction it
    belonged to (open when the proxy took it), the one open when it landed and the step right after.
    Applied to the next transaction: the one it belonged to ended while it was held, and it landed while a later
    one was open under the same producer id and epoch (transactions v1: the coordinator cannot tell the two
    apart; v2 bumps the epoch per transaction, so the late request's older epoch is fenced)."""
    if not steps:
        return {**held, "steps_while_held": None, "completed_while_held": None, "belonged_to": None, "found": None,
                "next": None, "applied_to_next": None,
                "verdict": "unknown: no coordinator record of the run's transactional ids was found"}
    cut = held["landed"] - LANDING_SLACK_MS
    during = [s for s in steps if held["taken"] <= s["time"] < cut]
    before = [s for s in steps if s["time"] < held["taken"]]
    found = ([s for s in steps if s["time"] < cut] or [None])[-1]
    nxt = ([s for s in steps if s["time"] >= cut] or [None])[0]
    own = before[-1] if before else None
    ended = any(s["state"].startswith("Complete") for s in during)
    later = ended and found is not None and found["state"] == "Ongoing"
    same = later and own is not None and (own["producer_id"], own["epoch"]) == (found["producer_id"], found["epoch"])
    after = "" if nxt is None else f"; {nxt['time'] - held['landed']:+} ms from its landing: {nxt['state']}"
    if same:
        verdict = (f"applied to the next transaction: the one it belonged to ended while it was held, and it landed "
                   f"while a later one was open (Ongoing, {', '.join(found['partitions']) or 'no partitions'}) under "
                   f"the same producer id {found['producer_id']} and epoch {found['epoch']}{after}")
    elif later:
        verdict = (f"fenced: it landed while a later transaction was open under producer id {found['producer_id']} "
                   f"epoch {found['epoch']}, not its own ({own and own['producer_id']}, epoch {own and own['epoch']})"
                   f"{after}")
    elif ended:
        verdict = f"landed after its transaction had ended, with no transaction open: nothing to apply it to{after}"
    else:
        verdict = f"landed on its own transaction (nothing ended while it was held){after}"
    return {**held, "steps_while_held": len(during), "completed_while_held": sum(
                s["state"].startswith("Complete") for s in during),
            "belonged_to": own and {k: own[k] for k in ("producer_id", "epoch", "state")},
            "found": found and {k: found[k] for k in ("producer_id", "epoch", "state", "partitions")},
            "next": nxt and {"state": nxt["state"], "after_ms": nxt["time"] - held["landed"],
                             "partitions": nxt["partitions"]},
            "applied_to_next": bool(same), "verdict": verdict}


def lost_trace(ids: list[str], output: list[dict]) -> list[dict]:
    """Each lost payment's records in the output partitions, with the marker that settled each."""
    out = []
    for pid in ids:
        rows = [r for r in output if r.get("key") == pid]
        out.append({"id": pid, "records": [{"partition": r["partition"], "offset": r["offset"],
                                            "producer_id": r["producer_id"], "epoch": r["epoch"],
                                            "fate": fate(output, r)} for r in rows]})
    return out


def analyse(report: dict, proxy_rows: list[dict], steps: list[dict], output: list[dict], offsets: list[dict]) -> dict:
    """broker-side.json from the run's report and the parsed dumps."""
    producers = {s["producer_id"] for s in steps}
    group = (report.get("stack") or {}).get("consumer_group") or ""
    commits = [r for r in offsets if group and f'"group":"{group}"' in (r.get("key") or "")]
    anomalies = report.get("anomalies") or {}
    rc = (report.get("kafka_output") or {}).get("read_committed") or {}
    lost = sorted(set(anomalies.get("lost_ids") or []) | set(rc.get("lost_ids") or []))
    return {"run_id": report.get("run_id"), "kafka_version": (report.get("environment") or {}).get("kafka_version"),
            "transactional_ids": sorted({s["transactional_id"] for s in steps}),
            "held": [judge(h, steps) for h in held_requests(proxy_rows)],
            "coordinator": steps,
            "output_markers": [r for r in output if "marker" in r and r["producer_id"] in producers],
            "output_records": sum(1 for r in output if "marker" not in r),
            "offset_commits": [{"partition": r["partition"], "offset": r["offset"], "time": r["time"],
                                "producer_id": r["producer_id"], "epoch": r["epoch"],
                                "committed": _committed(r.get("payload")), "fate": fate(offsets, r)}
                               for r in commits],
            "lost": lost_trace(lost, output)}


def _committed(payload: str | None) -> int | None:
    try:
        return int(json.loads(payload or "")["data"]["offset"])
    except (ValueError, KeyError, TypeError):
        return None


def near(rows: list[dict], held: list[dict], key: str = "time") -> list[dict]:
    """The rows within a few seconds of a held request (all of them when nothing was held): the page's tables;
    broker-side.json keeps every row."""
    if not held:
        return rows[:PAGE_ROWS]
    return [r for r in rows if any(h["taken"] - WINDOW_MS <= r[key] <= h["landed"] + WINDOW_MS for h in held)]


def render_md(x: dict) -> str:
    t0 = min([s["time"] for s in x["coordinator"]] + [h["taken"] for h in x["held"]] or [0])
    held = x["held"]

    def at(ms):
        return f"{(ms - t0) / 1000:.3f} s"
    out = [f"# The broker's side of run {x['run_id']} (Kafka {x['kafka_version']})", "",
           "Read from a node's log folders with Kafka's DumpLogSegments right after the run; times are seconds "
           f"from the first coordinator record or held request. The tables show the records within "
           f"{WINDOW_MS // 1000} s of a held request; {NAME}.json holds them all.", "", "## Held EndTxn requests", ""]
    out += [f"- correlation id {h['correlation_id']} (node {h['node']}): held {at(h['taken'])} to {at(h['landed'])}"
            f"{', its client gone' if h['client_gone'] else ''}; while held, {_n(h['completed_while_held'])} "
            f"transaction(s) completed; {h['verdict']}." for h in x["held"]] or ["none"]
    out += ["", f"## Coordinator records ({', '.join(x['transactional_ids']) or 'none'})", "",
            "| time | producer id | epoch | state | partitions |", "| --- | --- | --- | --- | --- |"]
    out += [f"| {at(s['time'])} | {s['producer_id']} | {s['epoch']} | {s['state']} | {', '.join(s['partitions'])} |"
            for s in near(x["coordinator"], held)]
    out += ["", f"## Output partitions: {x['output_records']} records; markers", "",
            "| partition | offset | marker | producer id | epoch | time |", "| --- | --- | --- | --- | --- | --- |"]
    out += [f"| {r['partition']} | {r['offset']} | {r['marker']} | {r['producer_id']} | {r['epoch']} | {at(r['time'])} |"
            for r in near(x["output_markers"], held)]
    out += ["", "## The group's offset commits", "",
            "| partition | offset | committed input offset | producer id | epoch | settled by | time |",
            "| --- | --- | --- | --- | --- | --- | --- |"]
    out += [f"| {c['partition']} | {c['offset']} | {c['committed']} | {c['producer_id']} | {c['epoch']} | "
            f"{c['fate'] or 'no marker'} | {at(c['time'])} |" for c in near(x["offset_commits"], held)]
    out += ["", "## Lost payments in the output partitions", ""]
    out += [f"- {p['id']}: " + ("; ".join(f"{r['partition']} offset {r['offset']} (producer {r['producer_id']} "
                                           f"epoch {r['epoch']}), {r['fate'] or 'no marker'}" for r in p["records"])
                                 or "no record at all") for p in x["lost"]] or ["none"]
    return "\n".join(out) + "\n"


def _n(v) -> str:
    return "unknown" if v is None else str(v)


def summary_lines(x: dict) -> list[str]:
    applied = [h for h in x["held"] if h["applied_to_next"]]
    unknown = sum(1 for h in x["held"] if h["applied_to_next"] is None)
    return [f"broker side: {len(applied)} of {len(x['held'])} held EndTxn request(s) applied to the next "
            f"transaction" + (f" (correlation ids {', '.join(str(h['correlation_id']) for h in applied)})"
                              if applied else "") + (f", {unknown} unknown (no coordinator record found)"
                                                     if unknown else "")]


def explain(run_folder: Path, state: Path) -> dict:
    """Read the run's records from the local cluster's node folders under `state`; write broker-side.json/.md."""
    from ..core.safefile import write_text
    from ..runtime import crashlog
    from ..stack import broker_records as br
    from ..stack.local_kafka import every_node
    from ..stack.maven import resolve_tools
    report = json.loads((run_folder / "report.json").read_text())
    lib = resolve_tools(log=lambda _m: None)
    dirs = [n.data for n in every_node(state)]
    proxy = run_folder / "protocol-proxy.jsonl"
    proxy_rows = crashlog.parse(proxy.read_bytes()) if proxy.is_file() else []
    stack = report.get("stack") or {}
    steps = br.transaction_steps(br.dump(lib, br.partition_folders(dirs, "__transaction_state"),
                                         "--transaction-log-decoder"), "harness-" + report["run_id"])
    output = br.records(br.dump(lib, br.partition_folders(dirs, stack["output_topic"])))
    offsets = br.records(br.dump(lib, br.partition_folders(dirs, "__consumer_offsets"), "--offsets-decoder"))
    x = analyse(report, proxy_rows, steps, output, offsets)
    write_text(run_folder / f"{NAME}.json", json.dumps(x, indent=2) + "\n")
    write_text(run_folder / f"{NAME}.md", render_md(x))
    return x
