"""Terminal output: a progress bar on a terminal, sparse plain lines elsewhere, nothing when quiet.

Everything goes to stderr, except the report folder, which is the last line
on stdout so scripts can capture it. A log line may carry names and output the
harness did not write (a worker's last words, a topic name), so every line is
shown with its control characters escaped (harness/core/escape.py): no escape
sequence reaches the terminal.
"""

import sys
import time

import click

from ..core.escape import term, term_lines


class ProgressUI:
    def __init__(self, label: str, quiet: bool = False):
        self.label, self.quiet = term(label), quiet
        self.tty = sys.stderr.isatty()
        self._bar = None
        self._task = None
        self._last_line = 0.0

    def __enter__(self):
        if not self.quiet and self.tty:
            from rich.progress import Progress, BarColumn, TextColumn, TimeElapsedColumn, MofNCompleteColumn
            from rich.console import Console
            self._bar = Progress(TextColumn("{task.description}", markup=False), BarColumn(), MofNCompleteColumn(),
                                 TextColumn("crashes {task.fields[crashes]}  restarts {task.fields[restarts]}"),
                                 TimeElapsedColumn(), console=Console(stderr=True), transient=True)
            self._bar.__enter__()
            self._task = self._bar.add_task(self.label, total=None, crashes=0, restarts=0)
        return self

    def __call__(self, done: int, total: int, crashes: int, restarts: int) -> None:
        if self.quiet:
            return
        if self._bar is not None:
            self._bar.update(self._task, completed=done, total=total, crashes=crashes, restarts=restarts)
        elif time.time() - self._last_line > 5:
            self._last_line = time.time()
            click.echo(term_lines(f"  {self.label}: {done}/{total} committed, {crashes} crashes, {restarts} restarts"),
                       err=True)

    def stopping(self, workers: int | None = None) -> str:
        """Say at once what an interrupt does now (from the signal handler, before the stop's own work), and
        show it on the bar."""
        text = (f"stopping: {f'{workers} worker(s)' if workers else 'the workers'} end now (a busy one is killed "
                f"where it stands and a transaction it left open is fenced), then the stores are read and the "
                f"interrupted report is written")
        if self._bar is not None:
            self._bar.update(self._task, description=f"{self.label} (stopping)")
        self.log(text)
        return text

    def log(self, message: str) -> None:
        """A line of the run's log: above the live bar on a terminal (never glued onto it)."""
        if self.quiet:
            return
        message = term_lines(message)
        if self._bar is not None:
            self._bar.console.print(message, markup=False, highlight=False, soft_wrap=True)
        else:
            click.echo(message, err=True)

    def __exit__(self, *exc):
        if self._bar is not None:
            self._bar.__exit__(*exc)
        return False


def log_fn(quiet: bool):
    return (lambda _m: None) if quiet else (lambda m: click.echo(term_lines(m), err=True))


WIDEST = 1_000      # the widest line a table off a terminal may take (a bound, not a goal)


def print_table(con, table) -> None:
    """Print a rich `table` on the console `con` whole: on a terminal at the terminal's width; elsewhere (a CI
    log, a file, a pipe), where rich would assume 80 columns and cut names short, as wide as its content."""
    if con.is_terminal:
        con.print(table)
        return
    from rich.measure import Measurement
    need = Measurement.get(con, con.options.update_width(WIDEST), table).maximum
    width = con.width
    con.width = max(width, min(need, WIDEST))
    try:
        con.print(table)
    finally:
        con.width = width
