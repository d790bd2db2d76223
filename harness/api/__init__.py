"""The harness from Python: `run` one experiment and get its `Report`; `Stack` starts or reuses a stack.

The layer for Python callers, beside the command line (which it does not import): library.py holds the
code; this face hands its names on, so `from harness.api import run, Stack` is the documented import.
"""

from .library import Report, Stack, check_options, consumer_experiment, crash_test, option_names, run

__all__ = ["Report", "Stack", "check_options", "consumer_experiment", "crash_test", "option_names", "run"]
