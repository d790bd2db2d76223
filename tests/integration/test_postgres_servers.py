"""PostgreSQL servers as users have them, not as the harness makes them: a missing database, a database
in SQL_ASCII. Each on the real local server (the test stack's), through an external DSN; each failed
before its fix (a psycopg traceback at table creation; a TypeError in the checker comparing str and bytes).
"""

import json

import psycopg
import pytest
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from tests.conftest import harness

pytestmark = pytest.mark.integration


def _dsn_for(stack, dbname: str) -> str:
    return make_conninfo(**{**conninfo_to_dict(stack["dsn"]), "dbname": dbname})


def test_a_server_without_the_database_is_one_line_naming_it_and_how_to_create_it(stack, tmp_path):
    dsn = _dsn_for(stack, "harness_no_such_db")
    proc = harness("run", "offset-after", "--messages", "20", "--out", str(tmp_path / "r"),
                   env={**stack["env"], "HARNESS_POSTGRES_DSN": dsn})
    assert proc.returncode == 2, proc.stderr[-2000:]
    lines = [l for l in proc.stderr.splitlines() if l.strip()]
    assert "Traceback" not in proc.stderr
    assert lines[-1].startswith("error: PostgreSQL at 127.0.0.1:") and \
        'has no database "harness_no_such_db"' in lines[-1] and "CREATE DATABASE" in lines[-1], lines
    assert conninfo_to_dict(stack["dsn"])["password"] not in proc.stderr


def test_a_refused_password_is_one_line_at_once(stack, tmp_path):
    # another user than the stack's own (whose DSN means the local stack itself, with its own password)
    info = {**conninfo_to_dict(stack["dsn"]), "user": "harness_someone_else", "password": "not-the-password"}
    proc = harness("run", "offset-after", "--messages", "20", "--out", str(tmp_path / "r"),
                   env={**stack["env"], "HARNESS_POSTGRES_DSN": make_conninfo(**info)}, timeout=60)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr[-2000:]
    assert 'refused the password of user "harness_someone_else"' in proc.stderr.splitlines()[-1]
    assert "not-the-password" not in proc.stderr


@pytest.fixture
def ascii_db(stack):
    """A database in SQL_ASCII owned by the harness's run role (created and dropped by the superuser)."""
    name, owner = "harness_sql_ascii", conninfo_to_dict(stack["dsn"])["user"]
    with psycopg.connect(stack["admin_dsn"], autocommit=True) as conn:
        conn.execute(sql.SQL("DROP DATABASE IF EXISTS {}").format(sql.Identifier(name)))
        conn.execute(sql.SQL("CREATE DATABASE {} ENCODING 'SQL_ASCII' LC_COLLATE 'C' LC_CTYPE 'C' "
                             "TEMPLATE template0 OWNER {}").format(sql.Identifier(name), sql.Identifier(owner)))
    yield _dsn_for(stack, name)
    with psycopg.connect(stack["admin_dsn"], autocommit=True) as conn:
        conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))


def test_a_sql_ascii_database_gives_the_same_exact_verdict(stack, ascii_db, tmp_path):
    with psycopg.connect(ascii_db) as conn:
        assert conn.execute("show server_encoding").fetchone()[0] == "SQL_ASCII"
    out = tmp_path / "r"
    proc = harness("run", "offset-after", "--messages", "200", "--quiet", "--out", str(out),
                   env={**stack["env"], "HARNESS_POSTGRES_DSN": ascii_db})
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr[-3000:]
    d = json.loads((out / "report.json").read_text())
    assert d["verdict"] == "as-predicted" and d["counts"]["duplicates"] == len(d["crashes"]) > 0
    audit = harness("audit", str(out), env={**stack["env"], "HARNESS_POSTGRES_DSN": ascii_db})
    assert audit.returncode == 0 and "Traceback" not in audit.stderr, audit.stdout + audit.stderr
