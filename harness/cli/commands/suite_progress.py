"""A suite's live progress: one row per experiment (waiting, running with its crashes so far, its verdict),
and an interrupt acknowledged at once.

`harness suite` runs each experiment as a quiet `harness run` of its own, so
nothing of theirs reaches the terminal. This reads what the suite runner logs
("suite: starting X", "suite: X finished: VERDICT (N s)") and, for a running
experiment, the crash log its run folder grows (one line per crash). On a
terminal the rows are a live table; elsewhere a plain line says every 15 s
what is running. Ctrl-C (or SIGTERM) prints "stopping: ..." within a second,
with what is still running and what will not start, before the runs are
stopped and the suite's report is written.
"""

import re
import signal
import sys
import time
from pathlib import Path

import click

from ...core.escape import term, term_lines

STARTING = re.compile(r"^suite: starting (\S+)")
FINISHED = re.compile(r"^suite: (\S+) finished: (\S+) \((\d+) s\)")
PLAIN_EVERY_S = 15


class SuiteProgress:
    def __init__(self, names: list[str], folder: Path, quiet: bool = False, tty: bool | None = None):
        self.folder, self.quiet = Path(folder), quiet
        self.rows = {n: {"state": "waiting", "since": None, "verdict": None, "seconds": None} for n in names}
        self.tty = sys.stderr.isatty() if tty is None else tty
        self._live = None
        self._last_plain = time.monotonic()
        self.stopping_said = None

    # -- what the suite runner says -----------------------------------------------------------
    def log(self, message: str) -> None:
        m = STARTING.match(message)
        if m and m.group(1) in self.rows:
            self.rows[m.group(1)].update(state="running", since=time.monotonic())
        m = FINISHED.match(message)
        if m and m.group(1) in self.rows:
            self.rows[m.group(1)].update(state="done", verdict=m.group(2), seconds=int(m.group(3)))
        if self.quiet:
            return
        if self._live is not None:
            self._live.console.print(term_lines(message), markup=False, highlight=False, soft_wrap=True)
            return
        click.echo(term_lines(message), err=True)
        if time.monotonic() - self._last_plain >= PLAIN_EVERY_S and self.running():
            self.plain_line()

    def crashes(self, name: str) -> int | None:
        """Crashes so far of a running experiment: the lines of its run's crash log (None before it has one)."""
        try:
            with open(self.folder / name / "crash-log.jsonl", "rb") as f:
                return sum(1 for _ in f)
        except OSError:
            return None

    def running(self) -> list[str]:
        return [n for n, r in self.rows.items() if r["state"] == "running"]

    def waiting(self) -> list[str]:
        return [n for n, r in self.rows.items() if r["state"] == "waiting"]

    def row_cells(self, name: str) -> tuple[str, str, str]:
        """(experiment, state, detail) of one row, as the table and the plain lines show it."""
        r = self.rows[name]
        if r["state"] == "running":
            n = self.crashes(name)
            return name, "stopping" if self.stopping_said else "running", \
                f"{time.monotonic() - r['since']:.0f} s, {'no' if not n else n} crash{'es' if n != 1 else ''} so far"
        if r["state"] == "done":
            return name, r["verdict"], f"{r['seconds']} s"
        return name, "not started" if self.stopping_said else "waiting", ""

    def plain_line(self) -> None:
        self._last_plain = time.monotonic()
        now = "; ".join(f"{n} {d}" for n, _s, d in (self.row_cells(x) for x in self.running()))
        click.echo(term(f"suite: running {now}; {len(self.waiting())} waiting, "
                        f"{sum(r['state'] == 'done' for r in self.rows.values())} done"), err=True)

    # -- the live table ---------------------------------------------------------------------
    def __rich__(self):
        from rich.table import Table
        from rich.text import Text
        t = Table(title=Text("suite progress"), title_justify="left")
        for col in ("experiment", "state", "time, crashes"):
            t.add_column(col, no_wrap=True)
        for name in self.rows:
            t.add_row(*[Text(term(c)) for c in self.row_cells(name)])
        return t

    def __enter__(self):
        if not self.quiet and self.tty:
            from rich.console import Console
            from rich.live import Live
            self._live = Live(self, console=Console(stderr=True), refresh_per_second=2, transient=True)
            self._live.__enter__()
        return self

    def __exit__(self, *exc):
        if self._live is not None:
            self._live.__exit__(*exc)
            self._live = None
        return False

    # -- an interrupt -----------------------------------------------------------------------
    def stopping(self) -> str:
        """Say at once what an interrupt does now: the runs being stopped, those that will not start."""
        run, wait = self.running(), self.waiting()
        text = (f"stopping: {len(run)} running experiment(s) ({', '.join(run) or 'none'}) stop their workers "
                f"and write interrupted reports, then the suite's report is written"
                + (f"; not started: {', '.join(wait)}" if wait else ""))
        self.stopping_said = text
        if self._live is not None:
            self._live.console.print(term(text), markup=False, highlight=False)
        else:
            click.echo(term(text), err=True)
        return text

    def install(self) -> None:
        """Ctrl-C, SIGTERM and SIGHUP: say `stopping` at once, then interrupt as before (the first one only;
        later ones are ignored until the reports are written, as harness.workers.supervisor does)."""
        def handler(signum, frame):
            if self.stopping_said:
                return
            self.stopping()
            raise KeyboardInterrupt
        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            try:
                signal.signal(sig, handler)
            except ValueError:       # not the main thread (a library caller): leave its handlers alone
                return
