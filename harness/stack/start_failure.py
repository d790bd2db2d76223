"""Why a Kafka node died during start-up, in one line: the cause its log names, not its stack trace.

Kafka ends a failed start with an ERROR line and a Java stack trace, so the last lines of its log (what
a failed `harness up` shows under the error) are the trace's tail, which names no cause. This finds the
exception the ERROR line led to (its innermost `Caused by:`), for the error line itself. The usual cause
is a file that is not Kafka's in its data folder (a report written there): Kafka refuses any folder not
named like a topic partition, and the line then says to move it out.
"""

import re

from ..core import safefile

_ERROR = re.compile(r"\b(?:ERROR|FATAL)\b")
_EXCEPTION = re.compile(r"^(?:Caused by: )?(?:[\w$]+\.)*([\w$]+(?:Exception|Error)): (.+)$")
_FOREIGN = re.compile(r"Found directory (.+), '.*' is not in the form of topic-partition")
LIMIT = 400


def cause(log_text: str) -> str | None:
    """The cause a Kafka log gives for its last fatal error, as `SomeException: message`, or None."""
    lines = [line.strip() for line in log_text.splitlines()]
    errors = [i for i, line in enumerate(lines) if _ERROR.search(line) and not _EXCEPTION.match(line)]
    start = errors[-1] + 1 if errors else 0
    found = [(line.startswith("Caused by: "), m) for line in lines[start:] if (m := _EXCEPTION.match(line))]
    if not found:
        return None
    caused = [m for inner, m in found if inner]
    m = caused[-1] if caused else found[0][1]
    text = f"{m.group(1)}: {m.group(2)}"
    foreign = _FOREIGN.search(text)
    if foreign:
        text = (f"{foreign.group(1)} is not Kafka's, and Kafka refuses a foreign folder in its data folder: "
                f"move it out of the state folder ({m.group(1)})")
    return text[:LIMIT]


def kafka_cause(node) -> str | None:
    """`cause` for a local Kafka node (harness.stack.local_kafka.LocalKafka), from its logs."""
    for log in (node.logs / "server.log", node.home / "stdout.log"):
        found = cause(safefile.read_tail(log))
        if found:
            return found
    return None
