"""The `harness` command: the click group, its commands (one module each, under harness/cli/commands/),
and the mapping of errors to exit statuses.

Every user mistake becomes a HarnessError, printed here as one line (plus the
tail of a service log when there is one) with exit status 2; a traceback
means a bug in the harness. Each command's help ends with an example.
"""

import os
import sys

from ..clients.secret_args import hide_own

if __name__ == "__main__":
    hide_own()          # before the heavier imports below: `ps` shows the password only until here

import click  # noqa: E402 - after hide_own on purpose

from .. import __version__  # noqa: E402
from .commands import audit, bench, clean, compare, down, env, experiments, hunt, matrix, report, run, status, suite, up, worksheet  # noqa: E402
from ..core.errors import HarnessError  # noqa: E402


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(__version__, prog_name="harness")
def cli():
    """Crash-test delivery semantics on a real Kafka and a real PostgreSQL.

    A network cannot deliver a message exactly once; a system can apply its
    effect exactly once. `harness run` produces seeded payments, kills
    consumer workers with SIGKILL at named points, and counts lost and
    duplicated effects in Postgres.

    \b
    Example:
      harness run offset-before      # starts Kafka + Postgres, runs, reports
    """


for command in (up.up, status.status, env.env_cmd, down.down, run.run, suite.suite, matrix.matrix, hunt.hunt, clean.clean,
                experiments.experiments_cmd, audit.audit, bench.bench, compare.compare, report.report,
                worksheet.worksheet):
    cli.add_command(command)


def main():  # noqa: C901
    hide_own()          # before anything else: `ps` must not show a password given on the command line
    # Text from PostgreSQL as text, whatever the server's encoding: a SQL_ASCII database hands psycopg
    # bytes unless the client says which encoding it reads (libpq's own variable; the workers inherit it,
    # and a DSN's client_encoding still wins).
    os.environ.setdefault("PGCLIENTENCODING", "UTF8")
    try:
        cli.main(standalone_mode=False)
    except HarnessError as e:   # its message may quote names and log lines: shown without escape codes,
        from ..core.escape import term, term_lines   # on one line (a newline in a quoted path included)
        click.echo(f"error: {term(e)}", err=True)
        if e.detail:
            click.echo("--- last lines of the log ---\n" + term_lines(e.detail.rstrip()), err=True)
        sys.exit(e.exit_status)
    except click.exceptions.Abort:
        click.echo("interrupted", err=True)
        sys.exit(130)
    except click.UsageError as e:
        # One line, as for every other bad input: what is wrong, and where the help is.
        words, c = [], e.ctx
        while c is not None and c.parent is not None:
            words.insert(0, c.info_name)
            c = c.parent
        where = " ".join(["harness", *words])
        click.echo(f"error: {e.format_message()} (see `{where} --help`)", err=True)
        sys.exit(2)
    except click.ClickException as e:
        e.show()
        sys.exit(e.exit_code)
    except click.exceptions.Exit as e:
        sys.exit(e.exit_code)
    except KeyboardInterrupt:
        click.echo("interrupted", err=True)
        sys.exit(130)
    except OSError as e:
        # A folder that filled up or turned read-only where no step could say it better (the report's
        # own writing keeps the report elsewhere and says where): one line, exit 3 as for any run whose
        # numbers cannot be had, never a traceback.
        # A folder the command writes in that was moved or deleted under it (by whoever owns its parent)
        # is the same kind of end: the file's own folder is gone.
        import errno
        from ..core.escape import term
        gone = e.errno in (errno.ENOENT, errno.ENOTDIR) and isinstance(e.filename, str) \
            and not os.path.isdir(os.path.dirname(e.filename))
        if e.errno not in (errno.ENOSPC, errno.EDQUOT, errno.EROFS) and not gone:
            raise
        where = f": {term(str(e.filename))}" if e.filename else ""
        why = " (its folder was moved or deleted while the command ran" if gone else " (the command stopped there"
        click.echo(f"error: {e.strerror}{where}{why}; what it wrote before is kept)", err=True)
        sys.exit(3)


if __name__ == "__main__":
    main()
