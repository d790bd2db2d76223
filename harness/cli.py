"""The `harness` command: a thin click layer over the library.

Every user mistake becomes a HarnessError, printed here as one line (plus the
tail of a service log when there is one) with exit status 2; a traceback
means a bug in the harness. Each command's help ends with an example.
"""

import functools
import json
import sys

import click

from . import __version__
from .errors import HarnessError


def stack_options(f):
    """--stack / --bootstrap-servers / --postgres-dsn, shared by every command that needs a stack."""
    @click.option("--stack", "stack_kind", default="local", show_default=True, envvar="HARNESS_STACK",
                  help="Which stack to start or use: local (processes, no Docker) or compose (Docker).")
    @click.option("--bootstrap-servers", envvar="HARNESS_BOOTSTRAP_SERVERS",
                  help="Use an existing Kafka at this address (with --postgres-dsn); the harness starts nothing.")
    @click.option("--postgres-dsn", envvar="HARNESS_POSTGRES_DSN",
                  help="Use an existing PostgreSQL (with --bootstrap-servers).")
    @functools.wraps(f)
    def wrapper(*args, **kwargs):
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
@stack_options
def up(stack_kind, bootstrap_servers, postgres_dsn):
    """Start Kafka and PostgreSQL (or reuse them), and wait until both answer.

    The local stack runs as processes under the state folder ($HARNESS_HOME,
    default .harness/): Kafka resolved from Maven Central with mvn on first
    use, PostgreSQL from Debian's server binaries.

    \b
    Example:
      harness up && harness status
    """
    from .stack.resolve import get_stack
    stack, _ = get_stack(stack_kind, bootstrap_servers, postgres_dsn, log=_say)
    for note in stack.notes:
        _say(note)
    click.echo(f"{stack.kind} stack ready: kafka {stack.bootstrap_servers}, postgres "
               f"{stack.public()['postgres_dsn']}")


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
    from .stack import local, compose
    from .stack.resolve import external
    if bootstrap_servers or postgres_dsn:
        stack = external(bootstrap_servers, postgres_dsn)
    elif stack_kind == "compose" or (local.read_record() or {}).get("kind") == "compose":
        stack = compose.status()
    else:
        stack = local.status(check=True)
    if stack is None:
        if as_json:
            click.echo(json.dumps({"kind": None, "healthy": False}))
        else:
            click.echo("no stack is up (start one with `harness up`)")
        sys.exit(1)
    pub = stack.public()
    if as_json:
        click.echo(json.dumps(pub, indent=2))
    else:
        click.echo(f"stack:             {pub['kind']} ({'healthy' if stack.healthy else 'NOT healthy'})")
        click.echo(f"bootstrap_servers: {pub['bootstrap_servers']}")
        click.echo(f"postgres_dsn:      {pub['postgres_dsn']}")
        click.echo(f"kafka version:     {pub['kafka_version'] or 'unknown'}")
        click.echo(f"postgres version:  {pub['postgres_version'] or 'unknown'}")
        if pub["pids"]:
            click.echo("pids:              " + ", ".join(f"{k}={v}" for k, v in pub["pids"].items()))
    sys.exit(0 if stack.healthy else 1)


@cli.command()
@click.option("--purge", is_flag=True, help="Also delete Kafka's and PostgreSQL's data.")
def down(purge):
    """Stop the Kafka and PostgreSQL that `harness up` started.

    External clusters are never touched.

    \b
    Example:
      harness down --purge
    """
    from .stack import local, compose
    if (local.read_record() or {}).get("kind") == "compose":
        compose.down(purge, log=_say)
    else:
        local.down(purge, log=_say)
    click.echo("stack stopped")


def main():
    try:
        cli.main(standalone_mode=False)
    except HarnessError as e:
        click.echo(f"error: {e}", err=True)
        if e.detail:
            click.echo("--- last lines of the log ---\n" + e.detail.rstrip(), err=True)
        sys.exit(2)
    except click.exceptions.Abort:
        click.echo("interrupted", err=True)
        sys.exit(130)
    except click.ClickException as e:
        e.show()
        sys.exit(e.exit_code)
    except click.exceptions.Exit as e:
        sys.exit(e.exit_code)
    except KeyboardInterrupt:
        click.echo("interrupted", err=True)
        sys.exit(130)
