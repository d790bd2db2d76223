"""Table names as SQL: always quoted identifiers, never text pasted into a statement.

A table name can come from somewhere the harness does not control (a listing
of information_schema, a command line), and a name such as
`ledger_q; drop table public.victim; --` is a legal Postgres identifier.
Formatting it into SQL unquoted runs whatever it says. Every statement that
names a run's table builds it with psycopg's `sql.Identifier`, through
`table_identifier`.
"""

from psycopg import sql

from ..core.errors import HarnessError


def table_identifier(qualified: str) -> sql.Identifier:
    """`harness.ledger_r2026...` -> sql.Identifier("harness", "ledger_r2026..."), quoted wherever it is used.

    The schema is the part before the first dot; the table name is the rest, whatever it holds.
    """
    schema, dot, table = qualified.partition(".")
    if not dot or not schema or not table:
        raise HarnessError(f"table name {qualified!r} is not of the form SCHEMA.TABLE")
    return sql.Identifier(schema, table)
