"""The "Audit it yourself" section: the exact commands that re-count this run by hand.

Every report ends with them, so a reader who does not trust the harness can
check its numbers with psql and kcat alone. The SQL is the same text
`harness audit` runs (checker/recount.py); `harness env` supplies the
connection settings, so no command carries an address or a password. A
custom run's own `--audit-sql` is never printed: a report can be edited, and
these commands are pasted as the role that owns the harness schema; the
reader gives the query again (`harness audit RUN --audit-sql '<your query>'`).
"""

import shlex

from ..checker import recount

KCAT = 'kcat -C -b "$HARNESS_BOOTSTRAP_SERVERS"'
# records and duplicated records, from one pass over the keys
COUNT_KEYS = "sort | uniq -c | awk '{r += $1; if ($1 > 1) d += $1 - 1} END {print r + 0, \"records,\", d + 0, \"duplicated\"}'"


def _psql(template: str, ledger: str | None = None, dedupe: str | None = None) -> str:
    return "psql -c " + shlex.quote(recount.display(template, ledger, dedupe))


def _config(settings: bool) -> str:
    return ' -F "$HARNESS_KAFKA_CONFIG_FILE"' if settings else ""


def _kcat(topic: str, isolation: str | None = None, settings: bool = False) -> str:
    iso = f" -X isolation.level={isolation}" if isolation else ""
    return f"{KCAT}{_config(settings)}{iso} -t {shlex.quote(topic)} -e -q -f '%k\\n'"


def audit_target(run_id: str, folder=None) -> str:
    """What `harness audit` (and `harness compare`) is given to find this run: its id when its folder is the
    reports folder's `<run-id>/` (where an id is looked up), else the folder itself (a run written with --out
    elsewhere), quoted for a shell."""
    if folder is not None:
        from pathlib import Path
        from ..core.paths import reports_dir
        where = Path(folder).resolve()
        if where != (reports_dir() / str(run_id)).resolve():
            return shlex.quote(str(where))
    return shlex.quote(str(run_id))


def commands(d: dict, folder=None) -> list[tuple[str, str]]:
    """[(what it shows, command)] for a run report's data (its `stack` section names the stores); `folder`,
    when known, is where the report is written (the audit command names it when an id would not find it)."""
    st, run_id = d.get("stack") or {}, d.get("run_id", "RUN")
    # A cluster that wants credentials: kcat reads them from the client settings file `harness env` names.
    settings = st.get("kafka_auth") not in (None, "", "PLAINTEXT")
    out = [("settings for psql and kcat (after `harness up` if the stack was stopped)", 'eval "$(harness env)"')]
    if st.get("input_topic"):
        out.append(("payments sent (distinct ids on the input topic)",
                    _kcat(st["input_topic"], settings=settings) + " | sort -u | wc -l"))
    # A custom run's --audit-sql is never printed: the report file may have been edited, and a reader pastes
    # these commands as the role that owns the harness schema. The reader gives their own query again.
    custom = bool((d.get("params") or {}).get("audit_sql"))
    if custom:
        out.append(("the effects, one row each: this run used its own --audit-sql; "
                    "give that query again (not copied from this report)", "psql -c '<your query>'"))
    elif st.get("ledger_table"):
        out.append(("ledger: effects, distinct ids, total amount", _psql(recount.LEDGER_TOTALS, st["ledger_table"])))
        out.append(("ledger: ids applied more than once", _psql(recount.LEDGER_DUPLICATES, st["ledger_table"])))
    if st.get("dedupe_table"):
        out.append(("dedupe table: keys and hits", _psql(recount.DEDUPE_TOTALS, dedupe=st["dedupe_table"])))
    if isinstance(d.get("dead_letter"), dict):
        from ..workload.naming import RunNames
        topic = RunNames(str(run_id)).dead_letter_topic       # the run's own, never a name from the report
        out.append(("dead-letter topic: the input partition/offset, delivery count and reason of each dead letter "
                    "(its headers; the key is the broker's copy)",
                    f"{KCAT}{_config(settings)} -t {shlex.quote(topic)} -e -q -f '%k %h\\n'"))
    if d.get("reuse") and st.get("input_topic"):
        out.append(("requests under a reused key: ids the input topic holds more than once",
                    _kcat(st["input_topic"], settings=settings) + " | sort | uniq -d | wc -l"))
    if st.get("rejects_table"):
        out.append(("rejects: requests refused because their key holds another payload",
                    "psql -c " + shlex.quote(recount.display(recount.REJECTS_TOTALS, j=st["rejects_table"]))))
    if st.get("accounts_table"):
        out.append(("accounts: each balance", "psql -c " + shlex.quote(recount.display(recount.ACCOUNT_BALANCES,
                                                                                     a=st["accounts_table"]))))
    svc = recount.service_stores(d)
    if svc:
        out.append(("service: its rows", "psql -c " + shlex.quote(recount.display(recount.ROWS_TOTALS,
                                                                                  r=svc["rows_table"]))))
        if svc.get("outbox_table"):
            out.append(("service: its outbox, and rows the relay never marked sent",
                        "psql -c " + shlex.quote(recount.display(recount.OUTBOX_TOTALS, o=svc["outbox_table"]))))
        out.append(("service: its events topic", f"{_kcat(svc['events_topic'], 'read_committed', settings)} | {COUNT_KEYS}"))
    if st.get("output_topic"):
        for iso in ("read_committed", "read_uncommitted"):
            out.append((f"output as a {iso} reader sees it", f"{_kcat(st['output_topic'], iso, settings)} | {COUNT_KEYS}"))
    # `harness audit` runs no SQL a report names: a custom run's query must be given to it again.
    again = " --audit-sql '<your query>'" if custom else ""
    out.append(("all of the above, compared with this report", f"harness audit {audit_target(run_id, folder)}{again}"))
    return out
