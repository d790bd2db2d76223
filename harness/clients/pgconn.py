"""Every PostgreSQL connection the harness itself makes: each wait bounded, and a signal heard.

A process that holds a lock on a run's table (a leftover consumer, another user's
`LOCK TABLE ... ACCESS EXCLUSIVE`) made the audit wait forever: libpq waits as long as the
server does. Every connection made here carries `statement_timeout` and `lock_timeout`
(as connection options, so no statement runs without them), derived from what is left of
the run's time limit (`set_deadline`) with a floor, so a blocked read ends with its reason
(`reason`) and the report says which read it was, never a number it did not read.

A Ctrl-C or SIGTERM while a query waits is heard through `interrupt`: it cancels every
query of the connections open here (from a thread: the main thread is inside libpq's
wait, which wakes every 0.1 s for Python's signal handlers) and refuses new connections,
so each remaining read fails at once with "interrupted" instead of starting a new wait.
The workers' and the consumers' own connections are theirs, not made here.
"""

from __future__ import annotations

import threading
import time
import weakref

import psycopg

# A lock the harness's own statements wait for is held by someone else: past this, the read fails
# and says so, whatever is left of the time limit.
LOCK_WAIT_FLOOR_S = 10.0
# A statement gets at least this long (reading a million-row ledger on a busy machine takes seconds).
STATEMENT_FLOOR_S = 60.0
# Without a run's deadline (`harness audit`, `clean`, `up`): bounds of their own.
LOCK_WAIT_DEFAULT_S = 30.0
STATEMENT_DEFAULT_S = 300.0

_state = {"deadline": None, "interrupted": None}
_open: "weakref.WeakSet" = weakref.WeakSet()


class Interrupted(psycopg.OperationalError):
    """A connection refused because the run was interrupted (a signal): nothing more is read."""


def set_deadline(deadline: float | None) -> None:
    """The time.monotonic() at which the run's time limit ends (None: no run, the defaults apply)."""
    _state["deadline"] = deadline


def timeouts(now: float | None = None) -> tuple[float, float]:
    """(statement timeout, lock timeout) in seconds for a connection made now."""
    deadline = _state["deadline"]
    if deadline is None:
        return STATEMENT_DEFAULT_S, LOCK_WAIT_DEFAULT_S
    left = deadline - (time.monotonic() if now is None else now)
    return max(STATEMENT_FLOOR_S, left), max(LOCK_WAIT_FLOOR_S, left)


def options(from_dsn: str | None = None, own: str | None = None, now: float | None = None) -> str:
    """The libpq `options` value: the DSN's own, then our two bounds, then the calling code's own
    settings (a later -c wins in PostgreSQL: a DSN cannot lift the bounds, the harness's code can
    tighten them)."""
    statement, lock = timeouts(now)
    ours = f"-c statement_timeout={int(statement * 1000)} -c lock_timeout={int(lock * 1000)}"
    return " ".join(o for o in (from_dsn, ours, own) if o)


def connect(dsn: str = "", *, even_interrupted: bool = False, **kwargs):
    """psycopg.connect with the bounds above; refused (Interrupted) once the run was interrupted, unless
    `even_interrupted` (the run's last bookkeeping, after its report)."""
    from psycopg.conninfo import conninfo_to_dict
    if _state["interrupted"] and not even_interrupted:
        raise Interrupted(f"not read: the run was interrupted ({_state['interrupted']})")
    kwargs.setdefault("connect_timeout", 10)
    own = kwargs.pop("options", None)
    conn = psycopg.connect(dsn, options=options(conninfo_to_dict(dsn).get("options"), own), **kwargs)
    _open.add(conn)
    return conn


def interrupt(why: str) -> None:
    """Cancel every query waiting on a connection made here, and refuse new ones. Safe in a signal
    handler: the cancels go from a thread of their own."""
    if _state["interrupted"]:
        return
    _state["interrupted"] = why
    conns = list(_open)
    if conns:
        threading.Thread(target=_cancel, args=(conns,), name="pg-cancel", daemon=True).start()


def _cancel(conns: list) -> None:
    for c in conns:
        try:
            if not c.closed:
                c.cancel_safe(timeout=2.0)
        except Exception:  # noqa: BLE001 - a connection that cannot be cancelled ends with its timeout
            pass


def interrupted() -> str | None:
    """Why the run was interrupted (the signal's name), None when it was not."""
    return _state["interrupted"]


def reset() -> None:
    """A new run: no deadline, not interrupted."""
    _state["deadline"] = None
    _state["interrupted"] = None


def reason(e: BaseException) -> str:
    """The first line of a failed read's error, with what made it fail when it was one of our bounds."""
    first = str(e).splitlines()[0] if str(e) else repr(e)
    name = type(e).__name__
    if name == "LockNotAvailable":
        return (f"{first} (a lock on it held by another session was waited for past lock_timeout; "
                "nothing of it was read)")
    if name == "QueryCanceled":
        if _state["interrupted"] and "user request" in first:
            return f"{first} (the run was interrupted by {_state['interrupted']}; nothing of it was read)"
        if "statement timeout" in first:
            return f"{first} (it ran past statement_timeout; nothing of it was read)"
    return first
