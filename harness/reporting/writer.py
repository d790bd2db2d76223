"""Writing a run's report folder: report.json, report.md and report.html (or, when the folder cannot
take them, the same report in `<state>/unwritten-reports/<run-id>/`: a full --out must not cost the report).

Apart from model.py because it calls every rendering (markdown.py, html.py), and every rendering reads
a RunReport: with the writing here, model.py imports no rendering and no rendering imports model.py.
`report` below is a model.RunReport, used only through its methods, so this module does not import
model.py either.
"""

from pathlib import Path


def write_all(report, folder: Path) -> None:
    """Write report.json, report.md and report.html, each atomically (no half-written report), never
    through a link (`harness.core.safefile`). A file that cannot be written (a full disk) ends the writing in
    one ReportNotWritten naming what was written; no temporary file is left behind."""
    from . import markdown, html
    from ..core.errors import ReportNotWritten
    from ..core.safefile import make_folder, write_text
    texts = (("report.json", report.to_json()), ("report.md", markdown.render(report, folder)),
             ("report.html", html.render(report, folder)))
    written = []
    try:
        make_folder(folder)
        for name, text in texts:
            write_text(folder / name, text)
            written.append(name)
    except OSError as e:
        done = f"only {', '.join(written)} was written" if written else "nothing was written"
        raise ReportNotWritten(f"cannot write the report in {folder}: {e.strerror or e} "
                               f"({texts[len(written)][0]}; {done})") from None


def write_or_keep(report, folder: Path) -> None:
    """`write_all` for a run that just ended: when its folder cannot take the report (a full file system, a
    quota, a folder gone read-only), the whole report (json, md, html) is written to a folder of the state
    folder instead, `<state>/unwritten-reports/<run-id>/`, and the ReportNotWritten that ends the run (exit 3)
    says why and carries that folder as `kept` (the run prints it last), or says that even that failed."""
    from ..core.errors import ReportNotWritten
    from ..core.paths import state_dir
    try:
        write_all(report, folder)
        return
    except ReportNotWritten as e:
        failed = str(e)
    import re
    name = re.sub(r"[^A-Za-z0-9._-]", "_", str(report.data.get("run_id") or "run")).lstrip(".")[:120] or "run"
    keep = state_dir() / "unwritten-reports" / name
    try:
        write_all(report, keep)
    except ReportNotWritten as e:
        raise ReportNotWritten(f"{failed}; the report could not be kept in {keep} either ({e}): it is lost") from None
    error = ReportNotWritten(f"{failed}; the report was written to {keep} instead")
    error.kept = keep
    raise error
