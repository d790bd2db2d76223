"""Passwords out of everything printed: DSNs, and error messages that quote parts of them.

The DSNs that most need redacting are the ones no parser accepts (a password
with a space, an `@`, a stray `%`), and libpq's error about such a DSN quotes
the offending part: `unexpected spaces found in "S3cret PW"`. So nothing here
parses a DSN. `secret_spans` finds, by text alone, every stretch that may hold
a password, erring on the side of hiding too much:

- URL form: everything between the first `:` after `scheme://` and the LAST
  `@` (a password may contain `@`, `:`, `/`, `%` and spaces); without any
  `@`, everything after a `:` that is not followed by a port number.
- Anything else with an `@` (a URL with its `//` mistyped or missing, as in
  `user:pass@host` or `postgresql:user:pass@host`): everything between the
  first `:` and the last `@`, user name included.
- key=value form and URL queries: the value of `password=` (and
  `sslpassword=`): a quoted value up to its closing quote (backslash escapes
  honoured; to the end when unterminated), an unquoted one up to the next
  `word=` or the end.

`redact` replaces those stretches by `***`; `scrub` removes them, and each
piece of them, from a message derived from that DSN.
"""

from __future__ import annotations

import re
from urllib.parse import unquote

MASK = "***"
_SCHEME = re.compile(r"\s*[A-Za-z][A-Za-z0-9+.-]*://")
_PASSWORD_KEY = re.compile(r"password\s*=\s*", re.I)
_NEXT_KEY = re.compile(r"(?<!\\)[\s&]+[A-Za-z_][A-Za-z0-9_]*\s*=")
_HOSTS = re.compile(r"(\[[^\]]*\]|[^:,\[\]]*)(:\d*)?(,(\[[^\]]*\]|[^:,\[\]]*)(:\d*)?)*")
_SEPARATORS = re.compile(r"[\s@/?&=#:%'\"\\,;]+")
_SHORT = 4     # pieces shorter than this are masked only as whole words


def secret_spans(dsn: str) -> list[tuple[int, int]]:
    """(start, end) of every stretch of `dsn` that may hold a password, merged and sorted."""
    spans = []
    m = _SCHEME.match(dsn)
    if m:
        start = m.end()
        at = dsn.rfind("@", start)
        if at >= 0:
            colon = dsn.find(":", start, at)
            if colon >= 0:
                spans.append((colon + 1, at))
        else:
            authority = re.match(r"[^/?#]*", dsn[start:]).group(0)
            colon = authority.find(":")
            if colon >= 0 and not _HOSTS.fullmatch(authority):
                spans.append((start + colon + 1, len(dsn)))
    elif "@" in dsn:
        at = dsn.rfind("@")
        colon = dsn.find(":", 0, at)
        if colon >= 0:
            spans.append((colon + 1, at))
    for key in _PASSWORD_KEY.finditer(dsn):
        spans.append((key.end(), _value_end(dsn, key.end())))
    merged: list[list[int]] = []
    for a, b in sorted(s for s in spans if s[1] > s[0]):
        if merged and a <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], b)
        else:
            merged.append([a, b])
    return [(a, b) for a, b in merged]


def _value_end(dsn: str, i: int) -> int:
    """Where a key=value value starting at `i` ends (libpq's rules, generously)."""
    if i < len(dsn) and dsn[i] == "'":
        j = i + 1
        while j < len(dsn):
            if dsn[j] == "\\":
                j += 2
            elif dsn[j] == "'":
                return j + 1
            else:
                j += 1
        return len(dsn)            # unterminated: all of the rest may be the password
    nxt = _NEXT_KEY.search(dsn, i)
    return nxt.start() if nxt else len(dsn)


def redact(dsn: str | None) -> str | None:
    """`dsn` with every stretch that may hold a password replaced by `***`; works on any text."""
    if not dsn:
        return dsn
    out, pos = [], 0
    for a, b in secret_spans(dsn):
        out += [dsn[pos:a], MASK]
        pos = b
    return "".join(out) + dsn[pos:]


def secrets_of(dsn: str | None) -> list[str]:
    """The stretches of `dsn` that `redact` hides."""
    return [dsn[a:b] for a, b in secret_spans(dsn)] if dsn else []


def scrub(message: str, dsn: str | None) -> str:
    """`message` (say, libpq's error about `dsn`) without any password text of `dsn`.

    Hides each secret stretch as written, percent-decoded, unquoted and unescaped, then every
    piece of it between separators (libpq quotes pieces: `missing "=" after "PW"`); pieces shorter
    than four characters only where they stand as a whole word.
    """
    if not message:
        return message
    whole, pieces = set(), set()
    for s in secrets_of(dsn):
        for v in (s, s.strip("'"), unquote(s), re.sub(r"\\(.)", r"\1", s.strip("'"))):
            if v:
                whole.add(v)
                pieces.update(p for p in _SEPARATORS.split(v) if p)
    for v in sorted(whole, key=len, reverse=True):
        message = message.replace(v, MASK)
    for p in sorted(pieces - whole, key=len, reverse=True):
        if len(p) >= _SHORT:
            message = message.replace(p, MASK)
        else:
            message = re.sub(rf"(?<![A-Za-z0-9]){re.escape(p)}(?![A-Za-z0-9])", MASK, message)
    return message
