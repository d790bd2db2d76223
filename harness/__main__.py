"""`python -m harness`: the same as the `harness` console script."""

from .clients.secret_args import hide_own

hide_own()          # before the heavier imports: `ps` shows a password given on the command line only until here

from .cli.entry import main  # noqa: E402

main()
