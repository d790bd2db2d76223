"""The one exception type users see: a clear, single-line message, no traceback.

Library code raises HarnessError for every mistake a user can make or fix
(bad input, unreachable broker, missing Java); the CLI turns it into one line
on stderr and exit status 2 (a subclass may carry another `exit_status`).
"""


class HarnessError(Exception):
    """A problem the user can understand and act on; its message is one line."""

    def __init__(self, message: str, detail: str | None = None):
        super().__init__(message)
        self.detail = detail  # e.g. the tail of a service log, printed after the line

    exit_status = 2


class ReportNotWritten(HarnessError):
    """A report that could not be written (a full disk, a folder gone read-only): exit 3, as for a run whose
    numbers are unknown (1 would read as `unexpected`). The message says what was kept, and where."""

    exit_status = 3
    kept = None        # the folder the report was written to instead, if any


def first_line(e: BaseException, limit: int = 200) -> str:
    """The first line of an exception's message, for a one-line note; its type's name when it has none
    (a `TimeoutError` from a future's `result(timeout)` says nothing: indexing its lines failed)."""
    text = str(e).strip()
    return text.splitlines()[0][:limit] if text else type(e).__name__


def did_you_mean(name: str, valid) -> str:
    """"did you mean 'x'? " for the valid name nearest a mistyped one (difflib), else ""."""
    import difflib
    close = difflib.get_close_matches(str(name), [str(v) for v in valid], n=1)
    return f"did you mean {close[0]!r}? " if close else ""
