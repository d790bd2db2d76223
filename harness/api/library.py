"""The harness from Python: `run` one experiment and get its `Report`; `Stack` starts or reuses a stack.

A team that wants its consumer crash-tested from its own test suite should not
have to build a command line and parse a report folder. This module is the
small, typed surface for that; the pytest plugin (harness/pytest_plugin.py) is
built on it.

The options are the declared run options (harness/run/params.py, the experiments'
and the faults' declarations), by their Python names, checked here before
anything runs: a wrong name or value is a `ValueError` in one line, naming the
valid names or the allowed values. An experiment file (FILE.toml) is accepted
wherever a kind is, with the options given over the file's values, as on the
command line.

The run itself is `harness run` in a process of its own, with the options as
the flags they are declared as: a run installs signal handlers, sets
process-wide Kafka client settings and kills its workers by process group,
none of which belongs in the caller's process. It dies with the caller
(PR_SET_PDEATHSIG), and a Ctrl-C reaches it as an interrupt, so it still
writes its report and leaves nothing behind. The result is read back from the
report.json it wrote (validated against the report's schema).

    >>> from harness.api import Stack, crash_test, run
    >>> with Stack.local() as stack:                  # doctest: +SKIP
    ...     report = crash_test("python consumer.py", stack=stack, expect="exactly-once", kills=5, messages=300)
    ...     print(run("experiments/core/offset-before.toml", stack=stack, messages=200).summary)
    >>> report.ok, report.counts["lost"], report.witnesses["duplicated"]  # doctest: +SKIP
    (True, 0, ())
"""

from __future__ import annotations

import os
import shlex
import signal
import subprocess
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType

from ..core.errors import HarnessError, did_you_mean

# Ids of each anomaly kept on a Report (the report itself keeps more; its folder has every one).
MAX_WITNESSES = 20
# In the one-line repr (what a failed `assert report.ok` shows), fewer: pytest cuts a long repr in the middle.
REPR_WITNESSES = 4
REASON_CHARS = 100
# A run that was interrupted gets this long to audit and write its report before it is killed.
INTERRUPTED_RUN_GRACE_S = 300
# `harness up` may resolve Kafka's jars on first use; `status` and `down` answer in seconds.
UP_TIMEOUT_S = 1800
STATUS_TIMEOUT_S = 120
DOWN_TIMEOUT_S = 900

# Options of the API beside the declared run options: the `--fault` specs.
EXTRA_OPTIONS = ("faults",)
# The report's anomaly id lists, by the name a Report gives them.
WITNESS_KEYS = {"lost": "lost_ids", "duplicated": "duplicate_ids", "unexpected": "unexpected_ids",
                "unprocessed": "unprocessed_ids"}
# The report's count of each (stray ids have their list alone).
COUNT_KEYS = {"lost": "lost", "duplicated": "duplicates", "unprocessed": "unprocessed"}


@dataclass(frozen=True)
class Report:
    """One run's result, read from its report.json: `ok` when the verdict is as-predicted (for `custom`, the
    consumer held its claim). `counts` are the report's (sent, deliveries, effects, duplicates, lost,
    unprocessed, dedupe_hits; None where unknown); `witnesses` the ids of each anomaly, at most MAX_WITNESSES."""
    verdict: str
    experiment: str
    counts: Mapping[str, int | None]
    witnesses: Mapping[str, tuple[str, ...]]
    path: Path
    summary: str
    data: Mapping = field(repr=False, compare=False, default_factory=dict)

    @property
    def ok(self) -> bool:
        """As predicted, and (for a user's consumer) tested: a run in which too few kills landed says
        nothing about the consumer's claim, so it is not ok even when nothing went wrong."""
        return self.verdict == "as-predicted" and self.untested is None

    @property
    def untested(self) -> str | None:
        """Why a user's consumer's run did not test its claim (fewer kills landed than the report calls
        meaningful), else None."""
        from ..experiments.custom.custom_report import FEW_KILLS
        consumer = self.data.get("consumer")
        landed = consumer.get("kills_landed") if isinstance(consumer, Mapping) else None
        if isinstance(landed, int) and not isinstance(landed, bool) and landed < FEW_KILLS:
            return (f"only {landed} kill(s) landed, fewer than {FEW_KILLS}: the claim was not tested "
                    f"(give more messages or kills)")
        return None

    def __bool__(self) -> bool:
        """`assert report` means `assert report.ok` (a Report is never true just for being there)."""
        return self.ok

    @classmethod
    def load(cls, folder: str | os.PathLike) -> "Report":
        """The Report of a run folder (or of its report.json); a file that is not a valid report is a
        HarnessError in one line."""
        from ..reporting.run_report import RunReport
        path = Path(folder)
        d = RunReport.load(path).data
        if not isinstance(d.get("verdict"), str) or not isinstance(d.get("counts"), dict):
            raise HarnessError(f"{path} is not a finished run's report (it has no verdict or counts)")
        anomalies = d.get("anomalies") or {}
        witnesses = {name: tuple(str(i) for i in (anomalies.get(key) or [])[:MAX_WITNESSES])
                     for name, key in WITNESS_KEYS.items()}
        return cls(verdict=d["verdict"], experiment=d["experiment"], counts=MappingProxyType(dict(d["counts"])),
                   witnesses=MappingProxyType(witnesses), path=path.parent if path.is_file() else path,
                   summary=d.get("summary", ""), data=MappingProxyType(d))

    def explain(self, limit: int = MAX_WITNESSES) -> str:
        """The verdict, the count and the first ids of each anomaly (else the reason of a verdict that is not
        as-predicted), and where the report is; its text from the report made safe for a terminal."""
        from ..core.escape import term
        parts = []
        for name, ids in self.witnesses.items():
            total = self.counts.get(COUNT_KEYS[name]) if name in COUNT_KEYS else len(ids)
            if ids or total != 0:             # an unknown count is said, never taken for none
                more = ", ..." if len(ids) > limit or (total or 0) > len(ids) else ""
                shown = f" [{', '.join(term(i) for i in ids[:limit])}{more}]" if ids else ""
                parts.append(f"{_count(total)} {name}{shown}")
        reason = (self.data.get("verdict_detail") or {}).get("reason")
        if self.untested is not None:
            parts.append(self.untested)
        elif not parts and not self.ok and isinstance(reason, str) and reason:
            parts.append(reason[:REASON_CHARS] + ("..." if len(reason) > REASON_CHARS else ""))
        return f"{term(self.experiment)}: {term(self.verdict)}" + (f": {term('; '.join(parts))}" if parts else "") \
            + f"; report: {term(self.path / 'report.html')}"

    def assert_ok(self) -> None:
        """Raise AssertionError naming the anomalies' ids and the report's path unless the run is ok."""
        if not self.ok:
            raise AssertionError(f"{self.explain()}\n{self.summary}")

    def __repr__(self) -> str:
        return f"<Report {self.explain(REPR_WITNESSES)}>"


def _count(n) -> str:
    return "unknown" if n is None else str(n)


def option_names() -> list[str]:
    """Every option `run` takes: the declared run options and `faults`."""
    from ..run.params import declared
    return [*declared(), *EXTRA_OPTIONS]


def _typed(name: str, value, kind: type):
    """`value` as the option's type, or a ValueError naming what it must be."""
    if name == "worker_cmd" and isinstance(value, (list, tuple)) and value and all(isinstance(v, str) for v in value):
        return shlex.join(value)
    fits = isinstance(value, bool) if kind is bool else \
        isinstance(value, (int, float)) and not isinstance(value, bool) if kind is float else \
        isinstance(value, int) and not isinstance(value, bool) if kind is int else isinstance(value, kind)
    if not fits:
        what = {"bool": "True or False", "int": "an int", "float": "a number", "str": "a string"}[kind.__name__]
        if name == "worker_cmd":
            what += " or a list of strings"
        raise ValueError(f"option {name} must be {what}, got {value!r}")
    return float(value) if kind is float else value


def check_options(experiment: str | os.PathLike, options: Mapping) -> list[str]:
    """The `harness run` arguments for this experiment (a kind or a FILE.toml) and these options, checked as
    `harness run` checks them; ValueError (one line) for an unknown name or a bad value."""
    from ..run.experiment_file import is_file_argument, load, run_kwargs
    from ..run.params import RunParams, declared, resolve
    every = declared()
    valid = option_names()
    for name in options:
        if name not in valid:
            raise ValueError(f"unknown option {name!r}; {did_you_mean(name, valid)}the options are: {', '.join(valid)}")
    faults = options.get("faults") or ()
    if isinstance(faults, str):
        faults = (faults,)
    if not all(isinstance(f, str) for f in faults):
        raise ValueError(f"option faults must be a list of --fault specs (strings), got {faults!r}")
    values = {n: _typed(n, v, every[n].option.type) for n, v in options.items() if n in every and v is not None}
    target = os.fspath(experiment)
    try:
        if is_file_argument(target):
            f = load(target)
            given = {n: values.get(n) for n in every}
            kwargs, faults_in_force, _ = run_kwargs(f, given, tuple(faults))
            resolve(RunParams(f.experiment, faults=faults_in_force, **kwargs))
        else:
            resolve(RunParams(target, faults=tuple(faults), **values))
    except HarnessError as e:
        raise ValueError(str(e)) from None
    argv = ["run", target]
    for name, value in values.items():
        flag = every[name].option.flag
        if every[name].option.type is bool:
            argv += [flag] if value else []
        else:
            argv += [flag, str(value)]
    for spec in faults:
        argv += ["--fault", spec]
    return argv


def run(experiment: str | os.PathLike, *, stack: "Stack | None" = None, out: str | os.PathLike | None = None,
        **options) -> Report:
    """Run one experiment (a kind, or an experiment file) and return its Report.

    `stack`: the stack to run on (None: the one of $HARNESS_HOME, started for the run and stopped after it
    unless `harness up` holds it). `out`: the report folder (default reports/<run-id>/, as `harness run`).
    `options`: the declared run options by their Python names (`harness run --help` lists them as flags),
    and `faults`, a list of `--fault` specs. A bad option is a ValueError; a run that could not be made
    (a stack that does not start, a worker command that never consumes) a HarnessError.

        >>> run("experiments/core/offset-before.toml", mesages=10)     # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        ValueError: unknown option 'mesages'; did you mean 'messages'? the options are: messages, ...
    """
    argv = check_options(experiment, options)
    if out is not None:
        argv += ["--out", os.fspath(out)]
    env = {**os.environ, **(stack.env() if stack else {})}
    proc = _harness([*argv, "--quiet"], env, timeout=None)
    if proc.returncode not in (0, 1, 3, 130):
        raise HarnessError(_error_line(proc, f"harness run {experiment}"))
    lines = proc.stdout.strip().splitlines()
    # The folder asked for first: the printed last line escapes control characters, so a name holding one
    # is not the printed text; the printed folder where the report went elsewhere (unwritten-reports/).
    candidates = ([Path(out)] if out is not None else []) + ([Path(lines[-1])] if lines else [])
    folder = next((c for c in candidates if (c / "report.json").is_file()), None)
    if folder is None:
        raise HarnessError(_error_line(proc, f"harness run {experiment}"))
    return Report.load(folder)


def consumer_experiment() -> str:
    """The experiment that runs a user's consumer: the one that declares `worker_cmd`."""
    from ..run.params import declared
    return declared()["worker_cmd"].experiments[0]


def crash_test(worker_cmd: str | Sequence[str], *, stack: "Stack | None" = None,
               out: str | os.PathLike | None = None, **options) -> Report:
    """Crash-test a consumer of your own: `run` of the experiment that runs `worker_cmd` (a command line, or
    its words) under random SIGKILLs, with `expect` (exactly-once by default) the claim it is held to.

        >>> crash_test("python consumer.py", expect="twice")     # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        ValueError: --expect must be one of exactly-once, at-least-once, at-most-once, got 'twice'
    """
    return run(consumer_experiment(), stack=stack, out=out, worker_cmd=worker_cmd, **options)


def _error_line(proc: subprocess.CompletedProcess, what: str) -> str:
    said = [line for line in proc.stderr.splitlines() if line.startswith("error: ")]
    return said[-1][len("error: "):] if said else f"{what} exited {proc.returncode} without a report"


def _harness(argv: list[str], env: dict, timeout: float | None) -> subprocess.CompletedProcess:
    """`python -m harness.cli ARGV`, dying with this process; on Ctrl-C it is interrupted too, given time to
    write its report, then the KeyboardInterrupt goes on."""
    from ..core.procs import die_with_parent
    proc = subprocess.Popen([sys.executable, "-m", "harness.cli", *argv], env=env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, preexec_fn=die_with_parent)
    try:
        out, err = proc.communicate(timeout=timeout)
    except BaseException:
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)
            try:
                proc.wait(INTERRUPTED_RUN_GRACE_S)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        raise
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


# The guard's program (`python -c`): it must name the module that defines guard, not the package's face.
GUARD_CODE = "import sys; from harness.api.library import guard; guard(sys.argv[1])"


def _start_guard(home: Path, env: dict) -> int:
    """A process, in a session of its own, that waits for the end of a pipe only this process holds: when
    this process ends without `down` (SIGKILLed), it stops and purges the stack of the temporary folder `home`
    and deletes the folder. Returns the pipe's end to close after a `down`."""
    read_end, write_end = os.pipe()
    subprocess.Popen([sys.executable, "-c", GUARD_CODE, str(home)], stdin=read_end, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                     env={**os.environ, **env}, start_new_session=True)
    os.close(read_end)
    return write_end


def guard(home: str) -> None:
    """The guard's side of `_start_guard`: wait for the pipe's end, then clean up what is left in `home`."""
    import shutil
    sys.stdin.buffer.read()
    folder = Path(home)
    if not folder.is_dir():
        return                   # `down` stopped the stack and deleted it
    done = subprocess.run([sys.executable, "-m", "harness.cli", "down", "--purge"], capture_output=True,
                          timeout=DOWN_TIMEOUT_S)
    if done.returncode == 0:     # never delete a folder under services still running: it is how to find them
        shutil.rmtree(folder, ignore_errors=True)


class Stack:
    """The local stack (Kafka and PostgreSQL as processes) of one state folder, as `harness up` runs it.

    `up` reuses a stack that answers in the folder and starts one otherwise; `down` stops only what `up`
    started (a temporary folder's stack is purged and the folder deleted). A context manager:

        >>> with Stack.local("/tmp/my-harness-state") as stack:   # doctest: +SKIP
        ...     run("experiments/core/offset-before.toml", stack=stack, messages=200).verdict
        'as-predicted'
    """

    def __init__(self, home: str | os.PathLike, temporary: bool = False):
        self.home = Path(home).absolute()
        self.temporary = temporary
        self.started = False
        self._guard_pipe: int | None = None

    @classmethod
    def local(cls, home: str | os.PathLike | None = None) -> "Stack":
        """The stack of `home` (default $HARNESS_HOME, else .harness/ as the command line)."""
        return cls(home or os.environ.get("HARNESS_HOME") or ".harness")

    @classmethod
    def temporary_folder(cls) -> "Stack":
        """A stack in a new temporary state folder (readable by PostgreSQL's user), deleted by `down`."""
        import tempfile
        home = Path(tempfile.mkdtemp(prefix="harness-state-"))
        home.chmod(0o755)
        return cls(home, temporary=True)

    def env(self) -> dict[str, str]:
        """The environment that points `harness` at this stack (and at no cluster given by address)."""
        return {"HARNESS_HOME": str(self.home), "HARNESS_BOOTSTRAP_SERVERS": "", "HARNESS_POSTGRES_DSN": ""}

    def answers(self) -> bool:
        """Whether a healthy stack runs in this state folder (`harness status`)."""
        if not self.home.is_dir():
            return False
        return _harness(["status", "--json"], {**os.environ, **self.env()}, STATUS_TIMEOUT_S).returncode == 0

    def up(self) -> "Stack":
        """Reuse the stack that answers here, or start one (`harness up`; HarnessError when it cannot)."""
        if self.started or self.answers():
            return self
        if self.temporary and self._guard_pipe is None:     # before the start: a caller killed during it too
            self._guard_pipe = _start_guard(self.home, self.env())
        proc = _harness(["up"], {**os.environ, **self.env()}, UP_TIMEOUT_S)
        self.started = True          # even a failed start may have left something to stop
        if proc.returncode != 0:
            try:
                self.down()
            except HarnessError:
                pass                 # the start's own error is the one to say
            raise HarnessError(_error_line(proc, "harness up"))
        return self

    def down(self) -> None:
        """Stop what `up` started (purged in a temporary folder, which is then deleted); nothing else."""
        if not self.started:
            return
        proc = _harness(["down", *(["--purge"] if self.temporary else [])], {**os.environ, **self.env()},
                        DOWN_TIMEOUT_S)
        self.started = False
        if proc.returncode != 0:
            raise HarnessError(_error_line(proc, "harness down"))
        if self.temporary:
            import shutil
            shutil.rmtree(self.home, ignore_errors=True)
        if self._guard_pipe is not None:
            os.close(self._guard_pipe)        # the guard sees its end, finds nothing left, and exits
            self._guard_pipe = None

    def __enter__(self) -> "Stack":
        return self.up()

    def __exit__(self, *exc) -> None:
        self.down()

    def __repr__(self) -> str:
        return f"Stack.local({str(self.home)!r})"
