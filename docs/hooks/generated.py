"""MkDocs hook: fills the pages' generated parts from the code (harness/cli/docs_pages.py) at build time.

A page holds its prose and a marker line, `<!-- generated: experiments -->`; the build replaces the
marker with what the declarations say today (the experiment registry, the faults, the run options, the
click app). The generated text is never committed, so it cannot go stale, and an unknown marker fails
the build.
"""

import re

from harness.cli import docs_pages

MARKER = re.compile(r"^<!-- generated: ([a-z-]+) -->$", re.M)


def on_page_markdown(markdown, page, config, files):
    def fill(match):
        writer = docs_pages.PAGES.get(match.group(1))
        if writer is None:
            raise ValueError(f"{page.file.src_uri}: unknown generated part {match.group(1)!r}; "
                             f"known: {', '.join(docs_pages.PAGES)}")
        return writer()
    return MARKER.sub(fill, markdown)
