"""The report's one sentence: what happened, for the terminal, Markdown and HTML alike.

Built from the report's own data (its counts, ledger, output, service, reused
keys, faults' sentences and timings), so `harness report` can write it again
from a report.json; apart from build.py, which assembles that data.
"""


def _n(v) -> str:
    return "unknown" if v is None else f"{v:,}"


def summarize(d: dict, fault_sentences: list[str] | None = None) -> str:
    """One sentence that says what happened, for the terminal, Markdown and HTML alike."""
    c, led, exp = d["counts"], d["ledger"], d["experiment"]
    n = len(d["crashes"])
    how = {"as-predicted": ("exactly as predicted from the crash log" if n else "exactly as predicted")
           if d["predicted"]["exact"] else "within the predicted bounds",
           "unexpected": "NOT as predicted", "incomplete": "but the run did not finish",
           "interrupted": "but the run was interrupted",
           "audit-failed": "but the audit could not measure everything"}[d["verdict"]]
    parts = []
    if led.get("actual_total") is not None or d["stack"].get("ledger_table"):
        parts.append(f"{_n(c['lost'])} lost and {_n(c['duplicates'])} duplicated effects of {c['sent']:,} payments "
                     f"(ledger {_n(led.get('actual_total'))} of {led['expected_total']:,})")
    bal = d.get("accounts")
    if bal:
        off = [r for r in bal["accounts"] if r["actual"] is not None and r["actual"] != r["expected"]]
        if bal["actual_total"] is None:
            parts.append("balances unknown")
        elif off:
            parts.append(f"{len(off)} of {len(bal['accounts'])} account balances off by "
                         f"{bal['actual_total'] - bal['expected_total']:+,} in total")
        else:
            parts.append(f"all {len(bal['accounts'])} account balances exact")
    ko = d.get("kafka_output")
    if ko:
        rc, ru = ko["read_committed"], ko["read_uncommitted"]
        parts.append(f"read_committed output {_n(rc['records'])} records with {_n(rc['duplicates'])} duplicates and "
                     f"{_n(rc['lost'])} lost; read_uncommitted {_n(ru['records'])} records")
    prod = (ko or {}).get("delivery_log")
    if prod:
        if (d.get("params") or {}).get("acks") == "0":
            parts.append(f"the producer under test sent {_n(prod['acked'])} records with acks=0, none acknowledged "
                         f"({_n(prod['unacked'])} failed before they left), and {_n(prod['reordered'])} reordered")
        else:
            parts.append(f"the producer under test had {_n(prod['acked'])} records acknowledged "
                         f"({_n(prod['unacked'])} never acknowledged) and {_n(prod['reordered'])} reordered")
    svc = d.get("service")
    if svc:
        parts.append(f"service rows {_n(svc['rows'])}, events {_n(svc['events'])}: {_n(svc['unpublished'])} rows "
                     f"without an event, {_n(svc['orphaned'])} events without a row, {_n(svc['event_duplicates'])} "
                     f"duplicate events in the topic")
    ru = d.get("reuse")
    if ru:
        rejected = f"{_n(ru['rejected'])} rejected" if d["stack"].get("rejects_table") else "none rejected"
        parts.append(f"of {ru['reused']:,} requests that reused a payment's id with another amount, "
                     f"{_n(ru['hidden'])} hidden (skipped as redeliveries), {rejected} and {_n(ru['applied'])} applied")
    if c.get("unprocessed"):
        parts.append(f"{c['unprocessed']:,} payments not yet processed when the run stopped (not counted as lost)")
    faults = f"after {n:,} crashes" if n else "with no planned crash"
    text = f"{exp}: " + "; ".join(parts) + f" {faults}, {how}."
    if ko and led.get("actual_total") is not None and c["duplicates"] and ko["read_committed"]["duplicates"] == 0:
        text += (f" Kafka EOS covered the topic (0 duplicates) and not the database "
                 f"({c['duplicates']:,} duplicate charges).")
    calls = d.get("outside_calls")
    if calls and calls.get("calls_with_unknown_outcome"):
        text += (f" {_n(calls['calls_with_unknown_outcome'])} call(s) to the provider got no answer once sent "
                 f"(whether each charged was unknown to its caller) and were made again.")
    text += "".join(s for s in (fault_sentences or []) if s)
    med = d["timings"].get("read_committed_stall_median_seconds")
    if med is not None:
        text += f" read_committed readers of the crashed worker's output stalled {med:.2f} s (median) after each crash."
    g = d.get("consumer_group")
    if g:
        text += (f" As members of a consumer group ({g['protocol']} protocol) the workers received "
                 f"{g['assignments']} assignments and "
                 f"{g['revocations']} revocations ({g['revoked_partitions']} partitions revoked, "
                 f"{g['commits_lost']} commits lost to a rebalance).")
    deaths = d["verdict_detail"].get("unplanned_deaths") or []
    if deaths:
        text += f" {len(deaths)} worker death(s) no fault caused (see verdict_detail.unplanned_deaths)."
    stopped = d["verdict_detail"].get("killed_at_stop") or []
    if stopped:
        text += (f" The stop SIGKILLed {len(stopped)} busy worker(s) where they stood ("
                 + ", ".join(f"{x['worker']} attempt {x['attempt']}" for x in stopped[:10])
                 + "): what they had done since their last commit is undescribed, so the numbers it can "
                   "change are bounds.")
        fenced = sum(1 for x in stopped if x.get("transaction") == "fenced")
        if fenced:
            text += (f" The harness fenced their transactional.id ({fenced}), aborting the transactions its stop "
                     f"left open, before the final read.")
    logs = d.get("worker_logs") or {}
    cut = {k: n for k, n in (logs.get("dropped_bytes") or {}).items() if n != 0}
    if cut:
        text += (f" Worker logs are capped at {logs['cap_bytes']:,} bytes a slot; past it the consumer's output was "
                 "dropped (" + ", ".join(f"{k}: {'unknown' if n is None else format(n, ',')} bytes"
                                          for k, n in sorted(cut.items())) + ").")
    left = d["verdict_detail"].get("left_behind") or []
    if left:
        text += (f" {len(left)} process(es) the consumer left behind were ended (pids "
                 + ", ".join(str(x["pid"]) for x in left[:10]) + "; see verdict_detail.left_behind).")
    classes = (d.get("anomaly_classes") or {}).get("classes") or {}
    own = left_open_by_stop(d)
    bad = [f"{name} ({c['count']:,})" for name, c in classes.items()
           if c["count"] and not c["allowed"] and not (name == "hanging-transaction" and own)]
    if bad:
        text += f" Forbidden anomalies: {', '.join(bad)} (see anomaly_classes)."
    if own:
        text += (f" {own} transaction(s) still open at the end were left by the harness's own stop (it SIGKILLed "
                 f"their workers), not by the system under test.")
    errs = d["verdict_detail"].get("audit_errors") or []
    if errs:
        text += f" Audit error: {errs[0]}."
    return text


def left_open_by_stop(d: dict) -> int:
    """How many of the run's hanging transactions its own stop left: when the stop SIGKILLed busy workers
    (an interrupt, a time limit) and no more transactions hang than it killed workers, they are the harness's,
    not an anomaly of the system under test; 0 otherwise."""
    stopped = (d.get("verdict_detail") or {}).get("killed_at_stop") or []
    hanging = (((d.get("anomaly_classes") or {}).get("classes") or {}).get("hanging-transaction") or {}).get("count")
    return hanging if stopped and isinstance(hanging, int) and 0 < hanging <= len(stopped) else 0
