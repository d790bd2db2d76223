"""Ctrl-C, SIGTERM and SIGHUP while the local stack starts: stop what was started, or finish and hold.

Python's default for SIGTERM and SIGHUP is to die at once, without any
`finally`: a `harness up` killed that way left Kafka and PostgreSQL running
with no hold (and no pid record for a service whose start it was in), so the
next command could neither reuse nor stop them cleanly. Within `handled()`
each of the three signals raises KeyboardInterrupt, so the start's own
clean-up stops what it started, but never half-way through a `step()` (a
service's start with its pid record, the hold): a signal there is kept and
raised when the step ends. A `final` step (the hold, written last) keeps it:
the command has finished by then and keeps what it holds. Signals after the
first are ignored while the clean-up runs.
"""

import signal
import threading
from contextlib import contextmanager

SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)

_state = {"active": False, "depth": 0, "pending": False, "raised": False}


def _handler(signum, frame):
    if _state["raised"]:
        return                                  # the clean-up of the first one is under way
    if _state["depth"] > 0:
        _state["pending"] = True
        return
    _state["raised"] = True
    raise KeyboardInterrupt


@contextmanager
def handled():
    """Within: the three signals interrupt (see the module's docstring); the old handlers come back after."""
    if _state["active"] or threading.current_thread() is not threading.main_thread():
        yield
        return
    old = {s: signal.getsignal(s) for s in SIGNALS}
    _state.update(active=True, depth=0, pending=False, raised=False)
    for s in SIGNALS:
        signal.signal(s, _handler)
    try:
        yield
    finally:
        for s, h in old.items():
            signal.signal(s, h)
        _state.update(active=False, depth=0, pending=False, raised=False)


@contextmanager
def step(final: bool = False):
    """A part that a signal must not cut in two; a signal meanwhile is raised at its end (unless `final`)."""
    _state["depth"] += 1
    try:
        yield
    finally:
        _state["depth"] -= 1
    if _state["depth"] == 0 and _state["pending"] and _state["active"]:
        _state["pending"] = False
        if not final:
            _state["raised"] = True
            raise KeyboardInterrupt
