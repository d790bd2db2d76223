"""A worker's command line, written once: `encode` in the supervisor's launcher, `decode` in the worker.

The values a worker process needs (its slot, the run's names and files, the run options its experiment
declared for it) cross a process boundary as argv. Written out by hand on both sides, a new value had
to be added twice and a default could differ between them (the worker once parsed --commit-every with
a default of its own beside the run option's). Here each argument is one `Arg`: its name, how it is
written and read, whether the worker cannot start without it, and the worker's default when the
launcher leaves it out. The launcher hands `encode` a dict of values; the worker gets them back from
`decode` under the same names. Secrets never travel here: argv is what `ps` shows, so the DSN goes
in the environment.
"""

from __future__ import annotations

import argparse
import json
from dataclasses import dataclass
from typing import Callable


def _ints(text: str) -> list[int]:
    return [int(x) for x in text.split(",") if x]


def _words(text: str) -> list[str]:
    return [x for x in text.split(",") if x]


@dataclass(frozen=True)
class Arg:
    name: str                          # the Python name; the flag is --name-with-dashes
    read: Callable = str               # text -> value in the worker
    required: bool = False
    default: object = None             # the worker's value when the launcher gives none (no run option has one)
    help: str | None = None

    @property
    def flag(self) -> str:
        return "--" + self.name.replace("_", "-")

    def write(self, value) -> list[str]:
        """The argv words of `value`; none for None, False or an empty list."""
        if value is None or value is False or value == [] or value == {}:
            return []
        if self.name == "option":          # the run options the experiment declared for its workers
            return [w for name, v in value.items() if v is not None
                    for w in (self.flag, f"{name}={json.dumps(v)}")]
        if value is True:
            return [self.flag]
        if isinstance(value, (list, tuple)):
            return [self.flag, ",".join(map(str, value))]
        return [self.flag, str(value)]


ARGS = (
    Arg("experiment", required=True),
    Arg("variant", default=""),
    Arg("role"),
    Arg("after", _words, default=[], help="the worker slots whose `done` this role waits for"),
    Arg("worker", required=True),
    Arg("attempt", int, default=1),
    Arg("bootstrap", required=True),
    Arg("group", required=True),
    Arg("input_topic", required=True),
    Arg("partitions", _ints, required=True),
    Arg("commit_every", int, required=True, help="the run option commit_every (run/params.py)"),
    Arg("crash_log", required=True),
    Arg("events", required=True),
    Arg("crash_plan"),
    Arg("history", help="the folder of the run's histories (runtime/history.py)"),
    Arg("isolation", default="read_committed"),
    Arg("ledger"),
    Arg("dedupe"),
    Arg("rejects"),
    Arg("rows"),
    Arg("outbox"),
    Arg("accounts"),
    Arg("events_topic"),
    Arg("output_topic"),
    Arg("transactional_id"),
    Arg("delivery_log", help="the producer under test: append each delivery report here"),
    Arg("option", help="a run option the experiment declared for its workers: NAME=JSON (core/options.py)"),
)
BY_NAME = {a.name: a for a in ARGS}


def encode(values: dict) -> list[str]:
    """The worker's argv for these values (names as in ARGS; None leaves an argument out)."""
    unknown = set(values) - set(BY_NAME)
    if unknown:
        raise ValueError(f"not a worker argument: {', '.join(sorted(unknown))}")
    missing = [a.name for a in ARGS if a.required and values.get(a.name) is None]
    if missing:
        raise ValueError(f"a worker needs {', '.join(missing)}")
    return [w for a in ARGS if a.name in values for w in a.write(values[a.name])]


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="harness-worker")
    for a in ARGS:
        if a.name == "option":
            ap.add_argument(a.flag, action="append", default=[], metavar="NAME=JSON", help=a.help)
        else:
            ap.add_argument(a.flag, type=a.read, required=a.required, default=a.default, help=a.help)
    return ap


def decode(argv: list[str]) -> argparse.Namespace:
    """The values `encode` wrote, under the same names (`option` as its NAME=JSON words: core/options.py's
    worker_options reads them)."""
    return parser().parse_args(argv)
