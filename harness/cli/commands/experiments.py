"""`harness experiments`: every declaration, its steps, kill points and the damage a crash there does, the
experiment files under experiments/, and the JSON Schema those files follow.
"""

import json

import click

from ...experiments import REGISTRY


@click.command("experiments")
@click.option("--json", "as_json", is_flag=True, help="Print the declarations as JSON (for scripts).")
@click.option("--schema", "as_schema", is_flag=True,
              help="Print the JSON Schema of an experiment file (generated from the declared options and faults).")
@click.option("--check", "check_files", multiple=True, type=click.Path(dir_okay=False), metavar="FILE.toml",
              help="Validate experiment files (repeatable): one line per file, exit 2 at the first bad one.")
def experiments_cmd(as_json, as_schema, check_files):
    """List every experiment: its steps, kill points (and the damage a crash there does), what it proves.

    \b
    Example:
      harness experiments
      harness experiments --json | jq '.[].kill_points[].name'
      harness experiments --schema > experiment.schema.json
      harness experiments --check experiments/core/dedupe.toml
    """
    from ...run import experiment_file
    if as_schema:
        click.echo(json.dumps(experiment_file.schema(), indent=2))
        return
    if check_files:
        from ...run.params import RunParams, resolve
        from ...core.errors import HarnessError
        for path in check_files:
            f = experiment_file.load(path)
            try:
                resolve(RunParams(f.experiment, faults=f.faults, **f.options))
            except HarnessError as e:
                raise HarnessError(f"{f.path}: {e}") from None
            click.echo(f"{path}: valid ({f.experiment})")
        return
    if as_json:
        click.echo(json.dumps([e.describe() for e in REGISTRY.values()], indent=2))
        return
    root = experiment_file.experiments_root()
    files = experiment_file.listing(root)
    for e in REGISTRY.values():
        click.echo(f"{e.name}: {e.proves}")
        click.echo(f"  steps: {e.steps_text()}")
        click.echo(f"  stores: {', '.join(e.stores.names())}; faults: {', '.join(e.default_faults) or 'none unless --fault names them'}")
        if e.roles:
            click.echo(f"  processes: {', '.join(r.name for r in e.roles)}")
        if e.lesson:
            click.echo(f"  lesson: {e.lesson}")
        if e.options or e.defaults:
            own = [o.flag + (f" (default {e.defaults[o.name]})" if o.name in e.defaults else "") for o in e.options]
            own += [f"--{k.replace('_', '-')} defaults to {v} here" for k, v in e.defaults.items()
                    if k not in {o.name for o in e.options}]
            click.echo(f"  its own options: {'; '.join(own)}")
        for p in e.kill_points:
            mark = " (default)" if p.name == e.default_point else ""
            click.echo(f"  kill point {p.name}{mark}: after {p.after}, before {p.before or '(last step)'}: {p.says}")
        if e.kill_points:
            click.echo(f"  --kill-point any: a seeded point among these {len(e.kill_points)} per crash")
        click.echo("")
    if root is None:
        click.echo("Experiment files: no experiments/ folder here or in the harness package")
        return
    from ...core.escape import term
    click.echo(f"Experiment files under {term(str(root))} (harness run FILE, harness suite GROUP):")
    for rel, kind, purpose in files:
        click.echo(term(f"  {rel}  [{kind}]  {purpose}"))
