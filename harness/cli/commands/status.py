"""`harness status`: the stack's addresses, versions, pids and health; exit 0 only when healthy.
"""

import json
import sys

import click

from .stack_options import stack_options


@click.command()
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object (for scripts).")
@stack_options
def status(as_json, stack_kind, bootstrap_servers, postgres_dsn):
    """Show the stack: addresses, versions, pids and whether it is healthy.

    Exits 0 when healthy, 1 otherwise.

    \b
    Example:
      harness status --json
    """
    from ...stack.resolve import current
    stack = current(stack_kind, bootstrap_servers, postgres_dsn)
    if stack is None:
        from ...core.paths import state_dir
        from ...stack import local
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
