"""`harness suite`: every experiment (or one group) with one seed, compared side by side.
"""

import sys
from pathlib import Path
import time

import click

from ...core.errors import HarnessError
from ...core.options import click_options
from ...experiments.common_options import CLIENT, GROUP_PROTOCOL
from ...experiments.kafka_streams import STREAMS_PROTOCOL
from ...run.params import COMMIT_EVERY, CRASH_RATE, MESSAGES, SEED
from .stack_options import kafka_version_option, last_lines, print_folder, stack_options, with_stack


# The run options one suite hands to every run: one seed, the same crashes in every experiment.
SUITE_OPTIONS = (MESSAGES, CRASH_RATE, SEED, COMMIT_EVERY)


def check_common_options(names: list[str], given: dict) -> list[str]:
    """The run options every run of the suite gets, as arguments, once each run that accepts them has
    checked them (bad input is one line before any stack starts)."""
    from ...run import suite_runner as suite_mod
    from ...run.params import RunParams
    opts = {o.name: o.default if given[o.name] is None else given[o.name] for o in SUITE_OPTIONS}
    common = [x for o in SUITE_OPTIONS for x in (o.flag, str(opts[o.name]))]
    for name in names:       # each run gets the common options it accepts (suite.accepted_args)
        accepted = {a[2:].replace("-", "_") for a in suite_mod.accepted_args(name, common)[::2]}
        RunParams(name, **{k: v for k, v in opts.items() if k in accepted}).validate()
    return common


def _group_help() -> str:
    from ...run.suite_runner import OPT_IN_GROUPS, groups
    return ("Only the experiments of these groups, comma-separated (core,eos; each declaration names its group): "
            + "; ".join(f"{g}: {', '.join(names)}" for g, names in groups().items()) + ". Without it, every group"
            + f" but {', '.join(OPT_IN_GROUPS)} (run only when named).")


def file_runs(target: str, given: dict, client: str | None, local: bool) -> tuple:
    """The runs of a folder of experiment files (a path, or a group name: experiments/<group>/): their
    names, {name: (path, kind)}, the common arguments (only the suite options given: a file's own values
    hold otherwise) and the group's name (None for a path). Every file is loaded and its run checked with
    those arguments first: bad input is one line before any stack starts."""
    from ...run.experiment_file import folder_of
    names, files, common = runs_of_folders([folder_of(target)], given, client, local)
    return names, files, common, (target if not Path(target).is_dir() else None)


def default_runs(group: str | None, given: dict, client: str | None, local: bool) -> tuple:
    """The default suite (or one --group) from its experiment files, experiments/<group>/: names, files and
    common arguments as file_runs gives them, in the registry's order."""
    from ...run.suite_runner import suite_folders
    return runs_of_folders(suite_folders(group), given, client, local)


def runs_of_folders(folders: list, given: dict, client: str | None, local: bool) -> tuple:
    from ...run import suite_runner as suite_mod
    from ...run.experiment_file import check_stack_needs, files_in, load, run_kwargs
    from ...run.params import RunParams, resolve
    loaded = suite_mod.registry_order([load(p) for folder in folders for p in files_in(folder)],
                                      lambda f: f.experiment)
    same = sorted({f.name for f in loaded if [g.name for g in loaded].count(f.name) > 1})
    if same:
        raise HarnessError(f"two experiment files named {same[0]}.toml in one suite; rename one")
    common = [x for o in SUITE_OPTIONS if given[o.name] is not None for x in (o.flag, str(given[o.name]))]
    if client:
        from ...experiments import REGISTRY
        if not any(CLIENT in REGISTRY[f.experiment].options for f in loaded):
            where = folders[0] if len(folders) == 1 else "the suite"
            raise HarnessError(f"--client applies to {CLIENT.applies_to}; none of {where}'s files takes it")
        common += [CLIENT.flag, client]
    every = {o.flag: o for o in (*SUITE_OPTIONS, CLIENT)}
    for f in loaded:
        args = suite_mod.accepted_args(f.experiment, common)
        flags = {every[k].name: every[k].type(v) for k, v in zip(args[::2], args[1::2])}
        values, faults, _ = run_kwargs(f, flags)
        try:
            resolve(RunParams(f.experiment, faults=faults, **values))
        except HarnessError as e:
            raise HarnessError(f"{f.path}: {e}") from None
        check_stack_needs(f, local)
    return [f.name for f in loaded], {f.name: (_as_given_here(f.path), f.experiment) for f in loaded}, common


def _as_given_here(path: Path) -> Path:
    """A file's path for its run's command line and report: relative to the folder the suite runs in when
    it lies there (a report kept in a repository then names `experiments/core/offset-after.toml`, not where
    one machine had its checkout), absolute otherwise. The runs start in the same folder."""
    full = path.resolve()
    try:
        return full.relative_to(Path.cwd().resolve())
    except ValueError:
        return full


@click.command(epilog="\b\nExamples:\n  harness suite\n  harness suite --group mistakes\n"
             "  harness worksheet > worksheet.toml; harness suite --group core --predict worksheet.toml\n"
             "  harness suite core             # the files of experiments/core/\n"
             "  harness suite ./nightly --seed 7   # a folder of experiment files\n"
             "  harness suite --messages 200 --experiments offset-before,offset-after,dedupe\n"
             "  harness suite --stack compose --quiet --out reports/nightly")
@click.argument("target", required=False, metavar="[FOLDER|GROUP]")
@click_options(SUITE_OPTIONS)
@click.option("--experiments", "experiment_list", default=None,
              help="Comma-separated subset (default: every group's but the opt-in ones', eos-streams with "
                   "--effect postgres).")
@click.option("--group", default=None, metavar="NAME[,NAME...]", help=_group_help())
@click.option("--parallel", default="auto", show_default=True, metavar="auto|N",
              help="Experiments run at the same time (each in its own topics, tables and consumer group), the "
                   "longest first. auto: the cores this process may use (its CPU affinity, or a cgroup quota) "
                   "rounded up, plus one: 3 on two cores; N: N at a time (as many as there are experiments, or more: all "
                   "at once).")
@click.option("--out", type=click.Path(file_okay=False), default=None, help="Suite folder (default reports/<suite-id>/).")
@click.option(CLIENT.flag, type=click.Choice(CLIENT.choices), default=None,
              help="The eos and queues families' workers: python (librdkafka) or java (Kafka's own client: "
                   "transaction version 2 where the broker offers it, KafkaShareConsumer); the other experiments "
                   "are not affected.")
@click.option(GROUP_PROTOCOL.flag, "group_protocol", type=click.Choice(GROUP_PROTOCOL.choices), default=None,
              help="The workers' consumer group protocol, for the experiments that take --group-protocol (the eos "
                   "family, the offset experiments, dedupe); the others are not affected.")
@click.option(STREAMS_PROTOCOL.flag, "streams_protocol", type=click.Choice(STREAMS_PROTOCOL.choices), default=None,
              help="Kafka Streams' group protocol for eos-streams (streams: KIP-1071's streams groups, Kafka 4.2+); "
                   "the others are not affected.")
@click.option("--predict", "worksheet", default=None, type=click.Path(dir_okay=False), metavar="WORKSHEET.toml",
              help="Predict first: a filled-in worksheet (`harness worksheet` prints one), recorded in the suite "
                   "folder before the runs start; the reports show you / actual / close enough.")
@click.option("--keep-stack", is_flag=True, help="Leave a stack this command started running afterwards.")
@click.option("--quiet", "-q", is_flag=True, help="Only the suite folder on stdout (for CI).")
@kafka_version_option
@stack_options
def suite(target, experiment_list, group, parallel, out, client, group_protocol, streams_protocol, worksheet, keep_stack,
          quiet, stack_kind, bootstrap_servers, postgres_dsn, **given):
    """Run every experiment (or one --group) with one seed and compare them side by side.

    Writes <suite>/suite.json, suite.md and suite.html (one row per experiment,
    a bar chart of lost and duplicated effects, and a final line that says
    where exactly-once held and where it stopped), plus each run's own folder.
    Exit status, the worst of its runs: 0 all as-predicted, 1 one was
    unexpected, 2 bad input, 3 one did not finish or its audit failed,
    130 interrupted (every started run still writes its report). An option
    an experiment refuses (auto-commit's --commit-every) is not passed to it.

    While it runs, one row per experiment says waiting, running (with its
    crashes so far) or its verdict. Ctrl-C says "stopping: ..." at once: the
    running experiments stop their workers (a transaction a killed worker
    left open is fenced) and write interrupted reports, then the suite's.

    The runs come from the harness's experiment files: experiments/<group>/
    for every group but cluster, or for the one --group names. FOLDER|GROUP
    runs the files (*.toml) of a folder instead, or of experiments/<GROUP>/
    (`harness experiments` lists them): each as `harness run FILE` would,
    with the options given here over the files'.
    """
    from pathlib import Path
    from ...run import suite_runner as suite_mod
    from ...core.paths import reports_dir
    from ...reporting.suite_report import write_suite
    from ...workers.supervisor import install_sigterm_as_interrupt
    local = stack_kind == "local" and not (bootstrap_servers or postgres_dsn)
    files = None
    if target is not None:
        if experiment_list is not None or group is not None:
            raise HarnessError("a FOLDER|GROUP argument chooses the runs itself; give it without --experiments "
                               "and --group")
        names, files, common, group = file_runs(target, given, client, local)
    elif experiment_list is None:          # the default suite, or one --group: from experiments/<group>/
        if local:
            from ...stack.local_record import size
            suite_mod.check_brokers(group, size())      # the local stack's size, before starting anything
        names, files, common = default_runs(group, given, client, local)
    else:
        names = suite_mod.parse_experiments(experiment_list, group)
    if local and files is None:
        from ...stack.local_record import size
        suite_mod.check_brokers(group, size())      # the local stack's size, before starting anything
    from ...reporting import guesses
    guessed = guesses.parse_worksheet(Path(worksheet), names) if worksheet is not None else None   # one line, now
    from ...core.suite_schedule import parse_parallel
    try:
        parallel = parse_parallel(parallel)
    except ValueError:
        raise HarnessError(f"--parallel must be auto or a whole number of at least 1, got {parallel!r}")
    if files is None:
        common = check_common_options(names, given)
    if client and files is None:
        from ...run.matrix_runner import client_experiments
        if not client_experiments(names):
            raise HarnessError(f"--client applies to {CLIENT.applies_to}; none of this suite's experiments takes it")
        common += [CLIENT.flag, client]
    from ...run.matrix_columns import protocol_experiments, streams_protocol_experiments
    for flag, value, takers in ((GROUP_PROTOCOL.flag, group_protocol, protocol_experiments),
                                (STREAMS_PROTOCOL.flag, streams_protocol, streams_protocol_experiments)):
        if value and files is not None:
            raise HarnessError(f"{flag} applies to the suite's own experiments; an experiment file names "
                               "its own options")
        if value:
            if not takers(names):
                raise HarnessError(f"{flag} applies to none of this suite's experiments")
            common += [flag, value]
    folder = Path(out) if out else reports_dir() / suite_mod.new_suite_id()
    if (folder / "suite.json").exists():
        raise HarnessError(f"{folder} already holds a suite; choose another --out")
    from ...core.paths import refuse_overlap
    from ...core.rundir import check_creatable
    from ...core.safefile import check_folder
    refuse_overlap(folder, "--out" if out else "the reports folder")
    check_folder(folder, "the suite folder", "choose an --out that only you can write")     # before any stack starts
    check_creatable(folder)
    if guessed is not None:     # on disk before any run starts
        folder.mkdir(parents=True, exist_ok=True)
        guesses.record(folder, guessed, str(worksheet))
    install_sigterm_as_interrupt()

    def body(stack, log):
        from .suite_progress import SuiteProgress
        t0 = time.time()
        progress = SuiteProgress(names, folder, quiet)
        progress.install()          # an interrupt says "stopping: ..." at once
        try:
            with progress:
                summary = suite_mod.run_suite(stack, names, common, folder, parallel, log=progress.log, group=group,
                                              files=files)
        except KeyboardInterrupt:
            if not (folder / "suite.json").exists():
                raise
            # The runs wrote interrupted reports and the suite its own: said and shown as after any suite.
            interrupted.append(True)
            from ...reporting.validate import read_suite
            summary = read_suite(folder / "suite.json")
        finally:
            if (folder / "suite.json").exists():
                write_suite(folder)
        if not quiet:
            from ...core.escape import term
            from ..ui import print_table
            from rich.console import Console
            from rich.text import Text
            con = Console(stderr=True)
            print_table(con, suite_table(folder.name, summary))
            con.print(Text(term(summary["conclusion"])), soft_wrap=True)
            con.print(f"suite wall time: {time.time() - t0:.0f} s")
            _print_guesses(con, folder, summary)
        return summary
    stopped, interrupted = [], []
    summary = with_stack(stack_kind, bootstrap_servers, postgres_dsn, keep_stack, quiet, body, stopped=stopped)
    last_lines(folder, "suite.html", stopped)
    print_folder(folder)
    sys.exit(130 if interrupted else suite_mod.exit_code(summary["experiments"]))


STORES_CAPTION = ("ledger: effects in the database's ledger table; topic: records of the output topic as "
                  "read_committed readers see them; n/a: the run has no such store; s: seconds.")


def suite_table(name: str, summary: dict):
    """The suite's table for the terminal: one row per experiment, its duplicates and losses in each store (the
    ledger's and the output topic's side by side) and its verdict; narrow enough for 80 columns, cells never cut."""
    from rich import box
    from rich.table import Table
    from rich.text import Text
    from ...core.escape import term
    from ...reporting.shared import fmt
    from ...reporting.suite_report import store_cells
    t = Table(title=Text(term(f"suite {name}")), title_justify="left", box=box.SIMPLE_HEAD, show_edge=False,
              pad_edge=False,
              caption=Text(STORES_CAPTION), caption_justify="left")
    for col in ("experiment", "ledger\ndup", "ledger\nlost", "topic\ndup", "topic\nlost", "verdict", "s"):
        t.add_column(col, no_wrap=True, justify="left" if col in ("experiment", "verdict") else "right")
    for r in summary["experiments"]:
        s = r.get("seconds")
        t.add_row(*[Text(term(c)) for c in (str(r["experiment"]), *store_cells(r), str(r.get("verdict", "")),
                                             fmt(round(s)) if isinstance(s, (int, float)) else fmt(s))])
    return t


def _print_guesses(con, folder, summary: dict) -> None:
    """The worksheet's scoreboard on the terminal: you / actual / close enough per question."""
    from rich.table import Table
    from rich.text import Text
    from ...core.escape import term
    from ...reporting.guesses import SUITE_COLUMNS, read, score_line, suite_board
    recorded = read(folder)
    if recorded is None:
        return
    rows = suite_board(recorded, {r["experiment"]: r for r in summary["experiments"]})
    t = Table(title=Text("your predictions (recorded before the runs)"), title_justify="left")
    for col in SUITE_COLUMNS:
        t.add_column(col, justify="right" if col in ("you", "actual") else "left")
    for row in rows:
        t.add_row(*[Text(term(c)) for c in row])
    from ..ui import print_table
    print_table(con, t)
    con.print(Text(score_line(rows)), soft_wrap=True)
