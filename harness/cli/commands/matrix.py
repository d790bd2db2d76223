"""`harness matrix`: the same suite on several Kafka releases, side by side (harness/run/matrix_runner.py).
"""

import sys

import click

from ...core.errors import HarnessError
from ...experiments.common_options import CLIENT, GROUP_PROTOCOL
from ...experiments.kafka_streams import STREAMS_PROTOCOL
from ...core.options import click_options
from ...core.escape import term
from .stack_options import print_folder, say
from .suite import SUITE_OPTIONS, check_common_options


@click.command(epilog="\b\nExamples:\n  harness matrix --kafka-version 3.9.1,4.1.1,4.4.0 --group eos\n"
               "  harness matrix --kafka-version 3.9.1,4.4.0 --group eos --client python,java\n"
               "  harness matrix --kafka-version 4.4.0 --group core,eos --group-protocol classic,consumer\n"
               "  harness matrix --kafka-version 4.1.1,4.4.0 --experiments eos-streams --streams-protocol classic,streams\n"
               "  harness matrix --kafka-version 4.1.1,4.4.0 --experiments zombie,eos --messages 300")
@click.option("--kafka-version", "releases", default=None, metavar="R1,R2,...",
              help="The Kafka releases, comma-separated, each 3.9.0 or newer; one suite per release, in this order.")
@click_options(SUITE_OPTIONS)
@click.option("--experiments", "experiment_list", default=None, help="Comma-separated subset (as for suite).")
@click.option("--group", default=None, metavar="NAME[,NAME...]",
              help="Only the experiments of these groups, comma-separated (as for suite).")
@click.option("--parallel", default=None, metavar="auto|N",
              help="Experiments at a time within each suite (as for suite; default auto).")
@click.option(CLIENT.flag, "client_list", default=None, metavar="python,java",
              help="The workers' Kafka clients, a column each per release (default python): java adds a suite "
                   "of the experiments that take --client (the eos and queues families), on the same stack, with "
                   "Kafka's own client (transaction version 2 where the release offers it; KafkaShareConsumer).")
@click.option(GROUP_PROTOCOL.flag, "protocol_list", default=None, metavar="classic,consumer",
              help="The workers' consumer group protocols, a column each per release and client (default classic): "
                   "consumer adds a suite of the experiments that take --group-protocol, with KIP-848's consumer "
                   "protocol (no such column for a release before 4.0).")
@click.option(STREAMS_PROTOCOL.flag, "streams_list", default=None, metavar="classic,streams",
              help="Kafka Streams' group protocols, a column each per release (default classic): streams adds a "
                   "suite of eos-streams with KIP-1071's streams groups (no such column for a release before 4.2).")
@click.option("--out", type=click.Path(file_okay=False), default=None,
              help="Matrix folder (default reports/<id>-matrix/); each release's suite goes in <out>/<release>/.")
@click.option("--quiet", "-q", is_flag=True, help="Only the matrix folder on stdout (for CI).")
def matrix(releases, experiment_list, group, parallel, client_list, protocol_list, streams_list, out, quiet,
           **given):
    """Run the same suite on several Kafka releases and compare them cell by cell.

    Each release gets a local stack of its own, in a state folder of its own
    ($HARNESS_HOME/matrix/<release>), started by that release's suite and
    purged when it ends: your own stack is never touched. Same seed, same
    payments, same crashes on every release. Writes matrix.json, matrix.md
    and matrix.html: a row per experiment, a column per release (what its
    broker says: metadata.version and transaction.version), each cell the
    verdict and its key figures, rows that differ marked. Exit status: the
    worst cell, as for suite (130 when interrupted).
    """
    from pathlib import Path
    from ...experiments import REGISTRY
    from ...run import matrix_runner as matrix_mod
    from ...run import suite_runner as suite_mod
    from ...core.paths import reports_dir
    from ...reporting.matrix_report import write_matrix
    from ...core.rundir import check_creatable, mark_suite_dir
    from ...core.safefile import check_folder
    from ..ui import log_fn
    names = matrix_mod.parse_releases(releases)
    clients = matrix_mod.parse_clients(client_list)
    chosen = suite_mod.parse_experiments(experiment_list, group)
    check_common_options(chosen, given)   # before any stack starts
    java = matrix_mod.client_experiments(chosen)
    if "java" in clients and not java:
        raise HarnessError(f"--client java applies to {CLIENT.applies_to}; none of the chosen experiments is one")
    protocols = matrix_mod.parse_protocols(protocol_list)
    takers = matrix_mod.protocol_experiments(chosen)
    if "consumer" in protocols and not takers:
        raise HarnessError(f"--group-protocol consumer applies to {', '.join(matrix_mod.protocol_experiments(list(REGISTRY)))}"
                           "; none of the chosen experiments is one")
    streams = matrix_mod.parse_streams_protocols(streams_list)
    if "streams" in streams and not matrix_mod.streams_protocol_experiments(chosen):
        raise HarnessError(f"--streams-protocol streams applies to {STREAMS_PROTOCOL.applies_to}; none of the chosen "
                           "experiments is one")
    suite_mod.check_brokers(group, 1)
    if parallel is not None:
        from ...core.suite_schedule import parse_parallel
        try:
            parse_parallel(parallel)
        except ValueError:
            raise HarnessError(f"--parallel must be auto or a whole number of at least 1, got {parallel!r}")
    common = [x for o in SUITE_OPTIONS if given[o.name] is not None for x in (o.flag, str(given[o.name]))]
    at_once = ["--parallel", str(parallel)] if parallel else []
    args = [*common, *(["--experiments", experiment_list] if experiment_list else []),
            *(["--group", group] if group else []), *at_once]
    from ...run.matrix_columns import variant_args
    client_args = variant_args(chosen, (clients, protocols, streams), common, at_once)
    folder = Path(out) if out else reports_dir() / f"{suite_mod.new_suite_id()}-matrix"
    if (folder / "matrix.json").exists():
        raise HarnessError(f"{folder} already holds a matrix; choose another --out")
    from ...core.paths import refuse_overlap
    refuse_overlap(folder, "--out" if out else "the reports folder")
    check_folder(folder, "the matrix folder", "choose an --out that only you can write")
    check_creatable(folder)
    if any((folder / matrix_mod.folder_of(*c)).exists()
           for c in matrix_mod.plan(names, (clients, protocols, streams), client_args)[0]):
        raise HarnessError(f"{folder} already holds a folder of one of these releases; choose another --out")
    matrix_mod.check_homes(names)
    mark_suite_dir(folder)
    log = log_fn(quiet)
    from ...workers.supervisor import install_sigterm_as_interrupt
    install_sigterm_as_interrupt()          # SIGTERM and SIGHUP as Ctrl-C: the running suite's stack is purged
    summary, failure = None, None
    try:
        summary = matrix_mod.run_matrix(names, args, folder, log=log, clients=tuple(clients), client_args=client_args,
                                        protocols=tuple(protocols), streams=tuple(streams))
    except KeyboardInterrupt:
        pass
    except HarnessError as e:               # a purge that failed: said once the pages are written
        failure = e
    import json
    summary = summary or json.loads((folder / "matrix.json").read_text())
    write_matrix(folder, summary)
    if failure is not None:
        raise failure
    if not quiet:
        from ...reporting.matrix_report import cell_of, keys
        for e in summary["experiments"]:
            say(f"{e['experiment']}{' (differs)' if e['differs'] else ''}: " +
                " | ".join(f"{k} {cell_of(e, k)}" for k in keys(summary)))
    say(f"report: {term(folder / 'matrix.html')} (also matrix.md and matrix.json)")
    print_folder(folder)
    sys.exit(summary["exit_code"])
