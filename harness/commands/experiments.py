"""`harness experiments`: every declaration, its steps, kill points and the damage a crash there does.
"""

import json

import click

from ..experiments import REGISTRY


@click.command("experiments")
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
