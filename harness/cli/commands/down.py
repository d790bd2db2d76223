"""`harness down`: stop the Kafka and PostgreSQL this state folder started, and only those.
"""

import click

from ...core.errors import HarnessError
from .stack_options import say


@click.command()
@click.option("--purge", is_flag=True, help="Also delete Kafka's and PostgreSQL's data.")
def down(purge):
    """Stop the Kafka (every node) and PostgreSQL that this state folder started.

    Only processes whose pid record matches (pid, start time, our own config or
    data path) are signalled. External clusters are never touched. The stacks
    an interrupted `harness matrix` left ($HARNESS_HOME/matrix/<release>) are
    stopped and deleted too.

    \b
    Example:
      harness down --purge
    """
    from ...stack import local, compose
    from ...stack.local_record import read_record
    # A compose stack, or (with --purge) the volumes a compose stack stopped without --purge left behind:
    # its password file says this folder started one.
    if (read_record() or {}).get("kind") == "compose" or (purge and compose.left_volumes()):
        if not compose.down(purge, log=say):
            raise HarnessError(f"cannot stop the compose stack: {compose.engine_available()}")
        stopped = ["the compose stack"]
    else:
        stopped = local.down(purge, log=say)
    from ...run.matrix_runner import leftover_homes, purge as purge_release
    for home in leftover_homes():       # the per-release stacks an interrupted or killed `harness matrix` left
        purge_release(home, log=say)
        stopped.append(f"the matrix stack of Kafka {home.name}")
    click.echo("stopped " + " and ".join(stopped) if stopped else "no stack was running")
