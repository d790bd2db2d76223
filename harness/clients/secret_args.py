"""Secrets out of command lines: what report.json, a lease and `ps` show of the harness's argv.

A user may give a DSN with its password (`--postgres-dsn`) or a Kafka
credential (`--kafka-config sasl.password=...`) on the command line. The
harness's own children never get them that way (workers, runs of a suite and
the Streams JVM take them from their environment), but the harness's own
argv holds them as typed, and it is recorded in every report
(`environment.command_line`) and readable by every user in
/proc/PID/cmdline for as long as the command runs.

`masked(argv)` is that argv with every such value replaced by `***`: the
value of `--postgres-dsn` redacted as any DSN is (see stack.redaction), the
value of a `--kafka-config KEY=VALUE` whose key names a secret (see
kafka_client.is_secret), and, wherever else it appears, any `KEY=VALUE`
argument with such a key or any argument that looks like a DSN. `hide_own()`
puts the masked argv in place of the process's own command line
(setproctitle) as the harness starts, so `ps` shows the password only during
the interpreter's start-up; the environment (`HARNESS_POSTGRES_DSN`,
`--kafka-config-file`) never shows it at all.
"""

from __future__ import annotations

import re

from .kafka_client import MASK, is_secret
from ..core.redaction import redact

_DSN_OPTIONS = ("--postgres-dsn",)
_SETTING_OPTIONS = ("--kafka-config",)
_PROPERTY = re.compile(r"\s*[A-Za-z0-9_.\-]+\s*")


def masked_setting(pair: str) -> str:
    """`KEY=VALUE` with its value masked when the key names a secret; anything else as it is."""
    key, sep, _value = pair.partition("=")
    if sep and is_secret(key):
        return f"{key}={MASK}"
    if not sep and is_secret(pair):
        return MASK                  # not a pair at all, but it mentions a secret: it may be one
    return pair


def _masked_free(arg: str) -> str:
    """An argument that is no option's known value: a DSN loses its password, a secret setting its value."""
    key, sep, _ = arg.partition("=")
    if sep and _PROPERTY.fullmatch(key) and is_secret(key):
        return f"{key}={MASK}"
    if "://" in arg or "password" in arg.lower() or "@" in arg:
        return redact(arg)
    return arg


def masked(argv: list[str]) -> list[str]:
    """`argv` (the arguments after the program) with every secret value replaced by `***`."""
    out, takes = [], None
    for arg in argv:
        if takes in _DSN_OPTIONS:
            out.append(redact(arg) if arg else arg)
        elif takes in _SETTING_OPTIONS:
            out.append(masked_setting(arg))
        else:
            opt, sep, value = arg.partition("=")
            if sep and opt in _DSN_OPTIONS:
                out.append(f"{opt}={redact(value)}")
            elif sep and opt in _SETTING_OPTIONS:
                out.append(f"{opt}={masked_setting(value)}")
            else:
                out.append(_masked_free(arg))
        takes = arg if arg in _DSN_OPTIONS + _SETTING_OPTIONS and takes is None else None
    return out


def command_line(argv: list[str]) -> str:
    """`harness ARGS` as a report records it, secrets masked."""
    return " ".join(["harness", *masked(argv)])


def _own_cmdline() -> list[str] | None:
    try:
        with open("/proc/self/cmdline", "rb") as f:
            raw = f.read()
    except OSError:
        return None
    return [a.decode(errors="surrogateescape") for a in raw.split(b"\0")[:-1]]


def hide_own() -> None:
    """Replace this process's command line (what `ps` and /proc/PID/cmdline show) by its masked form.

    Does nothing when there is nothing to hide, so a command line without secrets stays exactly
    as the user typed it (argument boundaries included).
    """
    import sys
    args = sys.argv[1:]
    shown = masked(args)
    if shown == args:
        return
    whole = _own_cmdline()
    if whole is None or len(whole) < len(args) or whole[len(whole) - len(args):] != args:
        whole = [sys.argv[0], *args]                      # not what we expected: show the program as Python saw it
    title = " ".join([*whole[:len(whole) - len(args)], *shown])
    try:
        import setproctitle
        setproctitle.setproctitle(title)
    except ImportError:          # a dependency of the harness; without it there is nothing to hide with
        pass
