"""`harness report`: render report.md and report.html again from a folder's report.json (or suite.json)."""

import importlib
import os
from pathlib import Path

import click

from ...core.errors import HarnessError


def rerender(folder: Path) -> Path:
    """Rewrite a run folder's report.md and report.html (or a suite's pages); returns the folder.

    The file is validated first (reporting/validate.py: strict JSON, bounded, its schema) and everything
    is rendered in memory, so a report.json or suite.json the renderers cannot read ends in one
    HarnessError with the existing files untouched; write_all then replaces each file atomically.
    """
    from ...core.safefile import check_folder
    folder = folder.parent if folder.is_file() else folder
    check_folder(folder, "the report folder", "copy it into a folder that only you can write")
    # The folder is opened once (never through a link) and everything is read and written through that
    # descriptor (/proc/self/fd/N names the opened folder itself): whoever owns its parent may swap it for a
    # link at any moment, and then root would write into the link's target.
    try:
        dfd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError as e:
        raise HarnessError(f"cannot open the report folder {folder}: {e.strerror or e} (a symbolic link?)") from None
    try:
        at = Path(f"/proc/self/fd/{dfd}")
        try:
            _rerender_at(at, folder)
        except HarnessError as e:
            e.args = tuple(a.replace(str(at), str(folder)) if isinstance(a, str) else a for a in e.args)
            raise
    finally:
        os.close(dfd)
    return folder


def _rerender_at(folder: Path, shown: Path) -> None:
    from ...reporting import validate
    from ...core.escape import term
    from ...reporting.run_report import RunReport
    from ...reporting.writer import write_all
    if (folder / "suite.json").is_file():
        validate.read_suite(folder / "suite.json")   # one clear line for a broken suite.json
        try:
            _write_suite()(shown)      # harness.reporting.suite_report writes by name (each page atomically, never via a link)
        except (KeyError, TypeError, AttributeError, ValueError) as e:
            what = f"field {e.args[0]!r} is missing" if isinstance(e, KeyError) else f"{type(e).__name__}: {e}"
            raise HarnessError(f"cannot render {term(str(shown / 'suite.json'))}: {term(what)[:200]}; "
                               f"nothing was rewritten") from None
        return
    path = folder / "report.json"
    if not path.is_file():
        raise HarnessError(f"{term(str(shown))} has no report.json (nor suite.json): not a run or suite folder")
    data, _notes = validate.read_report(path)
    report = RunReport(data)
    try:
        from ...reporting import html, markdown
        markdown.render(report)
        html.render(report)
    except (KeyError, TypeError, AttributeError, ValueError) as e:
        what = f"field {e.args[0]!r} is missing" if isinstance(e, KeyError) else f"{type(e).__name__}: {e}"
        raise HarnessError(f"cannot render {term(str(shown / 'report.json'))}: {term(what)[:200]} (not a schema "
                           f"{term(data.get('schema_version', 1))} run report?); nothing was rewritten") from None
    write_all(report, folder)


def _write_suite():
    try:
        module = importlib.import_module("harness.reporting.suite_report")
    except ModuleNotFoundError as e:
        if e.name not in ("harness.reporting.suite_report",):
            raise
        raise HarnessError("this harness cannot render suite folders yet (no harness.reporting.suite_report module)") from None
    fn = getattr(module, "write_suite", None)
    if fn is None:
        raise HarnessError("this harness cannot render suite folders yet (harness.reporting.suite_report has no write_suite)")
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
    from ...reporting.compare_targets import find_folder
    from .stack_options import print_folder
    print_folder(rerender(find_folder(folder, reports_dir)))
