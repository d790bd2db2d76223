"""`harness run`: one experiment, from payments to verdict; its options come from the declarations.
"""

import sys

import click

from ...core.errors import HarnessError
from ...run.experiment_file import is_file_argument
from ...experiments import REGISTRY
from .stack_options import kafka_version_option, last_lines, print_folder, stack_options, with_stack


EXPERIMENT_HELP = "\n".join(f"  {name:<{max(map(len, REGISTRY))}} {e.proves}" for name, e in REGISTRY.items())
EXIT_HELP = ("\b\nExit status:\n  0 as-predicted   1 unexpected   2 bad input   "
             "3 incomplete or audit-failed   130 interrupted")


def declared_options(f):
    """Every declared run option (harness.run.params.declared) as a click option, in declaration order; an
    experiment's own default for one (key-expiry's --restart-delay) is named in its help."""
    from ...core.options import click_options
    from ...run.params import declared
    every = declared()
    own = {name: {e.name: e.defaults[name] for e in REGISTRY.values() if name in e.defaults} for name in every}
    return click_options([d.option for d in every.values()], own)(f)


def _fault_help() -> str:
    from ...faults import help_text
    return "\b\nFaults (--fault NAME[:key=value,...]):\n" + help_text()



@click.command(epilog="\b\nExperiments (kill points: `harness experiments`):\n" + EXPERIMENT_HELP + "\n\n"
             + _fault_help() + "\n\n" + EXIT_HELP + "\n\n\b\nExamples:\n"
             "  harness run offset-before\n"
             "  harness run offset-after --predict duplicates=110,lost=0\n"
             "  harness run experiments/core/offset-before.toml --messages 200\n"
             "  harness run offset-after --commit-every 10 --kill-point any\n"
             "  harness run dedupe --partitions 3 --workers 2 --kill-mode random\n"
             "  harness run eos --fault random-kill:kills=5\n"
             "  harness run key-expiry --dedupe-ttl 1 --restart-delay 4\n"
             "  harness run auto-commit --auto-commit-interval-ms 100 --kills 20\n"
             "  harness run dual-write --kill-point after-produce-before-row\n"
             "  harness run custom --worker-cmd \"python my_consumer.py\" --kills 12 --partitions 2 --workers 2\n"
             "  harness run custom --worker-cmd \"java -jar consumer.jar\" --expect at-least-once --kill-every 3\n"
             "  harness run eos --fault planned-crash --fault broker-kill:count=2   # after harness up --brokers 3\n"
             "  harness run producer --idempotence off --fault broker-pause")
@click.argument("experiment")
@declared_options
@click.option("--fault", "fault_specs", multiple=True, metavar="NAME[:k=v,...]", 
              help="A fault to inject (repeatable; replaces the experiment's default faults); the faults and "
                   "their options are listed below.")
@click.option("--out", type=click.Path(file_okay=False), default=None,
              help="Report folder (default reports/<run-id>/).")
@click.option("--predict", "predict", default=None, metavar="COUNT=N,...",
              help="Predict first: your guesses (e.g. duplicates=110,lost=0), recorded in the run folder before "
                   "the run starts; the reports show you / actual / close enough (within 10 %, exact for 0; "
                   "deliveries, effects and ledger total by their distance from what was sent).")
@click.option("--keep-stack", is_flag=True, help="Leave a stack this command started running afterwards.")
@click.option("--quiet", "-q", is_flag=True, help="No progress output (for CI); the report folder is still printed.")
@kafka_version_option
@stack_options
def run(experiment, fault_specs, out, predict, keep_stack, quiet, stack_kind, bootstrap_servers, postgres_dsn,
        **options):
    """Run one experiment: produce payments, crash workers, audit, judge, report.

    EXPERIMENT is a kind (listed below), or an experiment file (FILE.toml,
    `harness experiments` lists those under experiments/): the run it
    describes, with any flag given beside it over the file's value (the
    report records the file and the flags that overrode it).

    With no stack configured it starts the local one (Kafka and PostgreSQL as
    processes) and stops what it started afterwards, unless --keep-stack or
    another command still uses it; a stack started by `harness up` is reused
    and left running. The last line printed is the report folder
    (report.json, report.md, report.html).
    """
    from ...run.params import RunParams, resolve
    from ...reporting import guesses
    from ...run.runner import EXIT_CODES
    guesses.expect(guesses.parse_spec(predict) if predict is not None else None)     # bad guesses: one line, now
    local = stack_kind == "local" and not (bootstrap_servers or postgres_dsn)
    if is_file_argument(experiment):
        resolved = _from_file(experiment, fault_specs, options, local, bool(bootstrap_servers or postgres_dsn))
    else:
        resolved = resolve(RunParams(experiment, faults=fault_specs, **options))
    params = resolved.params
    if local:
        _check_local_size_for_faults(resolved.faults)      # before anything starts
        _check_workload_fits(params, resolved.exp)
    from pathlib import Path
    from ...core.paths import refuse_overlap, reports_dir
    from ...core.rundir import check_creatable, check_run_dir
    refuse_overlap(out or reports_dir(), "--out" if out else "the reports folder")
    if out:   # before any stack starts; the runner claims the folder for good
        check_run_dir(Path(out))
    else:
        check_creatable(reports_dir())
    stopped = []
    from ...core.errors import ReportNotWritten
    from ...core.escape import term
    try:
        report, folder = with_stack(stack_kind, bootstrap_servers, postgres_dsn, keep_stack, quiet,
                                     lambda stack, _log: _run_one(params, stack, out, quiet), stopped=stopped)
    except ReportNotWritten as e:
        if e.kept is None:
            raise
        click.echo(f"error: {term(e)}", err=True)      # why, in one line; then where the report is, last
        print_folder(e.kept)
        sys.exit(e.exit_status)
    last_lines(folder, "report.html", stopped)
    print_folder(folder)
    sys.exit(EXIT_CODES.get(report.verdict, 1))



def _from_file(path, fault_specs, options, local, existing):
    """The run an experiment file describes, with the flags given beside it over its values; the report
    records the file and the flags that overrode it. A mistake in the file is one line naming it. The
    file's Kafka release is asked for only where the run may start a stack (not on an `existing` cluster,
    such as a suite's runs: the stack runs what it runs)."""
    from ...run.experiment_file import check_stack_needs, load, run_kwargs
    from ...run.params import RunParams, resolve
    from ...reporting.build import record_source
    from ...stack import kafka_versions
    f = load(path)
    values, faults, overridden = run_kwargs(f, options, fault_specs)
    if kafka_versions.requested() is None and f.stack.get("kafka_version") and not existing:
        kafka_versions.request(f.stack["kafka_version"])
    elif kafka_versions.requested() is not None and f.stack.get("kafka_version"):
        overridden = sorted(set(overridden) | {"--kafka-version"})
    try:
        resolved = resolve(RunParams(f.experiment, faults=faults, **values))
    except HarnessError as e:
        raise HarnessError(f"{f.path}: {e}") from None
    check_stack_needs(f, local)
    record_source({"file": str(path), "purpose": f.purpose, "overridden": overridden})
    return resolved


def _check_local_size_for_faults(faults) -> None:
    """A broker fault needs the 3-broker cluster: on a local folder of one broker, say so in one line
    before a stack is started (the fault checks the stack itself again once there is one)."""
    from ...faults.broker import BrokerFault
    from ...stack.local_record import size
    if any(isinstance(f, BrokerFault) for f in faults) and size() < 3:
        name = next(f.name for f in faults if isinstance(f, BrokerFault))
        raise HarnessError(f"--fault {name} needs the 3-broker cluster, but this stack has {size()} broker(s): "
                           f"start it with `harness up --brokers 3` (after `harness down --purge`)")


def _check_workload_fits(params, exp) -> None:
    """The local stack keeps its data in the state folder: a workload that cannot fit its disk's free space
    is refused in one line with both numbers (workload/footprint.py), before a stack starts."""
    import shutil
    from ...core.escape import term
    from ...core.paths import state_dir
    from ...stack.local_record import size
    from ...workload.footprint import estimate, refusal
    folder = state_dir()
    existing = next(p for p in (folder, *folder.parents) if p.is_dir())
    replicas = 3 if size() >= 3 else 1
    fp = estimate(params.messages, params.payload_bytes, exp.stores, replicas)
    disk = shutil.disk_usage(existing)
    if disk.total == 0:       # /proc, /sys: no disk at all; the state folder's own check says why it cannot be used
        return
    why = refusal(fp, params.messages, params.payload_bytes, term(str(folder)), disk.free)
    if why:
        raise HarnessError(why)


def _run_one(params, stack, out, quiet):
    from ...run import runner
    from ..ui import ProgressUI
    from ...workers.supervisor import install_sigterm_as_interrupt
    with ProgressUI(params.experiment, quiet) as ui:
        install_sigterm_as_interrupt(on_first=lambda: ui.stopping(getattr(params, "workers", None)))
        report, folder = runner.run(params, stack, out=out, log=ui.log, ui=ui)
    if not quiet:
        _print_scoreboard(report)
    return report, folder


def _print_scoreboard(report):
    """The scoreboard on the terminal, each value as plain text (no rich markup, no escape codes)."""
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text
    from ...core.escape import term
    con = Console(stderr=True)
    t = Table(title=Text(term(f"{report.experiment}: {report.verdict}")), title_justify="left")
    for col in report.SCOREBOARD_COLUMNS:
        t.add_column(col, justify="right" if col in ("observed", "predicted") else "left")
    for row in report.scoreboard():
        t.add_row(*[Text(term(c)) for c in row])
    con.print(t)
    for x in report.summary_detail():
        con.print(Text(term(f"  {x}")), soft_wrap=True)
    con.print(Text(term(report.summary())), soft_wrap=True)
    g = report.data.get("guesses")
    if isinstance(g, dict):
        from ...reporting.guesses import COLUMNS, board, score_line
        rows = board(g.get("guesses") or {}, report.data)
        t = Table(title=Text("your predictions (recorded before the run)"), title_justify="left")
        for col in COLUMNS:
            t.add_column(col, justify="left" if col == "question" else "right")
        for row in rows:
            t.add_row(*[Text(term(c)) for c in row])
        con.print(t)
        con.print(Text(score_line(rows)), soft_wrap=True)
