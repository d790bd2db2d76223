"""`harness env`: shell settings to reach the stack with plain psql and kcat (never the password itself).
"""

import json

import click

from ...core.errors import HarnessError
from .stack_options import stack_options


@click.command("env", epilog="\b\nExamples:\n  eval \"$(harness env)\"\n  psql -c 'select 1'\n"
             "  kcat -b \"$HARNESS_BOOTSTRAP_SERVERS\" -L")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object of the same settings (for scripts).")
@stack_options
def env_cmd(as_json, stack_kind, bootstrap_servers, postgres_dsn):
    """Print shell settings to reach the stack with plain psql and kcat.

    Exports PGHOST, PGPORT, PGUSER, PGDATABASE and PGPASSFILE (a file the
    harness keeps in its state folder, mode 0600: the password itself is never
    printed), HARNESS_BOOTSTRAP_SERVERS for `kcat -b`, HARNESS_KAFKA_CONFIG_FILE
    for `kcat -F` when the stack needs client settings, and
    HARNESS_POSTGRES_DSN (without the password). Later `harness` commands in
    that shell use the same stack. Exits 2 when no stack is up, or when one of
    its services is stopped or does not answer.

    On the harness's SCRAM stacks (the default, local and compose) the shell's
    Kafka login is a user of its own, harness_shell, not the harness's super
    user: it may read and
    describe every topic and describe every group (READ only on groups named
    harness-shell-*), and write, create, delete or alter nothing. Its settings
    are in $HARNESS_HOME/shell-client.properties (0600); the harness's own
    commands in that shell still log in as the harness.
    """
    from ...core.paths import state_dir
    from ...stack.resolve import current
    from ...stack.shellenv import settings, shell_lines, unusable
    stack = current(stack_kind, bootstrap_servers, postgres_dsn, check=False)
    if stack is None or not stack.postgres_dsn or not stack.bootstrap_servers:
        raise HarnessError("no stack is up: start one with `harness up`, then run `eval \"$(harness env)\"`")
    why = unusable(stack)
    if why:
        raise HarnessError(why)
    import os
    from ...stack.local_record import client_properties_file
    if stack.owned and client_properties_file():     # the harness's SCRAM stack, local or compose: a read-only user
        from ...stack import shell_user
        config_file = shell_user.ensure(stack, state_dir())
    else:
        config_file = os.environ.get("HARNESS_KAFKA_CONFIG_FILE") or None
    values = settings(stack, state_dir(), config_file)
    click.echo(json.dumps(values, indent=2) if as_json else shell_lines(values), nl=as_json)
