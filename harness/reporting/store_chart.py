"""Where exactly-once stopped, as a picture: counts grouped by the store they were read from.

For the eos family a run writes to two stores, the Kafka output topic and
(eos-boundary, eos-dedupe) the database ledger. Kafka's transactions cover the
topic only: eos-boundary's topic read with read_committed holds 0 duplicates
while its ledger holds 100. These charts put the stores side by side (a run's
chart: one group per store; a suite's: per experiment, the database's and the
topic's duplicates as bars of their own colours), so the lesson is seen, not read.
"""

from . import bars as h

TOPIC = "#2e86ab"      # the output topic's duplicates (read_committed), beside the ledger's amber


def has_topic(d: dict) -> bool:
    return isinstance(d.get("kafka_output"), dict)


def _has_ledger(d: dict) -> bool:
    return bool((d.get("stack") or {}).get("ledger_table")) or (d.get("ledger") or {}).get("actual_total") is not None


def run_store_chart(d: dict) -> str:
    """One run with an output topic: lost and duplicates per store (database ledger, topic read_committed,
    topic read_uncommitted); '' for a run without an output topic. Unmeasured numbers get no bar."""
    if not has_topic(d):
        return ""
    ko, c = d["kafka_output"], d["counts"]
    stores = []
    if _has_ledger(d):
        stores.append(("database: ledger", c.get("lost"), c.get("duplicates")))
    for iso in ("read_committed", "read_uncommitted"):
        k = ko.get(iso) if isinstance(ko.get(iso), dict) else {}
        stores.append((f"topic: {iso}", k.get("lost"), k.get("duplicates")))
    groups = [(label, [(n, v, col) for n, v, col in (("lost", lost, h.LOST), ("duplicates", dup, h.DUP))
                       if v is not None]) for label, lost, dup in stores]
    groups = [g for g in groups if g[1]]
    if not groups:
        return ""
    return (h.grouped_bars(groups, legend=[("lost", h.LOST), ("duplicated", h.DUP)], chart_id="chart-stores")
            + "<p class=muted>The same payments, counted in each store: Kafka's transactions cover the topic "
              "(what a read_committed reader sees), not a database write made beside them.</p>")


def suite_chart(experiments: list[dict]) -> str:
    """A suite's chart. With an experiment that has an output topic: per experiment, lost, duplicated in the
    database (where there is a ledger) and duplicated in the topic (read_committed), side by side; else lost
    and duplicated as every suite shows them."""
    if not any(has_topic(r) for r in experiments):
        return h.bar_chart([(r["experiment"], (r.get("counts") or {}).get("lost"),
                             (r.get("counts") or {}).get("duplicates")) for r in experiments], width=900)
    groups = []
    for r in experiments:
        c = r.get("counts") or {}
        bars = [("lost", c.get("lost"), h.LOST)]          # None (not measured) is drawn as '?', never as 0
        if _has_ledger(r):
            bars.append(("db-duplicates", c.get("duplicates"), h.DUP))
        if has_topic(r):
            rc = r["kafka_output"].get("read_committed") or {}
            bars.append(("topic-duplicates", rc.get("duplicates"), TOPIC))
        groups.append((r["experiment"], bars))
    return h.grouped_bars(groups, legend=[("lost", h.LOST), ("duplicated in the database (ledger)", h.DUP),
                                          ("duplicated in the topic (read_committed)", TOPIC)], width=900)
