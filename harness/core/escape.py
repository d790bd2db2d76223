"""Escaping for every rendering of what the harness did not write itself.

A report.json, a suite.json, a folder name or a ledger id may come from
someone else (a copied artifact, an edited file). Whatever they hold, the
renderings must show it as text and never let it act: no HTML element or
attribute, no `javascript:` link, no Markdown heading, table cell or link (a
bare URL included), no terminal escape sequence. Every renderer (report,
suite, compare, audit, the progress log) goes through these few functions, so
there is one place to get it right:

- `html(v)`: text or a quoted attribute value in HTML.
- `href(link, inside)`: a link target, or None: only http(s) URLs and
  relative paths that stay inside the folder `inside`.
- `md(v)`: inline Markdown text (a heading, a list item, a table cell);
  `md_code(v)`: an inline code span; `fence(lines)`: a fenced code block.
- `term(v)`: one line on a terminal; `term_lines(text)`: several.

Control and invisible characters (newlines, ESC, bidi overrides) are shown as
Python-style escapes (`\\n`, `\\x1b`, `\\u202e`), so what a person sees is what
the file holds.
"""

import html as _html
import re
from pathlib import Path, PurePosixPath
from urllib.parse import urlsplit

# What can start Markdown structure inside a line: a backslash, a code span, emphasis, a link or image
# (`[`, `]`), a table cell (`|`); `<` before what could open an HTML tag or an autolink; `&` before what
# could spell an entity. CommonMark lets any ASCII punctuation be backslash-escaped. Left alone, so
# report.md stays readable: `_` (GitHub ignores it inside words, where ids have it), `<=`, `->`.
_MD_SPECIAL = re.compile(r"([\\`*\[\]|]|<(?=[A-Za-z/!?])|&(?=[A-Za-z#]))")
# GitHub also links bare URLs with no syntax at all (its "autolink" extension): `scheme://...`, `www.`,
# `mailto:` and `xmpp:`. Escaping the `:` or the `.` that makes them a URL breaks the link, not the text.
_MD_AUTOLINK = re.compile(r"(?i):(?=//)|(?<=\bmailto):|(?<=\bxmpp):|(?<=\bwww)\.")


def shown(value) -> str:
    """`value` as text with every non-printable character (controls, line and paragraph separators,
    format characters such as bidi overrides) shown as an escape."""
    s = str(value)
    if s.isprintable():
        return s
    return "".join(c if c.isprintable() else _escape_char(c) for c in s)


def _escape_char(c: str) -> str:
    named = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}
    if c in named:
        return named[c]
    n = ord(c)
    return f"\\x{n:02x}" if n < 0x100 else (f"\\u{n:04x}" if n < 0x10000 else f"\\U{n:08x}")


# -- HTML ----------------------------------------------------------------------------------

def html(value) -> str:
    """Text for an HTML element or a quoted attribute (both quote characters are escaped too)."""
    return _html.escape(shown(value), quote=True)


def href(link, inside: Path | None = None) -> str | None:
    """`link` if it is safe to put in an href, else None.

    Safe: an `http`/`https` URL with a host, or a relative path with no `..`, no `%`, no backslash and no
    control character that, when `inside` is given, resolves (symlinks followed) to a place within
    the folder `inside`. Anything else (`javascript:`, `data:`, `//host`, `/etc/passwd`) is refused.
    """
    if not isinstance(link, str) or not link or not link.isprintable() or link != link.strip():
        return None
    parts = urlsplit(link)
    if parts.scheme or parts.netloc:
        return link if parts.scheme in ("http", "https") and parts.netloc else None
    # `%` too: a browser decodes `%2e%2e` to `..` (WHATWG URL), and the harness's own links never need it.
    if link.startswith("/") or "\\" in link or "%" in link or ".." in PurePosixPath(parts.path).parts:
        return None
    if inside is not None and not within(inside, parts.path):
        return None
    return link


def within(folder: Path, relative: str) -> bool:
    """Whether `folder / relative` (links resolved) stays inside `folder`."""
    if not isinstance(relative, str) or not relative or "\x00" in relative:
        return False
    base = Path(folder).resolve()
    try:
        (base / relative).resolve().relative_to(base)
    except (ValueError, OSError, RuntimeError):
        return False
    return True


# -- Markdown ------------------------------------------------------------------------------

def md(value) -> str:
    """Inline Markdown text: one line, with every character that could start HTML, a link, a code
    span, emphasis or a table cell backslash-escaped, and bare URLs (`https://`, `www.`) broken."""
    text = _MD_SPECIAL.sub(lambda m: "\\" + m.group(0), shown(value))
    return _MD_AUTOLINK.sub(lambda m: "\\" + m.group(0), text)


def md_code(value) -> str:
    """An inline code span of `value`, on one line, its fence longer than any run of backticks inside
    it, pipes escaped (GitHub splits table cells even inside code spans)."""
    s = shown(value).replace("|", "\\|")
    ticks = "`" * (1 + max([0] + [len(m) for m in re.findall(r"`+", s)]))
    pad = " " if s.startswith("`") or s.endswith("`") else ""
    return f"{ticks}{pad}{s}{pad}{ticks}"


def fence(lines: list[str], info: str = "") -> list[str]:
    """A fenced code block of `lines`, each shown on one line; its fence is longer than any run of
    backticks inside, so no line can close it early."""
    body = [shown(line) for line in lines]
    ticks = "`" * max(3, 1 + max([0] + [len(m) for line in body for m in re.findall(r"`+", line)]))
    return [ticks + info, *body, ticks]


# -- terminal ------------------------------------------------------------------------------

def term(value) -> str:
    """One line for a terminal: no escape sequence, no control character, no line break."""
    return shown(value)


def term_lines(text) -> str:
    """Lines for a terminal: the line breaks and tabs kept, every other control character shown."""
    return "\n".join("\t".join(shown(part) for part in line.split("\t")) for line in str(text).split("\n"))
