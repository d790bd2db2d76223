"""The report's one sentence: what happened, for the terminal, Markdown and HTML alike, and its detail.

The sentence keeps the lead numbers (lost, duplicated, of how many, the crashes, the verdict) and stays
within LIMIT characters, so a terminal's last line and a suite table's cell read at a glance; every
fact it leaves out goes, whole, into the detail (report.json's `summary_detail`), which report.md,
report.html and the terminal show under it. Built from the report's own data (its counts, ledger,
output, service, reused keys, faults' sentences and timings), so `harness report` can write it again
from a report.json; apart from build.py, which assembles that data.
"""

LIMIT = 160


def _n(v) -> str:
    return "unknown" if v is None else f"{v:,}"


def summarize(d: dict, fault_sentences: list[str] | None = None) -> str:
    """The sentence alone (at most LIMIT characters for every experiment; see compose)."""
    return compose(d, fault_sentences)[0]


def whole(d: dict) -> str:
    """The sentence followed by its detail: everything the summary of report.json `d` says."""
    return " ".join([d.get("summary") or ""] + [str(x) for x in d.get("summary_detail") or []])


def compose(d: dict, fault_sentences: list[str] | None = None) -> tuple[str, list[str]]:
    """(the sentence, the detail): the lead clause, then the other clauses in order while they fit in
    LIMIT characters; each clause left out, and every further sentence, is one item of the detail."""
    n = len(d["crashes"])
    exact_log = d["verdict"] == "as-predicted" and d["predicted"]["exact"] and n
    how = _how(d, n)
    tail = f" {f'after {n:,} crashes' if n else 'with no planned crash'}, {how}."
    (lead, _, _), *rest = _clauses(d)
    head, detail, spilled = f"{d['experiment']}: {lead}", [], False
    if exact_log and len(head + tail) > LIMIT:
        tail = tail.replace(" from the crash log", "")
        detail.append("The prediction was exact, from the crash log.")
    for clause, joiner, sentence in rest:
        spilled = spilled or len(head + joiner + clause + tail) > LIMIT
        if spilled:
            detail.append(sentence)
        else:
            head += joiner + clause
    return head + tail, detail + [s.strip() for s in _further(d, fault_sentences) if s and s.strip()]


def _how(d: dict, n: int) -> str:
    return {"as-predicted": ("exactly as predicted from the crash log" if n else "exactly as predicted")
            if d["predicted"]["exact"] else "within the predicted bounds",
            "unexpected": "NOT as predicted", "incomplete": "but the run did not finish",
            "interrupted": "but the run was interrupted",
            "audit-failed": "but the audit could not measure it all"}[d["verdict"]]


def _said(clause: str) -> str:
    """A clause as a sentence of the detail (a leading identifier such as read_committed keeps its case)."""
    first = clause.split(" ", 1)[0]
    return (clause if "_" in first else clause[:1].upper() + clause[1:]) + "."


def _clauses(d: dict) -> list[tuple[str, str, str]]:
    """(clause, what joins it to the one before, the clause as a sentence of the detail), the lead first:
    the ledger's numbers when there is a ledger, else the read_committed output's."""
    c, led = d["counts"], d["ledger"]
    out = []
    ko = d.get("kafka_output")
    if led.get("actual_total") is not None or d["stack"].get("ledger_table"):
        out.append((f"{_n(c['lost'])} lost and {_n(c['duplicates'])} duplicated effects of {c['sent']:,} payments",
                    "", ""))
        paren = f"(ledger {_n(led.get('actual_total'))} of {led['expected_total']:,})"
        out.append((paren, " ", f"The ledger's total was {_n(led.get('actual_total'))} of the expected "
                                f"{led['expected_total']:,}."))
    bal = d.get("accounts")
    if bal:
        off = [r for r in bal["accounts"] if r["actual"] is not None and r["actual"] != r["expected"]]
        out.append(("balances unknown" if bal["actual_total"] is None else
                    f"{len(off)} of {len(bal['accounts'])} account balances off by "
                    f"{bal['actual_total'] - bal['expected_total']:+,} in total" if off else
                    f"all {len(bal['accounts'])} account balances exact", "; ", ""))
    if ko:
        rc, ru = ko["read_committed"], ko["read_uncommitted"]
        out.append((f"read_committed output {_n(rc['records'])} records with {_n(rc['duplicates'])} duplicates and "
                    f"{_n(rc['lost'])} lost" if out else f"read_committed output of {c['sent']:,} payments: "
                    f"{_n(rc['records'])} records, {_n(rc['duplicates'])} duplicates, {_n(rc['lost'])} lost", "; ", ""))
        out.append((f"read_uncommitted {_n(ru['records'])} records", "; ", ""))
    prod = (ko or {}).get("delivery_log")
    if prod:
        if (d.get("params") or {}).get("acks") == "0":
            out.append((f"the producer under test sent {_n(prod['acked'])} records with acks=0, none acknowledged "
                        f"({_n(prod['unacked'])} failed before they left), and {_n(prod['reordered'])} reordered",
                        "; ", ""))
        else:
            out.append((f"the producer under test had {_n(prod['acked'])} records acknowledged "
                        f"({_n(prod['unacked'])} never acknowledged) and {_n(prod['reordered'])} reordered", "; ", ""))
    svc = d.get("service")
    if svc:
        out.append((f"service rows {_n(svc['rows'])}, events {_n(svc['events'])}: {_n(svc['unpublished'])} rows "
                    f"without an event, {_n(svc['orphaned'])} events without a row, {_n(svc['event_duplicates'])} "
                    f"duplicate events in the topic", "; ", ""))
    ru = d.get("reuse")
    if ru:
        rejected = f"{_n(ru['rejected'])} rejected" if d["stack"].get("rejects_table") else "none rejected"
        out.append((f"of {ru['reused']:,} requests that reused a payment's id with another amount, "
                    f"{_n(ru['hidden'])} hidden (skipped as redeliveries), {rejected} and {_n(ru['applied'])} applied",
                    "; ", ""))
    if "dead_lettered" in c:
        out.append((f"{_n(c['dead_lettered'])} dead-lettered (never applied, in the run's dead-letter topic: not "
                    f"counted as lost)", "; ", ""))
    if c.get("unprocessed"):
        out.append((f"{c['unprocessed']:,} payments not yet processed when the run stopped (not counted as lost)",
                    "; ", ""))
    if not out:
        out.append((f"{_n(c['lost'])} lost and {_n(c['duplicates'])} duplicated of {c['sent']:,} payments", "", ""))
    return [(clause, joiner, sentence or _said(clause)) for clause, joiner, sentence in out]


def _further(d: dict, fault_sentences: list[str] | None) -> list[str]:
    """The sentences that always go to the detail: the lesson of the EOS boundary, the faults' own
    sentences, and everything about the run's own conduct (stops, deaths, logs, leftovers, anomalies)."""
    c, led, ko = d["counts"], d["ledger"], d.get("kafka_output")
    more = []
    if ko and led.get("actual_total") is not None and c["duplicates"] and ko["read_committed"]["duplicates"] == 0:
        more.append(f"Kafka EOS covered the topic (0 duplicates) and not the database "
                    f"({c['duplicates']:,} duplicate charges).")
    calls = d.get("outside_calls")
    if calls and calls.get("calls_with_unknown_outcome"):
        more.append(f"{_n(calls['calls_with_unknown_outcome'])} call(s) to the provider got no answer once sent "
                    f"(whether each charged was unknown to its caller) and were made again.")
    more += list(fault_sentences or [])
    med = d["timings"].get("read_committed_stall_median_seconds")
    if med is not None:
        more.append(f"read_committed readers of the crashed worker's output stalled {med:.2f} s (median) after each "
                    f"crash.")
    g = d.get("consumer_group")
    if g:
        more.append(f"As members of a consumer group ({g['protocol']} protocol) the workers received "
                    f"{g['assignments']} assignments and "
                    f"{g['revocations']} revocations ({g['revoked_partitions']} partitions revoked, "
                    f"{g['commits_lost']} commits lost to a rebalance).")
    deaths = d["verdict_detail"].get("unplanned_deaths") or []
    if deaths:
        more.append(f"{len(deaths)} worker death(s) no fault caused (see verdict_detail.unplanned_deaths).")
    stopped = d["verdict_detail"].get("killed_at_stop") or []
    if stopped:
        text = (f"The stop SIGKILLed {len(stopped)} busy worker(s) where they stood ("
                + ", ".join(f"{x['worker']} attempt {x['attempt']}" for x in stopped[:10])
                + "): what they had done since their last commit is undescribed, so the numbers it can "
                  "change are bounds.")
        fenced = sum(1 for x in stopped if x.get("transaction") == "fenced")
        if fenced:
            text += (f" The harness fenced their transactional.id ({fenced}), aborting the transactions its stop "
                     f"left open, before the final read.")
        more.append(text)
    logs = d.get("worker_logs") or {}
    cut = {k: b for k, b in (logs.get("dropped_bytes") or {}).items() if b != 0}
    if cut:
        more.append(f"Worker logs are capped at {logs['cap_bytes']:,} bytes a slot; past it the consumer's output was "
                    "dropped (" + ", ".join(f"{k}: {'unknown' if b is None else format(b, ',')} bytes"
                                            for k, b in sorted(cut.items())) + ").")
    left = d["verdict_detail"].get("left_behind") or []
    if left:
        more.append(f"{len(left)} process(es) the consumer left behind were ended (pids "
                    + ", ".join(str(x["pid"]) for x in left[:10]) + "; see verdict_detail.left_behind).")
    classes = (d.get("anomaly_classes") or {}).get("classes") or {}
    from .stop_excuse import stop_excuses, unexcused
    excuses = stop_excuses(d)
    counts = {name: unexcused(d, excuses) if name == "hanging-transaction" else k["count"] for name, k in classes.items()}
    bad = [f"{name} ({counts[name]:,})" for name, k in classes.items() if counts[name] and not k["allowed"]]
    if bad:
        more.append(f"Forbidden anomalies: {', '.join(bad)} (see anomaly_classes).")
    own = [e for e in excuses if e["excused"]]
    if own:
        whose = "workers it SIGKILLed" + (" or whose crash it left without a successor"
                                          if any(e.get("unrestarted") for e in own) else "")
        more.append(f"{len(own)} transaction(s) still open at the end were the stop's: tied to {whose} "
                    f"(partition " + ", ".join(f"{e['partition']} offset {e['offset']}" for e in own[:4]) + ").")
    if len(own) < len(excuses):
        more.append(f"{len(excuses) - len(own)} transaction(s) still open at the end are tied to no worker the stop "
                    f"killed: not excused (see the anomaly table).")
    errs = d["verdict_detail"].get("audit_errors") or []
    if errs:
        more.append(f"Audit error: {errs[0]}.")
    return more
