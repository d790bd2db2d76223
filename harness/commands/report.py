"""`harness report`: render report.md and report.html again from a folder's report.json (or suite.json)."""

import importlib
from pathlib import Path

import click

from ..errors import HarnessError


def rerender(folder: Path) -> Path:
    """Rewrite a run folder's report.md and report.html (or a suite's pages); returns the folder.

    The file is validated first (report/validate.py: strict JSON, bounded, its schema) and everything
    is rendered in memory, so a report.json or suite.json the renderers cannot read ends in one
    HarnessError with the existing files untouched; write_all then replaces each file atomically.
    """
    from ..report import validate
    from ..report.escape import term
    from ..report.model import RunReport, write_all
    from ..safefile import check_folder
    folder = folder.parent if folder.is_file() else folder
    check_folder(folder, "the report folder", "copy it into a folder that only you can write")
    if (folder / "suite.json").is_file():
        validate.read_suite(folder / "suite.json")   # one clear line for a broken suite.json
        try:
            _write_suite()(folder)
        except (KeyError, TypeError, AttributeError, ValueError) as e:
            what = f"field {e.args[0]!r} is missing" if isinstance(e, KeyError) else f"{type(e).__name__}: {e}"
            raise HarnessError(f"cannot render {term(str(folder / 'suite.json'))}: {term(what)[:200]}; "
                               f"nothing was rewritten") from None
        return folder
    path = folder / "report.json"
    if not path.is_file():
        raise HarnessError(f"{term(str(folder))} has no report.json (nor suite.json): not a run or suite folder")
    data, _notes = validate.read_report(path)
    report = RunReport(data)
    try:
        from ..report import html, markdown
        markdown.render(report)
        html.render(report)
    except (KeyError, TypeError, AttributeError, ValueError) as e:
        what = f"field {e.args[0]!r} is missing" if isinstance(e, KeyError) else f"{type(e).__name__}: {e}"
        raise HarnessError(f"cannot render {term(str(path))}: {term(what)[:200]} (not a schema "
                           f"{term(data.get('schema_version', 1))} run report?); nothing was rewritten") from None
    write_all(report, folder)
    return folder


def _write_suite():
    try:
        module = importlib.import_module("harness.report.suite")
    except ModuleNotFoundError as e:
        if e.name not in ("harness.report.suite",):
            raise
        raise HarnessError("this harness cannot render suite folders yet (no harness.report.suite module)") from None
    fn = getattr(module, "write_suite", None)
    if fn is None:
        raise HarnessError("this harness cannot render suite folders yet (harness.report.suite has no write_suite)")
    return fn


@click.command("report")
@click.argument("folder")
@click.option("--reports-dir", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Where run and suite ids (and `latest`) are looked up [default: $HARNESS_REPORTS or reports/].")
def report(folder, reports_dir):
    """Render report.md and report.html again from a folder's report.json.

    FOLDER is a run folder, a suite folder (its pages are rebuilt from
    suite.json), a run or suite id under the reports folder, or `latest`.
    Use it after editing a renderer, or to restore a deleted page. Prints
    the folder.

    \b
    Example:
      harness report reports/20261129T183000-offset-after
      harness report latest
    """
    from ..report.compare import find_folder
    click.echo(rerender(find_folder(folder, reports_dir)))
