"""A run option as data: declared once, by whoever owns it, and read by everyone else from there.

Every option of `harness run` is one `Option`: its name, type, default, range
and help. The run's own options are declared in harness/run/params.py, an
experiment's in its declaration module (`Experiment.options`), a fault's on its
class (`Fault.run_options`). From those declarations come the click options of
`run` and `suite` with their `[default: ...]` texts, the check of each value
(one clear line), the refusal of an option the experiment or its faults do not
take (naming who does), the worker processes' `--option name=value` arguments
and the report's parameters. Nothing else writes an option's flag or default.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Callable

from .errors import HarnessError


@dataclass(frozen=True)
class Option:
    name: str                        # the Python name; the flag is --name-with-dashes
    type: type                       # int, float, str or bool (a flag that takes no value)
    help: str
    default: object = None           # the value when not given; None: not given (`shown` says what holds then)
    shown: str | None = None         # the [default: ...] text when the default alone would not say it
    choices: tuple = ()              # the allowed values (as strings), when a fixed set
    low: float | None = None         # the smallest allowed value
    high: float | None = None        # the largest allowed value
    open_low: bool = False           # the value must be above `low`, not equal to it
    why_high: str = ""               # why the largest is what it is, in a few words
    must: str = ""                   # what a value must be, in words, instead of the text built from the bounds
    metavar: str | None = None
    worker: bool = False             # the worker processes need it: they get --option name=value
    applies_to: str = ""             # who takes it, in words, when the owners' names would not say it
    derive: Callable | None = None   # derive(values) -> its value when not given, from the run's other values

    @property
    def flag(self) -> str:
        return "--" + self.name.replace("_", "-")

    def default_text(self) -> str | None:
        """What `--help` shows as the default; None for a flag."""
        if self.type is bool:
            return None
        if self.shown is not None:
            return self.shown
        return None if self.default is None else _shown(self.default)

    def check(self, value) -> None:
        """One clear line when `value` is not allowed; None (not given) always is."""
        if value is None or self.type is bool:
            return
        if self.choices:
            if str(value) not in self.choices:
                raise HarnessError(f"{self.flag} must be one of {', '.join(self.choices)}, got {value!r}")
            return
        if self.type is str:
            if not str(value).strip():
                raise HarnessError(f"{self.flag} is empty" + (f"; give {self.must}" if self.must else ""))
            return
        bad_number = isinstance(value, float) and not math.isfinite(value)
        below = self.low is not None and (value <= self.low if self.open_low else value < self.low)
        if bad_number or below:
            raise HarnessError(f"{self.flag} must be {self.must or self._bounds()}, got {value}")
        if self.high is not None and value > self.high:
            if self.why_high or not (self.must or (self.type is float and self.low is not None)):
                why = f" ({self.why_high})" if self.why_high else ""
                raise HarnessError(f"{self.flag} must be at most {self.high:,}{why}, got {value:,}")
            raise HarnessError(f"{self.flag} must be {self.must or self._bounds()}, got {value}")

    def _bounds(self) -> str:
        if self.low is not None and self.high is not None and self.type is float:
            return f"between {self.low:g} and {self.high:g}"
        if self.low == 0:
            return "0 or more"
        if self.low is not None:
            return f"at least {self.low:g}"
        return "a finite number"

    def click_option(self, default_override: dict | None = None):
        """The click decorator of this option: its flag, type, help and shown default."""
        import click
        shown = self.default_text()
        if default_override:
            shown = "; ".join(([shown] if shown else []) + [f"{who} {_shown(value)}"
                                                         for who, value in default_override.items()])
        if self.type is bool:
            return click.option(self.flag, self.name, is_flag=True, help=self.help)
        kind = click.Choice(list(self.choices)) if self.choices else self.type
        help_text = self.help + (f"  [default: {shown}]" if shown else "")
        return click.option(self.flag, self.name, type=kind, default=None, metavar=self.metavar, help=help_text)


def _shown(value) -> str:
    """A default as `--help` writes it: 600.0 as 600, 0.2 as 0.2."""
    return f"{value:g}" if isinstance(value, float) else str(value)


def click_options(options, own_defaults: dict | None = None):
    """A decorator giving a click command these options, in this order; `own_defaults` maps an option's
    name to {who: default} for those who declare a default of their own (named in its help)."""
    def decorate(f):
        for opt in reversed(list(options)):
            f = opt.click_option((own_defaults or {}).get(opt.name))(f)
        return f
    return decorate


def worker_options(pairs: list[str]) -> dict:
    """The worker's `--option name=JSON` arguments (written by runtime/worker_args.py) -> {name: value}."""
    out = {}
    for pair in pairs:
        name, _, value = pair.partition("=")
        out[name] = json.loads(value)
    return out
