"""The `harness` command: a thin click layer over the library.

Every user mistake becomes a HarnessError, printed here as one line (plus the
tail of a service log when there is one) with exit status 2; a traceback
means a bug in the harness. Each command's help ends with an example.
"""

import functools
import json
import os
import sys
import time

from .secret_args import hide_own

if __name__ == "__main__":
    hide_own()          # before the heavier imports below: `ps` shows the password only until here

import click  # noqa: E402 - after hide_own on purpose

from . import __version__
from .errors import HarnessError
from .experiments import REGISTRY


def _recorded_stack() -> str:
    """--stack's default: the kind of stack this state folder holds (a compose stack that `harness up
    --stack compose` started is what a later `run` means), else local."""
    from .stack.local import read_record
    return "compose" if (read_record() or {}).get("kind") == "compose" else "local"


def stack_options(f):
    """--stack / --bootstrap-servers / --postgres-dsn / --kafka-config[-file], shared by every command that
    needs a stack. The Kafka client settings do not reach `f`: they are handed to harness.kafka_client,
    which every Kafka client the command starts takes its config from."""
    @click.option("--stack", "stack_kind", default=_recorded_stack, envvar="HARNESS_STACK",
                  show_default="the kind of stack the state folder holds, else local",
                  help="Which stack to start or use: local (processes, no Docker) or compose (Docker).")
    @click.option("--bootstrap-servers", envvar="HARNESS_BOOTSTRAP_SERVERS",
                  help="Use an existing Kafka at this address (with --postgres-dsn); the harness starts nothing.")
    @click.option("--postgres-dsn", envvar="HARNESS_POSTGRES_DSN",
                  help="Use an existing PostgreSQL (with --bootstrap-servers).")
    @click.option("--kafka-config", "kafka_config", multiple=True, metavar="KEY=VALUE",
                  help="A Kafka client setting in librdkafka's names (repeatable), for every client the harness "
                       "starts, e.g. security.protocol=SASL_SSL; over those of --kafka-config-file.")
    @click.option("--kafka-config-file", "kafka_config_file", envvar="HARNESS_KAFKA_CONFIG_FILE",
                  type=click.Path(dir_okay=False), metavar="FILE",
                  help="Kafka client settings, key=value lines (client.properties style, librdkafka names, "
                       "as kcat -F reads). A local stack started with --auth scram needs none.")
    @functools.wraps(f)
    def wrapper(*args, **kwargs):
        return f(*args, **kwargs)
    return takes_kafka_settings(wrapper)


def takes_kafka_settings(f):
    """`f` without the --kafka-config/--kafka-config-file arguments: they go to harness.kafka_client."""
    @functools.wraps(f)
    def wrapper(*args, kafka_config=(), kafka_config_file=None, **kwargs):
        from . import kafka_client
        kafka_client.request(kafka_client.from_options(kafka_config, kafka_config_file))
        return f(*args, **kwargs)
    return wrapper


def _say(msg: str) -> None:
    click.echo(msg, err=True)


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(__version__, prog_name="harness")
def cli():
    """Crash-test delivery semantics on a real Kafka and a real PostgreSQL.

    A network cannot deliver a message exactly once; a system can apply its
    effect exactly once. `harness run` produces seeded payments, kills
    consumer workers with SIGKILL at named points, and counts lost and
    duplicated effects in Postgres.

    \b
    Example:
      harness run offset-before      # starts Kafka + Postgres, runs, reports
    """


@cli.command()
@click.option("--brokers", type=int, default=None, metavar="N",
              help="Kafka nodes: 1, or 3 for a KRaft cluster (replication factor 3, min.insync.replicas 2) "
                   "that broker faults need. The state folder remembers it for run, status and down.  [default: 1]")
@click.option("--auth", type=click.Choice(["none", "scram"]), default=None,
              help="Local stack: how Kafka clients authenticate. scram: the only client listener is "
                   "SASL_PLAINTEXT with SCRAM-SHA-512, the user and password are in $HARNESS_HOME/"
                   "client.properties (0600), and the harness's own runs use that file; one broker only "
                   "(not with --brokers 3). [default: what the stack was set up with, else none]")
@click.option("--build-images", is_flag=True,
              help="Compose stack: build the Kafka and PostgreSQL images here from Debian's packages and Kafka's "
                   "jars (scripts/build-images.sh) instead of the official images. Without it they are built only "
                   "when an official image can be neither found on the engine nor pulled.")
@stack_options
def up(brokers, auth, build_images, stack_kind, bootstrap_servers, postgres_dsn):
    """Start Kafka and PostgreSQL (or reuse them), and wait until all answer.

    The local stack runs as processes under the state folder ($HARNESS_HOME,
    default .harness/): Kafka resolved from Maven Central with mvn on first
    use, PostgreSQL from Debian's server binaries. With --brokers 3 Kafka is
    three processes from the same jars, each a broker and a KRaft controller
    with its own folder and ports on 127.0.0.1.

    \b
    Examples:
      harness up && harness status
      harness up --brokers 3        # then: harness run eos --fault broker-kill
      harness up --auth scram       # SASL/SCRAM Kafka; settings in $HARNESS_HOME/client.properties
      harness up --stack compose    # Docker Compose (an engine: bash scripts/docker-engine.sh start)
    """
    from .stack.local import check_auth_size
    from .stack.resolve import get_stack
    if auth and (bootstrap_servers or postgres_dsn or stack_kind != "local"):
        raise HarnessError("--auth sets up the local stack; an existing cluster takes --kafka-config instead")
    check_auth_size(auth, brokers)
    if build_images and stack_kind != "compose":
        raise HarnessError("--build-images builds the compose stack's images; add --stack compose")
    stack, _ = get_stack(stack_kind, bootstrap_servers, postgres_dsn, log=_say, hold=True, brokers=brokers,
                         auth=auth, build_images=build_images)
    for note in stack.notes:
        _say(note)
    click.echo(f"{stack.kind} stack ready: kafka {stack.bootstrap_servers} ({stack.kafka_auth}), postgres "
               f"{stack.public()['postgres_dsn']}")
    if stack.kind == "local":
        from .stack.local import client_properties_file
        props = client_properties_file()
        if props:
            _say(f"Kafka client settings (0600): {props}")
        _say("kept running until `harness down`")


@cli.command()
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object (for scripts).")
@stack_options
def status(as_json, stack_kind, bootstrap_servers, postgres_dsn):
    """Show the stack: addresses, versions, pids and whether it is healthy.

    Exits 0 when healthy, 1 otherwise.

    \b
    Example:
      harness status --json
    """
    from .stack.resolve import current
    stack = current(stack_kind, bootstrap_servers, postgres_dsn)
    if stack is None:
        from .paths import state_dir
        from .stack import local
        kept = local.stopped_with_data()    # stopped by `harness down` or by the run that started it
        if as_json:
            click.echo(json.dumps({"kind": "local" if kept else None, "healthy": False,
                                   "state": "stopped" if kept else None}))
        elif kept:
            click.echo(f"stack:             local (stopped; its data is kept in {state_dir()})\n"
                       f"start it with `harness up` (then `harness audit latest` recounts the last run)")
        else:
            click.echo("no stack is up (start one with `harness up`)")
        sys.exit(1)
    pub = stack.public()
    if as_json:
        click.echo(json.dumps(pub, indent=2))
    else:
        down = [k for k, v in pub["pids"].items() if v is None]
        health = "healthy" if stack.healthy else f"NOT healthy: {' and '.join(down)} stopped" if down else "NOT healthy"
        click.echo(f"stack:             {pub['kind']} ({health})")
        click.echo(f"bootstrap_servers: {pub['bootstrap_servers']}")
        click.echo(f"kafka auth:        {pub['kafka_auth']}")
        click.echo(f"postgres_dsn:      {pub['postgres_dsn']}")
        click.echo(f"kafka version:     {pub['kafka_version'] or 'unknown'}")
        if pub.get("brokers", 1) > 1:
            click.echo(f"kafka brokers:     {pub['brokers']} (KRaft, broker and controller on each node)")
        click.echo(f"postgres version:  {pub['postgres_version'] or 'unknown'}")
        running = {k: v for k, v in pub["pids"].items() if v is not None}
        if running:
            click.echo("pids:              " + ", ".join(f"{k}={v}" for k, v in running.items()))
        if down:
            click.echo("start what is stopped with `harness up`")
        for note in stack.notes:
            click.echo(f"note:              {note}")
    sys.exit(0 if stack.healthy else 1)


@cli.command("env", epilog="\b\nExamples:\n  eval \"$(harness env)\"\n  psql -c 'select 1'\n"
             "  kcat -b \"$HARNESS_BOOTSTRAP_SERVERS\" -L")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object of the same settings (for scripts).")
@stack_options
def env_cmd(as_json, stack_kind, bootstrap_servers, postgres_dsn):
    """Print shell settings to reach the stack with plain psql and kcat.

    Exports PGHOST, PGPORT, PGUSER, PGDATABASE and PGPASSFILE (a file the
    harness keeps in its state folder, mode 0600: the password itself is never
    printed), HARNESS_BOOTSTRAP_SERVERS for `kcat -b`, HARNESS_KAFKA_CONFIG_FILE
    for `kcat -F` when the stack needs client settings (`harness up --auth
    scram`), and HARNESS_POSTGRES_DSN (without the password). Later `harness`
    commands in that shell use the same stack. Exits 2 when no stack is up, or
    when one of its services is stopped or does not answer.
    """
    from .paths import state_dir
    from .stack.resolve import current
    from .stack.shellenv import settings, shell_lines, unusable
    stack = current(stack_kind, bootstrap_servers, postgres_dsn, check=False)
    if stack is None or not stack.postgres_dsn or not stack.bootstrap_servers:
        raise HarnessError("no stack is up: start one with `harness up`, then run `eval \"$(harness env)\"`")
    why = unusable(stack)
    if why:
        raise HarnessError(why)
    import os
    from .stack import local
    config_file = (local.client_properties_file() if stack.kind == "local" else None) \
        or os.environ.get("HARNESS_KAFKA_CONFIG_FILE") or None
    values = settings(stack, state_dir(), config_file)
    click.echo(json.dumps(values, indent=2) if as_json else shell_lines(values), nl=as_json)


@cli.command()
@click.option("--purge", is_flag=True, help="Also delete Kafka's and PostgreSQL's data.")
def down(purge):
    """Stop the Kafka (every node) and PostgreSQL that this state folder started.

    Only processes whose pid record matches (pid, start time, our own config or
    data path) are signalled. External clusters are never touched.

    \b
    Example:
      harness down --purge
    """
    from .stack import local, compose
    # A compose stack, or (with --purge) the volumes a compose stack stopped without --purge left behind:
    # its password file says this folder started one.
    if (local.read_record() or {}).get("kind") == "compose" or (purge and compose.left_volumes()):
        if not compose.down(purge, log=_say):
            raise HarnessError(f"cannot stop the compose stack: {compose.engine_available()}")
        stopped = ["the compose stack"]
    else:
        stopped = local.down(purge, log=_say)
    click.echo("stopped " + " and ".join(stopped) if stopped else "no stack was running")



EXPERIMENT_HELP = "\n".join(f"  {name:<{max(map(len, REGISTRY))}} {e.proves}" for name, e in REGISTRY.items())
EXIT_HELP = ("\b\nExit status:\n  0 as-predicted   1 unexpected   2 bad input   "
             "3 incomplete or audit-failed   130 interrupted")


def _fault_help() -> str:
    from .faults import help_text
    return "\b\nFaults (--fault NAME[:key=value,...]):\n" + help_text()


@cli.command(epilog="\b\nExperiments (kill points: `harness experiments`):\n" + EXPERIMENT_HELP + "\n\n"
             + _fault_help() + "\n\n" + EXIT_HELP + "\n\n\b\nExamples:\n"
             "  harness run offset-before\n"
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
@click.option("--messages", type=int, default=1000, show_default=True, help="Payments to produce.")
@click.option("--amount", type=int, default=100, show_default=True, help="Amount of each payment.")
@click.option("--crash-rate", type=float, default=0.1, show_default=True,
              help="Share of payments whose first delivery kills the worker (0..1).")
@click.option("--seed", type=int, default=25, show_default=True,
              help="Seed of the crash plan: the same seed crashes on the same payments in every experiment.")
@click.option("--commit-every", type=int, default=1, show_default=True, help="Commit offsets every N records.")
@click.option("--partitions", type=int, default=1, show_default=True, help="Partitions of the input topic.")
@click.option("--workers", type=int, default=1, show_default=True, help="Worker processes (each owns a fixed set of partitions).")
@click.option("--kill-mode", type=click.Choice(["points", "random"]), default="points", show_default=True,
              help="points: workers kill themselves at the named kill point; random: the supervisor SIGKILLs them at seeded times.")
@click.option("--kills", type=int, default=None, help="Number of SIGKILLs with --kill-mode random.  [default: 10]")
@click.option("--kill-point", default=None,
              help="Where planned crashes strike: one of the experiment's kill points (`harness experiments`), "
                   "or `any` for a seeded point per crash. Default: the experiment's own.")
@click.option("--fault", "fault_specs", multiple=True, metavar="NAME[:k=v,...]",
              help="A fault to inject (repeatable; replaces the experiment's default faults): "
                   "planned-crash[:rate=R,point=P], random-kill[:kills=N], zombie[:pause=S], kill-every[:seconds=S]; "
                   "on the 3-broker cluster: broker-kill, broker-pause, leader-kill[:count=N,every=S,down=S].")
@click.option("--commit-interval-ms", type=int, default=None,
              help="eos family: commit the transaction at least this often (instead of every N records).")
@click.option("--effect", type=click.Choice(["none", "postgres"]), default="none", show_default=True,
              help="eos-streams only: also write each record to the Postgres ledger by JDBC.")
@click.option("--fresh-transactional-id", is_flag=True,
              help="eos family: restarted workers take a NEW transactional.id, so nothing fences the dead "
                   "transaction and read_committed readers stall until transaction.timeout.ms.")
@click.option("--transaction-timeout-ms", type=int, default=None,
              help="eos family: the producers' transaction.timeout.ms (default 60000; 10000 with --fresh-transactional-id).")
@click.option("--zombie-pause", type=float, default=None,
              help="zombie: seconds the worker stays frozen before its replacement starts.  [default: 3]")
@click.option("--dedupe-ttl", type=float, default=None, metavar="SECONDS",
              help="key-expiry only: the worker purges dedupe keys older than this before each lookup, as a TTL "
                   "cache would.  [default: 0.2]")
@click.option("--restart-delay", type=float, default=None, metavar="SECONDS",
              help="A dead worker's successor starts this long after the death (a slow restart, a slow "
                   "redelivery).  [default: at once; key-expiry 0.4]")
@click.option("--auto-commit-interval-ms", type=int, default=None,
              help="auto-commit only: the consumer's auto.commit.interval.ms.  [default: the client's, 5000]")
@click.option("--kill-every", type=float, default=None, metavar="SECONDS",
              help="Also SIGKILL one running worker every SECONDS, in turn (alone unless --kill-mode random "
                   "or --kills asks for random kills too).")
@click.option("--worker-cmd", default=None, metavar="CMD",
              help="custom only: your consumer, started once per worker slot (split like a shell would, run "
                   "without one) with the run's names in HARNESS_* environment variables (README: "
                   "\"Test your own consumer\").")
@click.option("--expect", type=click.Choice(["exactly-once", "at-least-once", "at-most-once"]), default=None,
              help="custom only: the claim under test: nothing lost or duplicated, nothing lost, or nothing "
                   "duplicated, per payment id.  [default: exactly-once]")
@click.option("--audit-sql", default=None, metavar="SELECT",
              help="custom only: count effects with this query (read-only transaction, statement timeout) "
                   "returning one (message_id, amount) row per effect, instead of the ledger table.")
@click.option("--assignment", type=click.Choice(["assign", "group"]), default="assign", show_default=True,
              help="Consumer experiments: assign (each worker a fixed set of partitions: fastest restarts) or "
                   "group (subscribe as members of the run's group: partitions move when workers die and return).")
@click.option("--group-protocol", type=click.Choice(["classic", "consumer"]), default=None,
              help="With --assignment group: the classic protocol (1 s session) or KIP-848's consumer protocol.  "
                   "[default: classic]")
@click.option("--idempotence", type=click.Choice(["on", "off"]), default=None,
              help="producer only: enable.idempotence of the producer under test.  [default: on; off with --acks 1]")
@click.option("--acks", type=click.Choice(["1", "all"]), default=None,
              help="producer only: acks of the producer under test.  [default: all]")
@click.option("--max-in-flight", type=int, default=None,
              help="producer only: max.in.flight.requests.per.connection of the producer under test.  [default: 5]")
@click.option("--payload-bytes", type=int, default=0, help="Pad each payment's JSON value to about this many bytes.")
@click.option("--time-limit", type=float, default=600, show_default=True,
              help="Seconds before a stuck run is stopped and reported as incomplete.")
@click.option("--out", type=click.Path(file_okay=False), default=None,
              help="Report folder (default reports/<run-id>/).")
@click.option("--keep-stack", is_flag=True, help="Leave a stack this command started running afterwards.")
@click.option("--quiet", "-q", is_flag=True, help="No progress output (for CI); the report folder is still printed.")
@stack_options
def run(experiment, messages, amount, crash_rate, seed, commit_every, partitions, workers, kill_mode, kills,
        kill_point, fault_specs, commit_interval_ms, effect, fresh_transactional_id, transaction_timeout_ms,
        zombie_pause, dedupe_ttl, restart_delay, auto_commit_interval_ms, kill_every, worker_cmd, expect, audit_sql,
        assignment, group_protocol, idempotence, acks, max_in_flight,
        payload_bytes, time_limit, out, keep_stack, quiet, stack_kind, bootstrap_servers, postgres_dsn):
    """Run one experiment: produce payments, crash workers, audit, judge, report.

    With no stack configured it starts the local one (Kafka and PostgreSQL as
    processes) and stops what it started afterwards, unless --keep-stack or
    another command still uses it; a stack started by `harness up` is reused
    and left running. The last line printed is the report folder
    (report.json, report.md, report.html).
    """
    from .params import RunParams
    from .runner import EXIT_CODES
    params = RunParams(experiment, messages, amount, crash_rate, seed, commit_every, partitions, workers,
                       kill_mode, kills, kill_point, time_limit, commit_interval_ms, payload_bytes,
                       effect, fresh_transactional_id, transaction_timeout_ms, zombie_pause, list(fault_specs),
                       dedupe_ttl=dedupe_ttl, restart_delay=restart_delay,
                       auto_commit_interval_ms=auto_commit_interval_ms, kill_every=kill_every,
                       worker_cmd=worker_cmd, expect=expect, audit_sql=audit_sql,
                       idempotence=idempotence, acks=acks, max_in_flight=max_in_flight,
                       assignment=assignment, group_protocol=group_protocol)
    params.validate()
    if stack_kind == "local" and not (bootstrap_servers or postgres_dsn):
        _check_local_size_for_faults(params)      # before anything starts
    from pathlib import Path
    from .paths import reports_dir
    from .rundir import check_creatable, check_run_dir
    if out:   # before any stack starts; the runner claims the folder for good
        check_run_dir(Path(out))
    else:
        check_creatable(reports_dir())
    stopped = []
    report, folder = _with_stack(stack_kind, bootstrap_servers, postgres_dsn, keep_stack, quiet,
                                 lambda stack, _log: _run_one(params, stack, out, quiet), stopped=stopped)
    _last_lines(folder, "report.html", stopped)
    click.echo(folder)
    sys.exit(EXIT_CODES.get(report.verdict, 1))


def _check_local_size_for_faults(params) -> None:
    """A broker fault needs the 3-broker cluster: on a local folder of one broker, say so in one line
    before a stack is started (the fault checks the stack itself again once there is one)."""
    from .experiments import get
    from .faults.broker import BrokerFault
    from .stack.local import size
    faults = params.check_faults(get(params.experiment).resolve(params))
    if any(isinstance(f, BrokerFault) for f in faults) and size() < 3:
        name = next(f.name for f in faults if isinstance(f, BrokerFault))
        raise HarnessError(f"--fault {name} needs the 3-broker cluster, but this stack has {size()} broker(s): "
                           f"start it with `harness up --brokers 3` (after `harness down --purge`)")


def _run_one(params, stack, out, quiet):
    from . import runner
    from .ui import ProgressUI
    from .faults.supervisor import install_sigterm_as_interrupt
    install_sigterm_as_interrupt()
    with ProgressUI(params.experiment, quiet) as ui:
        report, folder = runner.run(params, stack, out=out, log=ui.log, ui=ui)
    if not quiet:
        _print_scoreboard(report)
    return report, folder


def _print_scoreboard(report):
    """The scoreboard on the terminal, each value as plain text (no rich markup, no escape codes)."""
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text
    from .report.escape import term
    con = Console(stderr=True)
    t = Table(title=Text(term(f"{report.experiment}: {report.verdict}")), title_justify="left")
    for col in ("metric", "observed", "predicted"):
        t.add_column(col, justify="left" if col == "metric" else "right")
    for row in report.scoreboard():
        t.add_row(*[Text(term(c)) for c in row])
    con.print(t)
    con.print(Text(term(report.summary())), soft_wrap=True)


def _with_stack(stack_kind, bootstrap_servers, postgres_dsn, keep_stack, quiet, body, stopped=None):
    """Get a stack (starting the local one if needed), run `body`, then let go of the stack.

    A local stack is used under a lease: afterwards the services that commands started are
    stopped only when no other command still uses them and `harness up` does not hold them
    (see harness.stack.local). Decisions about the stack go to stderr even with --quiet.
    `stopped`, when given, receives the services stopped on the way out.
    """
    from .secret_args import masked
    from .stack.resolve import get_stack
    from .ui import log_fn
    log = log_fn(quiet)
    stack, claim = get_stack(stack_kind, bootstrap_servers, postgres_dsn, log=log,
                             command=" ".join(masked(sys.argv[1:3])))
    try:
        return body(stack, log)
    finally:
        if claim is not None:
            gone = claim.release(keep=keep_stack, say=_say)
            if stopped is not None:
                stopped.extend(gone)


@cli.command()
@click.argument("run_ids", nargs=-1)
@click.option("--all", "all_runs", is_flag=True, help="Remove the topics and tables of every run.")
@stack_options
def clean(run_ids, all_runs, stack_kind, bootstrap_servers, postgres_dsn):
    """Remove the Kafka topics and Postgres tables of runs (reports stay).

    Runs keep their topics and tables for audit until cleaned.

    \b
    Example:
      harness clean 20261129T183000.123-offset-after-3f9a2c
      harness clean --all
    """
    from .clean import clean_runs
    if not run_ids and not all_runs:
        raise HarnessError("name the run ids to clean, or pass --all")
    done = _with_stack(stack_kind, bootstrap_servers, postgres_dsn, False, False,
                       lambda stack, _log: clean_runs(stack, list(run_ids), all_runs))
    for name, why in done.kept:
        _say(f"kept {name}: {why}")
    click.echo(f"removed {len(done.topics)} topics and {len(done.tables)} tables"
               + (f"; kept {len(done.kept)} (see above)" if done.kept else ""))


def _group_help() -> str:
    from .suite import OPT_IN_GROUPS, groups
    return ("Only the experiments of one group (each declaration names its group): "
            + "; ".join(f"{g}: {', '.join(names)}" for g, names in groups().items()) + ". Without it, every group"
            + f" but {', '.join(OPT_IN_GROUPS)} (run only when named).")


@cli.command(epilog="\b\nExamples:\n  harness suite\n  harness suite --group mistakes\n"
             "  harness suite --messages 200 --experiments offset-before,offset-after,dedupe\n"
             "  harness suite --stack compose --quiet --out reports/nightly")
@click.option("--messages", type=int, default=1000, show_default=True, help="Payments per experiment.")
@click.option("--crash-rate", type=float, default=0.1, show_default=True, help="Share of payments that crash (0..1).")
@click.option("--seed", type=int, default=25, show_default=True, help="One seed: the same crashes in every experiment.")
@click.option("--commit-every", type=int, default=1, show_default=True,
              help="Commit offsets every N records (not passed to an experiment that refuses it: auto-commit).")
@click.option("--experiments", "experiment_list", default=None,
              help="Comma-separated subset (default: every group's but the opt-in ones', eos-streams with "
                   "--effect postgres).")
@click.option("--group", default=None, metavar="NAME", help=_group_help())
@click.option("--parallel", type=int, default=3, show_default=True,
              help="Experiments run at the same time (each in its own topics, tables and consumer group).")
@click.option("--out", type=click.Path(file_okay=False), default=None, help="Suite folder (default reports/<suite-id>/).")
@click.option("--keep-stack", is_flag=True, help="Leave a stack this command started running afterwards.")
@click.option("--quiet", "-q", is_flag=True, help="Only the suite folder on stdout (for CI).")
@stack_options
def suite(messages, crash_rate, seed, commit_every, experiment_list, group, parallel, out, keep_stack, quiet,
          stack_kind, bootstrap_servers, postgres_dsn):
    """Run every experiment (or one --group) with one seed and compare them side by side.

    Writes <suite>/suite.json, suite.md and suite.html (one row per experiment,
    a bar chart of lost and duplicated effects, and a final line that says
    where exactly-once held and where it stopped), plus each run's own folder.
    Exit status, the worst of its runs: 0 all as-predicted, 1 one was
    unexpected, 2 bad input, 3 one did not finish or its audit failed,
    130 interrupted (every started run still writes its report).
    """
    from pathlib import Path
    from . import suite as suite_mod
    from .paths import reports_dir
    from .report.suite import write_suite
    from .faults.supervisor import install_sigterm_as_interrupt
    names = suite_mod.parse_experiments(experiment_list, group)
    if stack_kind == "local" and not (bootstrap_servers or postgres_dsn):
        from .stack.local import size
        suite_mod.check_brokers(group, size())      # the local stack's size, before starting anything
    if parallel < 1:
        raise HarnessError(f"--parallel must be at least 1, got {parallel}")
    from .params import RunParams
    opts = {"messages": messages, "crash_rate": crash_rate, "seed": seed, "commit_every": commit_every}
    common = [x for k, v in opts.items() for x in (f"--{k.replace('_', '-')}", str(v))]
    for name in names:       # each run gets the common options it accepts (suite.accepted_args)
        given = {a[2:].replace("-", "_") for a in suite_mod.accepted_args(name, common)[::2]}
        RunParams(name, **{k: v for k, v in opts.items() if k in given}).validate()
    folder = Path(out) if out else reports_dir() / suite_mod.new_suite_id()
    if (folder / "suite.json").exists():
        raise HarnessError(f"{folder} already holds a suite; choose another --out")
    from .rundir import check_creatable
    from .safefile import check_folder
    check_folder(folder, "the suite folder", "choose an --out that only you can write")     # before any stack starts
    check_creatable(folder)
    install_sigterm_as_interrupt()

    def body(stack, log):
        t0 = time.time()
        try:
            summary = suite_mod.run_suite(stack, names, common, folder, parallel, log=log, group=group)
        finally:
            if (folder / "suite.json").exists():
                write_suite(folder)
        if not quiet:
            from .report.suite import rows
            from .report.escape import term
            from rich.console import Console
            from rich.table import Table
            from rich.text import Text
            t = Table(title=Text(term(f"suite {folder.name}")), title_justify="left")
            keep = {"experiment": 0, "dup": 4, "lost": 5, "ledger": 6, "read_committed": 7, "verdict": 10, "s": 11}
            for col in keep:
                t.add_column(col, no_wrap=True)
            for row in rows(summary):
                t.add_row(*[Text(term(row[i])) for i in keep.values()])
            con = Console(stderr=True)
            con.print(t)
            con.print(Text(term(summary["conclusion"])), soft_wrap=True)
            con.print(f"suite wall time: {time.time() - t0:.0f} s")
        return summary
    stopped = []
    summary = _with_stack(stack_kind, bootstrap_servers, postgres_dsn, keep_stack, quiet, body, stopped=stopped)
    _last_lines(folder, "suite.html", stopped)
    click.echo(folder)
    sys.exit(suite_mod.exit_code(summary["experiments"]))


def _last_lines(folder, page: str, stopped: list) -> None:
    """Where the report is, and how to reach the run's data again (kept even when the stack was stopped)."""
    from pathlib import Path
    folder = Path(folder)
    _say(f"report: {folder / page} (also {page.replace('.html', '.md')} and {page.replace('.html', '.json')})")
    target = audit_target(folder)
    if stopped:
        _say(f"the stack is stopped; the data is kept: `harness up`, then `harness audit {target}`")
    else:
        _say(f"recount it from the stack: `harness audit {target}`")


def audit_target(folder) -> str:
    """How `harness audit` finds this folder again: its id under the reports folder, else its path."""
    import shlex
    from pathlib import Path
    from .paths import reports_dir
    folder = Path(folder)
    if folder.absolute().parent == reports_dir():
        return folder.name
    return shlex.quote(str(folder))


@cli.command("experiments")
@click.option("--json", "as_json", is_flag=True, help="Print the declarations as JSON (for scripts).")
def experiments_cmd(as_json):
    """List every experiment: its steps, kill points (and the damage a crash there does), what it proves.

    \b
    Example:
      harness experiments
      harness experiments --json | jq '.[].kill_points[].name'
    """
    if as_json:
        click.echo(json.dumps([e.describe() for e in REGISTRY.values()], indent=2))
        return
    for e in REGISTRY.values():
        click.echo(f"{e.name}: {e.proves}")
        click.echo(f"  steps: {e.steps_text()}")
        click.echo(f"  stores: {', '.join(e.stores.names())}; faults: {', '.join(e.default_faults) or 'none unless --fault names them'}")
        if e.roles:
            click.echo(f"  processes: {', '.join(r.name for r in e.roles)}")
        if e.lesson:
            click.echo(f"  lesson: {e.lesson}")
        for p in e.kill_points:
            mark = " (default)" if p.name == e.default_point else ""
            click.echo(f"  kill point {p.name}{mark}: after {p.after}, before {p.before or '(last step)'}: {p.says}")
        if e.kill_points:
            click.echo(f"  --kill-point any: a seeded point among these {len(e.kill_points)} per crash")
        click.echo("")


def _register_commands():
    from .commands.compare import compare
    from .commands.report import report
    from .commands.bench import bench
    from .commands.audit import audit
    cli.add_command(audit)
    cli.add_command(bench)
    cli.add_command(compare)
    cli.add_command(report)


_register_commands()


def main():  # noqa: C901
    hide_own()          # before anything else: `ps` must not show a password given on the command line
    # Text from PostgreSQL as text, whatever the server's encoding: a SQL_ASCII database hands psycopg
    # bytes unless the client says which encoding it reads (libpq's own variable; the workers inherit it,
    # and a DSN's client_encoding still wins).
    os.environ.setdefault("PGCLIENTENCODING", "UTF8")
    try:
        cli.main(standalone_mode=False)
    except HarnessError as e:   # its message may quote names and log lines: shown without escape codes
        from .report.escape import term_lines
        click.echo(f"error: {term_lines(e)}", err=True)
        if e.detail:
            click.echo("--- last lines of the log ---\n" + term_lines(e.detail.rstrip()), err=True)
        sys.exit(e.exit_status)
    except click.exceptions.Abort:
        click.echo("interrupted", err=True)
        sys.exit(130)
    except click.UsageError as e:
        # One line, as for every other bad input: what is wrong, and where the help is.
        words, c = [], e.ctx
        while c is not None and c.parent is not None:
            words.insert(0, c.info_name)
            c = c.parent
        where = " ".join(["harness", *words])
        click.echo(f"error: {e.format_message()} (see `{where} --help`)", err=True)
        sys.exit(2)
    except click.ClickException as e:
        e.show()
        sys.exit(e.exit_code)
    except click.exceptions.Exit as e:
        sys.exit(e.exit_code)
    except KeyboardInterrupt:
        click.echo("interrupted", err=True)
        sys.exit(130)
    except OSError as e:
        # A folder that filled up or turned read-only where no step could say it better (the report's
        # own writing keeps the report elsewhere and says where): one line, exit 3 as for any run whose
        # numbers cannot be had, never a traceback.
        # A folder the command writes in that was moved or deleted under it (by whoever owns its parent)
        # is the same kind of end: the file's own folder is gone.
        import errno
        from .report.escape import term
        gone = e.errno in (errno.ENOENT, errno.ENOTDIR) and isinstance(e.filename, str) \
            and not os.path.isdir(os.path.dirname(e.filename))
        if e.errno not in (errno.ENOSPC, errno.EDQUOT, errno.EROFS) and not gone:
            raise
        where = f": {term(str(e.filename))}" if e.filename else ""
        why = " (its folder was moved or deleted while the command ran" if gone else " (the command stopped there"
        click.echo(f"error: {e.strerror}{where}{why}; what it wrote before is kept)", err=True)
        sys.exit(3)


if __name__ == "__main__":
    main()
