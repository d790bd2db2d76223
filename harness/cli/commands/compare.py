"""`harness compare`: runs and suites side by side, with deltas, warnings and CI rules."""

import sys
from pathlib import Path

import click

from ...core.errors import HarnessError
from ...reporting import comparison
from ...reporting.compare_render import to_html, to_json, to_markdown, to_text
from ...reporting.compare_rules import evaluate, parse_fail_on
from ...reporting.compare_targets import load_target
from ...core.escape import term

FORMATS = {"text": to_text, "markdown": to_markdown, "html": to_html}


@click.command("compare")
@click.argument("targets", nargs=-1, required=True, metavar="TARGET...")
@click.option("--fail-on", "fail_on", multiple=True, metavar="RULE",
              help="Exit 1 when RULE holds in the last target (repeatable): unexpected (any verdict but "
                   "as-predicted), incomplete, lost>0, eos:rc.duplicates>0, offset-after:duplicates>=150; a signed "
                   "number is a change from the first target: wall_seconds>+20%, duplicates>+0.")
@click.option("--allow-incomplete", is_flag=True,
              help="With --fail-on unexpected: let runs that did not finish (verdict incomplete or interrupted, "
                   "a suite's 'not run') pass. Without it they fail the rule: they proved nothing.")
@click.option("--allow-unknown", is_flag=True,
              help="Let a metric rule pass an experiment it cannot check: a metric that is null, missing or not a "
                   "number in its report, or an experiment a suite lists without a report. Without it they fail "
                   "the rule: an unknown value proves nothing.")
@click.option("--format", "out_format", type=click.Choice(["text", "markdown", "html", "json"]), default="text",
              show_default=True, help="How to print the table.")
@click.option("--md", "as_md", is_flag=True, help="Print Markdown (--format markdown).")
@click.option("--html", "as_html", is_flag=True, help="Print one self-contained HTML page (--format html).")
@click.option("--reports-dir", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Where run and suite ids (and `latest`) are looked up [default: $HARNESS_REPORTS or reports/].")
def compare(targets, fail_on, allow_incomplete, allow_unknown, out_format, as_md, as_html, reports_dir):
    """Compare runs or suites: one row per experiment and metric, each target against the first.

    A TARGET is a run folder, a suite folder, a report.json, a run or suite
    id under the reports folder, or `latest`. Experiments are matched by
    name; single runs are put side by side whatever their experiment. Every
    target after the first gets a delta column (signed, and in percent)
    against the first target. Under the table each metric is written out
    (rc. = the output topic read with read_committed, ru. = read_uncommitted);
    n/a marks a metric that does not apply to a run, unknown one that was not
    measured. One target just prints its table (useful with --fail-on in CI).

    Warnings (on stderr) say when the targets ran on different Kafka,
    librdkafka or PostgreSQL versions or with different parameters. Exits 1
    when a --fail-on rule holds, printing why; 2 on bad input.

    `--fail-on unexpected` passes only as-predicted: a verdict of unexpected,
    incomplete or interrupted, a report without a verdict, and an experiment
    that a suite lists without a report all fail it. --allow-incomplete lets
    the runs that did not finish (incomplete, interrupted, not run) pass;
    a run that failed without a report still fails, and so does one that
    suite.json calls as-predicted but has no report.

    Any other rule fails, saying why, where it cannot be checked: a metric
    that is null, missing or not a number in a report, or an experiment a
    suite lists without a report (--allow-unknown lets those pass). A suite
    entry whose report is of another experiment or run is refused.

    \b
    Example:
      harness compare reports/20261129T183000-offset-after latest
      harness compare SUITE_A SUITE_B --fail-on unexpected --fail-on 'wall_seconds>+20%'
      harness compare latest --fail-on 'eos:rc.duplicates>0' --format markdown
      harness compare reports/run-a reports/run-b --html > compare.html
    """
    if as_md and as_html:
        raise HarnessError("--md and --html each choose the output; give one of them")
    out_format = "markdown" if as_md else "html" if as_html else out_format
    rules = [parse_fail_on(expr, allow_incomplete) for expr in fail_on]
    if allow_incomplete and not any(r.op == "not in" for r in rules):
        raise HarnessError("--allow-incomplete only relaxes --fail-on unexpected, and no such rule was given")
    loaded = [load_target(arg, reports_dir) for arg in targets]
    result = comparison.compare(loaded)
    failures = evaluate(result, rules, allow_unknown)
    if out_format not in ("markdown", "html"):   # Markdown and HTML carry their warnings inside
        for w in result.warnings:
            click.echo(f"warning: {term(w)}", err=True)
    if out_format == "json":
        click.echo(to_json(result, failures), nl=False)
    else:
        import time
        click.echo(to_html(result, time.strftime("%Y-%m-%d")) if out_format == "html" else FORMATS[out_format](result),
                   nl=False)
    for reason in failures:
        click.echo(f"fail: {term(reason)}", err=True)
    if failures:
        sys.exit(1)
