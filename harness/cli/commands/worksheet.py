"""`harness worksheet`: the predict-first worksheet of a group (or a list of experiments), to fill in and hand
to `harness suite --predict`.
"""

import click


@click.command("worksheet")
@click.option("--group", default="core", show_default=True, metavar="NAME",
              help="The experiments of one group (as `harness suite --group`); core asks four questions: duplicates without a key, with a key, losses with ack-first, total deliveries.")
@click.option("--experiments", "experiment_list", default=None,
              help="Comma-separated experiments instead of a group (two questions each: duplicates and lost).")
def worksheet(group, experiment_list):
    """Print a predict-first worksheet (TOML, one line per question) to fill in before a suite runs.

    Replace each "?" with a guess, then give the file to `harness suite
    --predict`: the guesses are recorded in the suite folder before the runs
    start, and the suite's reports show you / actual / close enough (within
    10 % of the actual number, or exactly 0 when it is 0; deliveries, effects
    and the ledger total by their distance from the payments sent).

    \b
    Example:
      harness worksheet > worksheet.toml
      harness suite --group core --predict worksheet.toml
    """
    from ...reporting.guesses import worksheet as sheet
    from ...run.suite_runner import parse_experiments
    if experiment_list is not None:
        names, group = parse_experiments(experiment_list), None
    else:
        names = parse_experiments(None, group)
    click.echo(sheet(names, group), nl=False)
