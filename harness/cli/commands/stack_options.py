"""What every command that uses a stack shares: its options, getting and letting go of the stack, the last lines.

`stack_options` gives a command --stack, --bootstrap-servers, --postgres-dsn
and the Kafka client settings (which go to harness.clients.kafka_client, not to the
command); `with_stack` starts or reuses the stack around a command's body and
lets go of it afterwards; `last_lines` tells where the report is and how to
recount it.
"""

import functools
import sys

import click


def recorded_stack() -> str:
    """--stack's default: the kind of stack this state folder holds (a compose stack that `harness up
    --stack compose` started is what a later `run` means), else local."""
    from ...stack.local_record import read_record
    return "compose" if (read_record() or {}).get("kind") == "compose" else "local"


def stack_options(f):
    """--stack / --bootstrap-servers / --postgres-dsn / --kafka-config[-file], shared by every command that
    needs a stack. The Kafka client settings do not reach `f`: they are handed to harness.clients.kafka_client,
    which every Kafka client the command starts takes its config from."""
    @click.option("--stack", "stack_kind", default=recorded_stack, envvar="HARNESS_STACK",
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


def kafka_version_option(f):
    """--kafka-version, for the commands that may start a stack (up, run, suite, bench); it does not reach
    `f`: it goes to harness.stack.kafka_versions, read where a stack is started. Written above `@stack_options`."""
    @click.option("--kafka-version", "kafka_version", envvar="HARNESS_KAFKA_VERSION", metavar="RELEASE",
                  help="The Kafka release of a stack the harness starts, e.g. 3.9.1 or 4.4.0 (3.9 or newer; local: "
                       "its jars resolved with mvn, compose: its image). [default: what the state folder's stack "
                       "runs, else the pinned release]")
    @functools.wraps(f)
    def wrapper(*args, kafka_version=None, **kwargs):
        from ...stack import kafka_versions
        kafka_versions.request(kafka_version)      # refused for an existing cluster by get_stack
        return f(*args, **kwargs)
    return wrapper


def takes_kafka_settings(f):
    """`f` without the --kafka-config/--kafka-config-file arguments: they go to harness.clients.kafka_client."""
    @functools.wraps(f)
    def wrapper(*args, kafka_config=(), kafka_config_file=None, **kwargs):
        from ...clients import kafka_client
        from ...core.paths import state_dir
        from ...stack.shell_user import is_shell_file
        if kafka_config_file and is_shell_file(kafka_config_file, state_dir()):
            kafka_config_file = None    # `harness env`'s read-only login: the harness keeps its own
        kafka_client.request(kafka_client.from_options(kafka_config, kafka_config_file))
        return f(*args, **kwargs)
    return wrapper


def say(msg: str) -> None:
    click.echo(msg, err=True)



def with_stack(stack_kind, bootstrap_servers, postgres_dsn, keep_stack, quiet, body, stopped=None):
    """Get a stack (starting the local one if needed), run `body`, then let go of the stack.

    A local stack is used under a lease: afterwards the services that commands started are
    stopped only when no other command still uses them and `harness up` does not hold them
    (see harness.stack.local). Decisions about the stack go to stderr even with --quiet.
    `stopped`, when given, receives the services stopped on the way out.
    """
    from ...clients.secret_args import masked
    from ...stack.resolve import get_stack
    from ..ui import log_fn
    log = log_fn(quiet)
    stack, claim = get_stack(stack_kind, bootstrap_servers, postgres_dsn, log=log,
                             command=" ".join(masked(sys.argv[1:3])))
    try:
        return body(stack, log)
    finally:
        if claim is not None:
            gone = claim.release(keep=keep_stack, say=say)
            if stopped is not None:
                stopped.extend(gone)



def print_folder(folder) -> None:
    """The last line of a command that wrote a folder (run, suite, matrix, bench, report): its path on stdout,
    control characters shown as escapes (`\\n`, `\\x1b`), so a newline or an escape sequence in an --out
    cannot add a line after it, rewrite the terminal, or hide which folder it is."""
    from ...core.escape import term
    click.echo(term(str(folder)))


def last_lines(folder, page: str, stopped: list) -> None:
    """Where the report is, and how to reach the run's data again (kept even when the stack was stopped)."""
    from pathlib import Path
    from ...core.escape import term
    folder = Path(folder)
    say(f"report: {term(folder / page)} (also {page.replace('.html', '.md')} and {page.replace('.html', '.json')})")
    if page == "suite.html" and not any(folder.glob("*/report.json")):
        return          # no run of the suite wrote a report (stopped while they set up): nothing to recount
    target = term(audit_target(folder))
    if stopped:
        say(f"the stack is stopped; the data is kept: `harness up`, then `harness audit {target}`")
    else:
        say(f"recount it from the stack: `harness audit {target}`")


def audit_target(folder) -> str:
    """How `harness audit` finds this folder again: its id under the reports folder, else its path."""
    import shlex
    from pathlib import Path
    from ...core.paths import reports_dir
    folder = Path(folder)
    if folder.absolute().parent == reports_dir():
        return folder.name
    return shlex.quote(str(folder))

