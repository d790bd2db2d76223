"""The command line: the `harness` click group, its commands, the terminal output, the generated docs pages.

The top layer. entry.py is the click group and the mapping of errors to exit statuses; commands/ one
module per command; ui.py the progress bar; docs_pages.py the documentation pages written from the
declarations and this click app. `harness.cli:main` is the console script's name (pyproject.toml and
every environment that installed it), so this face hands `main` on.
"""



def main():
    """The console script: imported here only when called, so `harness.cli` costs nothing to import."""
    from .entry import main as entry_main
    return entry_main()
