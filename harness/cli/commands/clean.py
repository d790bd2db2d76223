"""`harness clean`: remove the Kafka topics and Postgres tables of runs the registry says are ours.
"""

import click

from ...core.errors import HarnessError
from .stack_options import say, stack_options, with_stack


@click.command()
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
    from ...run.cleanup import clean_runs
    if not run_ids and not all_runs:
        raise HarnessError("name the run ids to clean, or pass --all")
    done = with_stack(stack_kind, bootstrap_servers, postgres_dsn, False, False,
                       lambda stack, _log: clean_runs(stack, list(run_ids), all_runs))
    for name, why in done.kept:
        say(f"kept {name}: {why}")
    click.echo(f"removed {len(done.topics)} topics and {len(done.tables)} tables"
               + (f"; kept {len(done.kept)} (see above)" if done.kept else ""))
