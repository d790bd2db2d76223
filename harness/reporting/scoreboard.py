"""The scoreboard's rows: (metric, counted in, observed, predicted), shared by the terminal, Markdown and HTML.

Each number names the store it was read from (legend.py's names): the
database ledger, the Kafka output topic under read_committed or
read_uncommitted, a service's rows and events. The predicted column holds
predictions only; a count that does not apply to the run gets no row, and
"unknown" stays for what the harness could not measure.
"""

from . import legend as L
from .shared import CRASH_FAULTS, fmt


def has_ledger(d: dict) -> bool:
    return bool((d.get("stack") or {}).get("ledger_table")) or (d.get("ledger") or {}).get("actual_total") is not None


def main_store(d: dict) -> str:
    """Where a run's effects, duplicates and lost are counted: its ledger table, else its output topic."""
    return L.LEDGER if has_ledger(d) else L.TOPIC_RC


def rows(d: dict) -> list[tuple[str, str, str, str]]:
    """The scoreboard of report data `d`, formatted."""
    c, p, led = d["counts"], d["predicted"], d["ledger"]
    ledgered = has_ledger(d)
    head = "ledger." if ledgered else "kafka.read_committed."
    where = main_store(d)
    out = [("sent", L.INPUT, fmt(c["sent"]), ""), ("deliveries", L.WORKERS, fmt(c.get("deliveries")), "")]
    out += [("effects" if ledgered else "records", where, fmt(c["effects"]), ""),
            ("duplicates", where, fmt(c["duplicates"]), _pred(p, "duplicates", head)),
            ("lost", where, fmt(c["lost"]), _pred(p, "lost", head))]
    if "dead_lettered" in c:
        out.append(("dead-lettered", L.DEAD_LETTER, fmt(c["dead_lettered"]), _pred(p, "dead_lettered", "ledger.")))
    if c.get("unprocessed"):
        out.append(("not yet processed", where, fmt(c["unprocessed"]), ""))
    if c.get("dedupe_hits") is not None:
        out.append(("dedupe hits", L.DEDUPE, fmt(c["dedupe_hits"]), _pred(p, "dedupe_hits", "ledger.")))
    if ledgered:
        out += [("ledger total", L.LEDGER, fmt(led.get("actual_total")), ""),
                ("expected ledger total", L.AMOUNTS, fmt(led["expected_total"]), "")]
    out += _topic_rows(d, p, ledgered)
    out += _other_rows(d, p)
    return out


def _topic_rows(d: dict, p: dict, has_ledger: bool) -> list:
    ko = d.get("kafka_output")
    if not ko:
        return []
    out = []
    for iso, where in (("read_committed", L.TOPIC_RC), ("read_uncommitted", L.TOPIC_RU)):
        if iso == "read_committed" and not has_ledger:
            continue            # the headline rows above are these
        k = ko[iso]
        out += [("records", where, fmt(k["records"]), ""),
                ("duplicates", where, fmt(k["duplicates"]), _pred_kafka(p, iso, "duplicates")),
                ("lost", where, fmt(k["lost"]), _pred_kafka(p, iso, "lost"))]
    prod = ko.get("delivery_log")
    if prod:
        if (d.get("params") or {}).get("acks") == "0":     # fire and forget: a report only says it left
            out += [("sent with acks=0", L.DELIVERY_LOG, fmt(prod["acked"]), ""),
                    ("never acknowledged", L.DELIVERY_LOG, fmt(prod["unacked"]), "")]
        else:
            out += [("acknowledged", L.DELIVERY_LOG, fmt(prod["acked"]), ""),
                    ("never acknowledged", L.DELIVERY_LOG, fmt(prod["unacked"]), "")]
        out.append(("reordered", L.DELIVERY_LOG, fmt(prod["reordered"]),
                    _pred(_values(p, "producer.reordered"), "reordered", "producer.")))
    return out


def _other_rows(d: dict, p: dict) -> list:
    out = []
    g = d.get("consumer_group")
    if g:
        out += [("partition assignments", L.GROUP, fmt(g["assignments"]), ""),
                ("revocations", L.GROUP, fmt(g["revocations"]), ""),
                ("commits lost to a rebalance", L.GROUP, fmt(g["commits_lost"]), "")]
    svc, ps = d.get("service"), p.get("service") or {}
    if svc:
        exact = p.get("exact")
        out += [("service rows", L.ROWS, fmt(svc["rows"]), ""), ("events in the topic", L.EVENTS, fmt(svc["events"]), ""),
                ("rows without an event", L.ROWS, fmt(svc["unpublished"]), _pred(ps, "unpublished", exact=exact)),
                ("events without a row", L.EVENTS, fmt(svc["orphaned"]), _pred(ps, "orphaned", exact=exact)),
                ("duplicate events in the topic", L.EVENTS, fmt(svc["event_duplicates"]),
                 _pred(ps, "event_duplicates", exact=exact))]
        if svc.get("outbox_rows") is not None:
            out.append(("outbox rows unsent", L.OUTBOX, fmt(svc["outbox_unsent"]), _pred(ps, "outbox_unsent", exact=True)))
    ru, pr = d.get("reuse"), p.get("reuse") or {}
    if ru:
        rejects = (d.get("stack") or {}).get("rejects_table")
        out += [("requests under a reused key", L.INPUT, fmt(ru["reused"]), ""),
                ("  hidden", L.LEDGER, fmt(ru["hidden"]), _pred(pr, "hidden", exact=True)),
                ("  rejected", L.REJECTS, fmt(ru["rejected"]), _pred(pr, "rejected", exact=True)) if rejects
                else ("  rejected", "no rejects table", "n/a", ""),
                ("  applied", L.LEDGER, fmt(ru["applied"]), _pred(pr, "applied", exact=True))]
        if ru.get("unreached"):
            out.append(("  not reached when the run stopped", L.INPUT, fmt(ru["unreached"]), ""))
    out.append(("crashes", L.CRASH_LOG, fmt(len(d["crashes"])), ""))
    others = [f for f in d.get("faults") or [] if f.get("fault") not in CRASH_FAULTS]
    if others:
        out.append(("other faults", L.FAULT_LOG, fmt(len(others)), ""))
    deaths = (d.get("verdict_detail") or {}).get("unplanned_deaths") or []
    if deaths:
        out.append(("unplanned worker deaths", L.SUPERVISOR, fmt(len(deaths)), ""))
    return out


def legend(board: list[tuple]) -> list[tuple[str, str]]:
    """(metric, definition) of each count the scoreboard `board` shows, once each, in its order."""
    seen, out = set(), []
    for metric, *_rest in board:
        m = metric.strip()
        if m not in seen and L.definition(m):
            seen.add(m)
            out.append((m, L.definition(m)))
    return out


def _pred(p: dict, key: str, prefix: str | None = None, exact: bool | None = None) -> str:
    """The predicted value: a range `lo to hi` when both sides are bounded, else the value with `<= ` when
    it is a bound: as `exact` says when given, else as its expectation says (`prefix` + key), else as the
    prediction as a whole is exact or not."""
    rg = (p.get("ranges") or {}).get(key)
    if rg:
        return fmt(rg[0]) if rg[0] == rg[1] else f"{fmt(rg[0])} to {fmt(rg[1])}"
    v = p.get(key)
    if v is None:
        return ""
    if exact is not None:
        bound = not exact
    else:
        ops = [t.split()[1] for t in p.get("expectations") or [] if prefix and t.split()[:1] == [prefix + key]]
        bound = ops[0] == "<=" if ops else not p.get("exact", True)
    return f"{'<= ' if bound else ''}{fmt(v)}"


def _values(p: dict, metric: str) -> dict:
    """The prediction of one metric as `_pred` reads it: {key: value, expectations, exact}."""
    for t in p.get("expectations") or []:
        parts = t.split()
        if parts[:1] == [metric] and len(parts) == 3:
            return {metric.rpartition(".")[2]: int(parts[2]), "expectations": [t], "exact": parts[1] == "=="}
    return {}


def _pred_kafka(p: dict, iso: str, metric: str) -> str:
    """The prediction of one count of the output topic under `iso` ("" when there is none)."""
    k = (p.get("kafka_output") or {}).get(iso)
    if not k or k.get(metric) is None:
        return ""
    ops = [t.split()[1] for t in p.get("expectations") or [] if t.split()[:1] == [f"kafka.{iso}.{metric}"]]
    bound = ops[0] == "<=" if ops else not (p.get("exact", True) or iso == "read_committed")
    return f"{'<= ' if bound else ''}{fmt(k[metric])}"
