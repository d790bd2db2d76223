"""`harness hunt`: one experiment with its options and faults, run seed after seed until one goes wrong
(harness/run/hunt_runner.py).
"""

import sys

import click

from ...core.errors import HarnessError
from .run import declared_options
from .stack_options import kafka_version_option, print_folder, say, stack_options, with_stack


@click.command(epilog="\b\nExamples:\n"
               "  harness hunt offset-after --messages 200 --runs 5\n"
               "  harness hunt eos --messages 200 --runs 20 --seed 1 \\\n"
               "      --kafka-config socket.timeout.ms=2000 --fault delay-request:api=EndTxn,ms=4000,count=3\n"
               "  harness hunt eos --client java --kafka-config request.timeout.ms=2000 --messages 200 \\\n"
               "      --fault delay-request:api=EndTxn,ms=4000,count=3 --runs 10 --keep-going --explain\n"
               "  harness hunt producer --idempotence on --fault duplicate-request:rate=0.5 --runs 30\n"
               "\b\n(the protocol faults need `harness up --brokers 3 --proxies` first)\n"
               "\b\nExit status:\n  0 every run as-predicted   1 a run was not   2 bad input   130 interrupted")
@click.argument("experiment")
@declared_options
@click.option("--fault", "fault_specs", multiple=True, metavar="NAME[:k=v,...]",
              help="A fault for every run (repeatable), as for `harness run`.")
@click.option("--runs", default=20, show_default=True, type=int, metavar="N", help="How many runs at most.")
@click.option("--until-invalid/--keep-going", "until_invalid", default=True, show_default=True,
              help="Stop at the first run whose verdict is not as-predicted, or run all N.")
@click.option("--explain", is_flag=True,
              help="After each invalid run, read the brokers' own records of it from the local cluster's log "
                   "folders (Kafka's DumpLogSegments): the coordinator's records of its transactional ids, the "
                   "output's COMMIT/ABORT markers, the group's offset commits, and for each EndTxn delay-request "
                   "held whether it was applied to the next transaction; into <out>/seed-<S>/broker-side.md.")
@click.option("--out", type=click.Path(file_okay=False), default=None,
              help="Hunt folder (default reports/<id>-hunt/); each run's report goes in <out>/seed-<S>/.")
@click.option("--keep-stack", is_flag=True, help="Leave a stack this command started running afterwards.")
@click.option("--quiet", "-q", is_flag=True, help="Only the hunt folder on stdout.")
@kafka_version_option
@stack_options
def hunt(experiment, fault_specs, runs, until_invalid, explain, out, keep_stack, quiet, stack_kind, bootstrap_servers,
         postgres_dsn, **options):
    """Run one experiment again and again, a new seed each run, until a run is not as predicted.

    An anomaly that needs a timing (a late request landing on the next
    transaction) shows in one run of several, and a seed does not bring it
    back every time: many short seeded runs find it. The runs use the options
    and faults given here, one at a time on the stack, with --seed for the
    first and one more for each next run; each writes its report in
    <out>/seed-<S>/. A line per run as it ends (seed, verdict, lost and
    duplicated payments, crashes, the requests each protocol fault touched);
    at the end, the runs, the invalid ones' seeds, and for the first invalid
    run the one `harness run` command that reproduces it. Writes hunt.json
    and hunt.md. Ctrl-C: the run in progress stops its workers and writes an
    interrupted report, the hunt writes its summary, exit status 130.
    """
    from pathlib import Path
    from ...core.escape import term
    from ...core.paths import refuse_overlap, reports_dir
    from ...core.rundir import check_creatable
    from ...core.safefile import check_folder
    from ...experiments import REGISTRY
    from ...run import hunt_runner as hunt_mod
    from ...run.experiment_file import is_file_argument
    from ...run.params import SEED, RunParams, resolve
    from ...run.suite_runner import new_suite_id
    from .run import _check_local_size_for_faults, _check_workload_fits
    if is_file_argument(experiment):
        raise HarnessError(f"harness hunt runs an experiment kind with its options, not a file ({experiment}); "
                           f"choose from: {', '.join(REGISTRY)}")
    first = options.get("seed")
    run_seeds = hunt_mod.seeds(SEED.default if first is None else first, runs)
    resolved = resolve(RunParams(experiment, faults=fault_specs, **options))      # bad input: one line, now
    local = stack_kind == "local" and not (bootstrap_servers or postgres_dsn)
    if explain and not local:
        raise HarnessError("--explain reads the brokers' log folders: it needs the local stack (harness up), not "
                           "an existing cluster or the compose one")
    if local:
        _check_local_size_for_faults(resolved.faults)
        _check_workload_fits(resolved.params, resolved.exp)
    args = hunt_mod.run_args(experiment, options, fault_specs)
    folder = Path(out) if out else reports_dir() / new_suite_id().replace("-suite", "-hunt")
    if (folder / "hunt.json").exists():
        raise HarnessError(f"{folder} already holds a hunt; choose another --out")
    refuse_overlap(folder, "--out" if out else "the reports folder")
    check_folder(folder, "the hunt folder", "choose an --out that only you can write")
    check_creatable(folder)
    from ...workers.supervisor import install_sigterm_as_interrupt
    install_sigterm_as_interrupt()
    interrupted = []

    def body(stack, log):
        for f in resolved.faults:
            f.check_stack(stack)            # a protocol fault without the proxies: one line, before any run
        if explain and stack.kind != "local":
            raise HarnessError("--explain reads the brokers' log folders: it needs the local stack (harness up)")
        said = say if not quiet else (lambda _m: None)
        try:
            return hunt_mod.run_hunt(stack, args, run_seeds, folder, not until_invalid, log=said, extra=_stack_args(),
                                     on_invalid=_explainer(said) if explain else None)
        except KeyboardInterrupt:
            if not (folder / "hunt.json").exists():
                raise
            interrupted.append(True)
            import json
            return json.loads((folder / "hunt.json").read_text())
    summary = with_stack(stack_kind, bootstrap_servers, postgres_dsn, keep_stack, quiet, body)
    if not quiet:
        for text in hunt_mod.closing(summary):
            say(term(text))
    say(f"report: {term(folder / 'hunt.md')} (also hunt.json; each run's report in its seed-<S>/ folder)")
    print_folder(folder)
    sys.exit(130 if interrupted else summary["exit_code"])


def _explainer(said):
    """--explain's step after an invalid run: the broker's side, written beside its report; a failure to read
    it is said and recorded in the run's row, and the hunt goes on."""
    def explain_run(row, folder):
        from ...core.paths import state_dir
        from ...run import explain
        try:
            x = explain.explain(folder, state_dir())
        except (HarnessError, OSError, ValueError, KeyError) as e:
            row["broker_side"] = f"not read: {e}"
            said(f"broker side: not read: {e}")
            return
        row["broker_side"] = f"{folder.name}/{explain.NAME}.md"
        for text in explain.summary_lines(x):
            said(f"{text}; {row['broker_side']}")
    return explain_run


def _stack_args() -> list[str]:
    """The client settings the user gave (the runs inherit them), as `harness run` would take them back:
    --kafka-config KEY=VALUE each (a file's lines too), secret values masked: never in a report."""
    from ...clients import kafka_client
    return [x for k, v in kafka_client.public(kafka_client.requested()).items() for x in ("--kafka-config", f"{k}={v}")]
