"""`harness audit RUN`: recount a finished run from the stack and set it beside its report.

Exit 0 when every number both sides state agrees, 1 when one differs (the
ids named), 2 when the data cannot be read: the stack is down (start it with
`harness up`; a run keeps its topics and tables until `harness clean`), or
the run's topics or tables are gone, or a report.json is not a valid report
(checked before anything is read: reporting/validate.py). A suite folder audits
each of its runs. Names and ids are printed escaped (harness/core/escape.py).

An output topic is recounted by the run's own rule (checker/kafka_output.audited):
one the experiment requires always, one it creates only for a consumer that may
produce (custom's) only when it holds records; left out, the audit says so in one
line instead of counting every id as missing there.

No SQL is ever taken from a report (anyone can edit one): a custom run that
counted its effects with `--audit-sql` is recounted by that query only when it
is given again here, and then it runs as `checker/user_sql` runs SQL the
harness did not write (the stack's read-only role, a read-only transaction).
Without it the ledger is not recounted, and the audit says so and exits 2.
"""

import json
import sys
from pathlib import Path

import click

from ...core.errors import HarnessError
from .stack_options import stack_options


def _stack(stack_kind, bootstrap_servers, postgres_dsn, run_id):
    from ...stack.resolve import current
    stack = current(stack_kind, bootstrap_servers, postgres_dsn)
    if stack is None or not stack.healthy:
        raise HarnessError(f"the stack is down: start it with `harness up` (a run's data is kept until "
                           f"`harness clean`), then `harness audit {run_id}`")
    return stack


def audit_folder(folder: Path, stack, audit_sql: str | None = None,
                 notes: list | None = None) -> tuple[list, str | None]:
    """(rows, None), or ([], why the data cannot be read). `audit_sql` is the user's --audit-sql (never the
    report's); ("error" or "note", text) lines on what was not recounted, and why, are appended to `notes`."""
    from ...checker import crosscheck, recount, user_sql
    from ...workload.naming import RunNames
    from ...reporting.validate import read_report
    try:
        report, _notes = read_report(folder / "report.json")   # strict JSON, its schema: one line if not
    except HarnessError as e:
        return [], str(e)
    why = crosscheck.shape_error(report)
    if why:
        return [], f"{folder / 'report.json'} is not a run's report: {why}"
    st = report.get("stack") or {}
    foreign = foreign_stores(report)
    if foreign:
        return [], (f"{folder / 'report.json'} names {foreign}, which run {report.get('run_id')!r} cannot have "
                    f"written: nothing was read")
    where = st.get("bootstrap_servers")
    elsewhere = f" (the run used Kafka at {where}; this stack is at {stack.bootstrap_servers})" \
        if where and where != stack.bootstrap_servers else ""
    try:
        inp = recount.read_topic(stack.bootstrap_servers, st["input_topic"], "read_uncommitted")
        sent = {k: v for k, v in inp.values.items() if k is not None}
        query, skipped = _effects_query(folder, report, audit_sql, notes if notes is not None else [])
        effects = recount.effects_from_sql(user_sql.dsn_for(stack), query) if query else None
        ledger = recount.recount_ledger(stack.postgres_dsn, st["ledger_table"], st.get("dedupe_table"), sent,
                                        effects) if (st.get("ledger_table") or query) and not skipped else None
        outputs = {iso: recount.recount_output(recount.read_topic(stack.bootstrap_servers, st["output_topic"], iso), sent)
                   for iso in ("read_committed", "read_uncommitted")} if st.get("output_topic") else {}
        unused = _unused_output(report, outputs)
        if unused:
            outputs = {}
            if notes is not None:
                notes.append(("note", f"{folder.name}: the output topic holds no record and {unused} does not "
                                      f"require one: not audited (the run's own audit leaves such a topic out)"))
        accounts = recount.recount_accounts(stack.postgres_dsn, st["accounts_table"], sent, inp.accounts) \
            if st.get("accounts_table") else None
        # The run's own rejects table, whatever the report says of it: it is used when it exists.
        reuse = recount.recount_reuse(stack.postgres_dsn, st["ledger_table"],
                                      RunNames(str(report.get("run_id"))).rejects_table, inp.reused) \
            if st.get("ledger_table") and (inp.reused or report.get("reuse") or st.get("rejects_table")) else None
        # A run with a dead-letter topic (its report has the section): its own topic, never a name from the report.
        dead = recount.dead_lettered(recount.read_topic(stack.bootstrap_servers, RunNames(str(report.get("run_id")))
                                                        .dead_letter_topic, "read_uncommitted"), st["input_topic"], inp) \
            if isinstance(report.get("dead_letter"), dict) else None
        service = None
        svc = recount.service_stores(report)
        if svc:
            events = recount.read_topic(stack.bootstrap_servers, svc["events_topic"], "read_committed")
            service = recount.recount_service(stack.postgres_dsn, svc["rows_table"], svc.get("outbox_table"), events)
    except recount.DataGone as e:
        return [], f"the run's data is gone: {e} (removed by `harness clean`?){elsewhere}"
    except recount.Unreadable as e:
        return [], f"cannot read the run's data: {e}"
    except (KeyError, TypeError):
        return [], f"{folder / 'report.json'} does not name the run's topics and tables"
    rows, why = crosscheck.judge(report, sent, ledger, outputs, service, accounts, reuse, dead)
    if skipped and not why:
        c = report.get("counts") or {}
        rows.insert(1, crosscheck.Row("ledger", "effects (not recounted)",
                                      c.get("effects") if type(c.get("effects")) is int else None, None))
    return rows, (f"{folder / 'report.json'} is not a run's report: {why}" if why else None)


def _unused_output(report: dict, outputs: dict) -> str | None:
    """The experiment's name when its output topic is left out as the run's own audit leaves it out
    (checker/kafka_output.audited): the experiment only creates it for a consumer that may produce
    (custom's `Stores.output_if_written`), it holds no record, and the report states none read there
    either (a report that does would differ from the empty topic, and is shown so). None: recount it.
    The experiment's declaration decides, not the report: an experiment that requires its output topic,
    or one this harness does not know, has it recounted even when it is empty."""
    from ...checker.kafka_output import audited
    from ...experiments import REGISTRY
    exp = REGISTRY.get(str(report.get("experiment")))
    if not outputs or exp is None:
        return None
    ko = report.get("kafka_output") or {}

    def stated(iso):        # what the report says the run read (unknown: no claim; a wrong type: judged later)
        rep = ko.get(iso)
        if rep is None or isinstance(rep, dict) and rep.get("records") is None:
            return 0
        return rep.get("records") if isinstance(rep, dict) else rep
    counts = [o.records for o in outputs.values()] + [stated(iso) for iso in outputs]
    return None if audited(exp.stores.output, counts) else exp.name


def _effects_query(folder: Path, report: dict, given: str | None, notes: list) -> tuple[str | None, bool]:
    """(the query that counts the effects, whether the ledger recount is skipped). Only `given` (the
    command line's --audit-sql) is ever run; a report that names its own query without it is skipped."""
    named = (report.get("params") or {}).get("audit_sql")
    if given is not None:
        if named is not None and named != given:
            notes.append(("note", f"{folder.name}: --audit-sql is not the query its report names; the effects "
                                  f"are counted by the one given here"))
        return given, False
    if named is not None:
        notes.append(("error", f"{folder.name}: the ledger is not recounted: the run counted its effects with "
                               f"its own --audit-sql, and a report's SQL is never run; give the query again: "
                               f"harness audit RUN --audit-sql QUERY"))
        return None, True
    return None, False


def foreign_stores(report: dict) -> str | None:
    """The first topic or table the report names that is not its run's own (None when all are).

    `harness audit` reads only what the run wrote: a report.json edited to name another table or topic
    (someone's `public.users`) is refused before anything is read."""
    from ...workload.naming import RunNames
    st = report.get("stack") or {}
    try:
        names = RunNames(str(report.get("run_id")))
        own = {"input_topic": names.input_topic, "output_topic": names.output_topic,
               "ledger_table": names.ledger_table, "dedupe_table": names.dedupe_table,
               "accounts_table": names.accounts_table, "rejects_table": names.rejects_table}
    except Exception:  # noqa: BLE001 - an id this harness could not have made
        return f"run id {report.get('run_id')!r}"
    for key, mine in own.items():
        if st.get(key) not in (None, mine):
            return f"{key} {st.get(key)!r}"
    return None


def print_rows(name: str, rows: list) -> None:
    """The rows as a table. Names and ids come from the report and the stores, so each is shown as plain
    text (escape.term: no terminal escape, no line break) and never read as rich markup."""
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    from ...core.escape import term

    def cell(v) -> Text:
        return Text(term(v))
    t = Table(title=Text(f"audit of {term(name)}"), title_justify="left")
    for col, just in (("store", "left"), ("metric", "left"), ("report", "right"), ("recount", "right"), ("", "left")):
        t.add_column(col, justify=just)
    for r in rows:
        mark = {True: "agrees", False: "DIFFERS", None: "not stated"}[r.agrees]
        t.add_row(cell(r.store), cell(r.metric), cell("unknown" if r.reported is None else _number(r.reported)),
                  cell("unknown" if r.recounted is None else _number(r.recounted)), cell(mark))
    Console(soft_wrap=True).print(t)
    for r in rows:
        if r.agrees is False:
            click.echo(term(f"{r.store} {r.metric}: ") + (
                f"{r.ids_are}: {', '.join(term(i) for i in r.ids)}" if r.ids
                else "every id involved is named by the report or its crash records; the counts differ"))


def _number(v) -> str:
    return f"{v:,}" if isinstance(v, (int, float)) and not isinstance(v, bool) else str(v)


@click.command("audit")
@click.argument("run")
@click.option("--reports-dir", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Where run ids (and `latest`) are looked up [default: $HARNESS_REPORTS or reports/].")
@click.option("--json", "as_json", is_flag=True, help="Print the rows as JSON (for scripts).")
@click.option("--audit-sql", "audit_sql", default=None, metavar="QUERY",
              help="Count the effects with this query, returning (message_id, amount) rows, instead of the "
                   "ledger: a custom run's own --audit-sql, given again (a report's copy is never run). It runs "
                   "read-only, as the stack's read-only role when it has one.")
@stack_options
def audit(run, reports_dir, as_json, audit_sql, stack_kind, bootstrap_servers, postgres_dsn):
    """Recount a finished run from Kafka and Postgres and compare with its report.

    RUN is a run folder, a run id under the reports folder, `latest`, or a
    suite folder (each of its runs). The recount shares no code with the
    run's own audit: it reads the input topic for what was sent, counts the
    ledger, dedupe and accounts tables with plain SQL (the queries every report
    prints under "Audit it yourself"), and reads the output topic afresh with
    read_committed and read_uncommitted. It starts nothing.

    \b
    Exit status: 0 the report and the recount agree, 1 they differ (the ids
    are named), 2 the data is gone, the stack is down, or a custom run's
    ledger was not recounted (its --audit-sql not given again).

    \b
    Examples:
      harness audit latest
      harness up && harness audit 20261130T091907.230-dedupe-771018
    """
    from ...reporting.compare_targets import find_folder
    from ...core.escape import term, within
    folder = find_folder(run, reports_dir)
    folder = folder.parent if folder.is_file() else folder
    if (folder / "suite.json").is_file():
        # Only the suite's own run folders: a link out of the suite folder is not followed.
        runs = sorted(p.parent for p in folder.glob("*/report.json") if within(folder, f"{p.parent.name}/report.json"))
        if not runs:
            raise HarnessError(f"the suite in {term(str(folder))} has no run report to recount: none of its runs "
                               f"wrote one (suite.md says why)")
    elif (folder / "report.json").is_file():
        runs = [folder]
    else:
        raise HarnessError(f"{term(str(folder))} has no report.json (nor suite.json): not a run or suite folder")
    if audit_sql is not None and not audit_sql.strip():
        raise HarnessError("--audit-sql is empty")
    from ...reporting.validate import read_report
    for f in runs:   # every report is valid (strict JSON, its schema) before the stack is even asked
        read_report(f / "report.json")
    stack = _stack(stack_kind, bootstrap_servers, postgres_dsn, run)
    from ...checker.crosscheck import verdict
    results, gone, differ, skipped = {}, [], False, []
    for f in runs:
        rows, why = audit_folder(f, stack, audit_sql, skipped)
        if why:
            gone.append(f"{f.name}: {why}")
            continue
        results[f.name] = rows
        differ = differ or not verdict(rows)
    if as_json:
        click.echo(json.dumps({name: [{**r.__dict__, "agrees": r.agrees, "ids": r.ids if r.agrees is False else []}
                                      for r in rows]
                               for name, rows in results.items()}, indent=2))
    else:
        for name, rows in results.items():
            print_rows(name, rows)
    for kind, line in skipped:
        click.echo(f"{kind}: {term(line)}", err=True)
    for line in gone:
        click.echo(f"error: {term(line)}", err=True)
    if gone or any(kind == "error" for kind, _ in skipped):
        sys.exit(2)
    if differ:
        click.echo("the report and the recount DIFFER (see the rows marked DIFFERS)", err=True)
        sys.exit(1)
    click.echo(f"the report and the recount agree ({len(results)} run{'s' if len(results) != 1 else ''})", err=True)

