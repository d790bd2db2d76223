"""The one exception type users see: a clear, single-line message, no traceback.

Library code raises HarnessError for every mistake a user can make or fix
(bad input, unreachable broker, missing Java); the CLI turns it into one line
on stderr and exit status 2.
"""


class HarnessError(Exception):
    """A problem the user can understand and act on; its message is one line."""

    def __init__(self, message: str, detail: str | None = None):
        super().__init__(message)
        self.detail = detail  # e.g. the tail of a service log, printed after the line
