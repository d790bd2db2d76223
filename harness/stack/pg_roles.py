"""The local PostgreSQL's three roles, set up (and put right) by its superuser.

A crash test runs code the harness did not write (a custom consumer) and SQL
it did not write (a custom run's `--audit-sql`, given again to `harness
audit`), so the database gives each what it needs and nothing more:

- `harness_admin`, the superuser (the cluster's bootstrap role), is used only
  here, to create the other roles, the `harness` database and its schema;
- `harness`, the role of every run, audit and `harness env`, owns the `harness`
  schema and nothing else: no superuser, no CREATEROLE, no CREATEDB, no
  membership in any role (so none of `pg_execute_server_program`,
  `pg_read_server_files`, `pg_write_server_files`), and on its database only
  CONNECT and TEMPORARY (it cannot create a schema);
- `harness_audit` runs SQL read from a command line or a file: it may only
  connect and SELECT the tables of the `harness` schema, its transactions are
  read-only by default and its statements time out.

`settle` is idempotent: a fresh cluster and a state folder made by an older
harness (where `harness` was the bootstrap superuser: it is renamed
`harness_bootstrap` and can no longer log in, a new `harness` takes over the
schema) end in the same state. A role's password is sent as a SCRAM verifier
computed on this side, so no password reaches the server's text or its log.
"""

from psycopg import sql

SERVER_ROLES = ("pg_execute_server_program", "pg_read_server_files", "pg_write_server_files")
# Every attribute a run role must not have, and the one it needs.
LIMITED = "LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOREPLICATION NOBYPASSRLS"
AUDIT_TIMEOUT = "60s"
BOOTSTRAP_OID = 10          # the role initdb made; it owns the system catalogs and cannot lose SUPERUSER safely
RELATION_KINDS = "rvmfp"    # tables, views, materialized views, foreign and partitioned tables


def verifier(conn, role: str, password: str) -> str:
    """The SCRAM-SHA-256 verifier of `password` for `role`, computed by libpq on this side."""
    return conn.pgconn.encrypt_password(password.encode(), role.encode(), b"scram-sha-256").decode()


def is_limited(conn, role: str) -> bool:
    """Whether `role` exists as a plain login role: not the bootstrap role, no dangerous attribute, no membership."""
    row = conn.execute("""select r.oid <> %s and not (r.rolsuper or r.rolcreaterole or r.rolcreatedb
                                  or r.rolreplication or r.rolbypassrls) and r.rolcanlogin
                                  and not exists (select 1 from pg_auth_members m where m.member = r.oid)
                           from pg_roles r where r.rolname = %s""", (BOOTSTRAP_OID, role)).fetchone()
    return bool(row and row[0])


def cluster_settled(conn, user: str, auditor: str, admin: str, database: str) -> bool:
    """On any database, as the admin: the roles and the database's owner and grants are as `settle` leaves them."""
    if not (is_limited(conn, user) and is_limited(conn, auditor)):
        return False
    row = conn.execute("""select pg_get_userbyid(d.datdba) = %s
                                 and not has_database_privilege('public', d.oid, 'CONNECT')
                                 and has_database_privilege(%s, d.oid, 'CONNECT, TEMPORARY')
                                 and not has_database_privilege(%s, d.oid, 'CREATE')
                                 and not has_database_privilege(%s, d.oid, 'CREATE, TEMPORARY')
                          from pg_database d where d.datname = %s""",
                       (admin, user, user, auditor, database)).fetchone()
    return bool(row and row[0])


def settle_cluster(conn, admin: str, user: str, auditor: str, database: str, passwords: dict,
                   force_passwords: bool = False) -> list[str]:
    """As the admin, on the `postgres` database (autocommit): the roles and the run database. Returns notes."""
    notes = []
    boot = conn.execute("select rolname from pg_roles where oid = %s", (BOOTSTRAP_OID,)).fetchone()[0]
    if boot == user:
        # A folder from an older harness: the run role was the bootstrap superuser. It keeps its catalogs under
        # another name and cannot log in; its other sessions end now (they had a superuser's power).
        old = f"{user}_bootstrap"
        conn.execute("""select pg_terminate_backend(pid) from pg_stat_activity
                        where usesysid = %s and backend_type = 'client backend' and pid <> pg_backend_pid()""",
                     (BOOTSTRAP_OID,))
        conn.execute(sql.SQL("alter role {} rename to {}").format(sql.Identifier(user), sql.Identifier(old)))
        conn.execute(sql.SQL("alter role {} nologin password null").format(sql.Identifier(old)))
        notes.append(f"PostgreSQL: the role {user!r} was a superuser (made by an older harness); it is now "
                     f"{old!r}, unable to log in, and runs use a new {user!r} that owns the {database!r} schema only")
    for role in (user, auditor):
        exists = conn.execute("select 1 from pg_roles where rolname = %s", (role,)).fetchone()
        if not exists:
            conn.execute(sql.SQL("create role {} " + LIMITED).format(sql.Identifier(role)))
        if not exists or force_passwords or not is_limited(conn, role):
            conn.execute(sql.SQL("alter role {} " + LIMITED + " password {}").format(
                sql.Identifier(role), sql.Literal(verifier(conn, role, passwords[role]))))
        for granted, grantor in conn.execute(
                """select pg_get_userbyid(m.roleid), pg_get_userbyid(m.grantor) from pg_auth_members m
                   where m.member = (select oid from pg_roles where rolname = %s)""", (role,)).fetchall():
            conn.execute(sql.SQL("revoke {} from {} granted by {}").format(
                sql.Identifier(granted), sql.Identifier(role), sql.Identifier(grantor)))
    for setting, value in (("default_transaction_read_only", "on"), ("statement_timeout", AUDIT_TIMEOUT)):
        conn.execute(sql.SQL("alter role {} set {} = {}").format(sql.Identifier(auditor), sql.Identifier(setting),
                                                                 sql.Literal(value)))
    if not conn.execute("select 1 from pg_database where datname = %s", (database,)).fetchone():
        conn.execute(sql.SQL("create database {} owner {}").format(sql.Identifier(database), sql.Identifier(admin)))
    db = sql.Identifier(database)
    conn.execute(sql.SQL("alter database {} owner to {}").format(db, sql.Identifier(admin)))
    conn.execute(sql.SQL("revoke all on database {} from public, {}, {}").format(
        db, sql.Identifier(user), sql.Identifier(auditor)))
    conn.execute(sql.SQL("grant connect, temporary on database {} to {}").format(db, sql.Identifier(user)))
    conn.execute(sql.SQL("grant connect on database {} to {}").format(db, sql.Identifier(auditor)))
    conn.execute("revoke all on database postgres from public")
    return notes


def database_settled(conn, user: str, auditor: str, schema: str) -> bool:
    """On the run database, as the admin: the schema, its objects' owner and the auditor's reads are as
    `settle_database` leaves them."""
    row = conn.execute(f"""select pg_get_userbyid(n.nspowner) = %s
                                  and has_schema_privilege(%s, n.oid, 'USAGE')
                                  and not has_schema_privilege(%s, n.oid, 'CREATE')
                                  and not exists (select 1 from pg_class c where c.relnamespace = n.oid
                                                  and c.relkind = any(string_to_array(%s, null)::"char"[])
                                                  and (pg_get_userbyid(c.relowner) <> %s
                                                       or not has_table_privilege(%s, c.oid, 'SELECT')))
                                  and exists (select 1 from pg_default_acl a where a.defaclnamespace = n.oid
                                              and a.defaclrole = (select oid from pg_roles where rolname = %s)
                                              and a.defaclobjtype = 'r')
                                  and not has_schema_privilege('public', 'public', 'CREATE')
                           from pg_namespace n where n.nspname = %s""",
                       (user, auditor, auditor, RELATION_KINDS, user, auditor, user, schema)).fetchone()
    return bool(row and row[0])


def settle_database(conn, user: str, auditor: str, schema: str) -> None:
    """As the admin, on the run database (autocommit): `user` owns `schema` and everything in it, `auditor`
    may read its tables (those made later too), and nobody but the database's owner creates in `public`."""
    s, u, a = sql.Identifier(schema), sql.Identifier(user), sql.Identifier(auditor)
    if conn.execute("select 1 from pg_namespace where nspname = %s", (schema,)).fetchone():
        conn.execute(sql.SQL("alter schema {} owner to {}").format(s, u))
    else:
        conn.execute(sql.SQL("create schema {} authorization {}").format(s, u))
    # Tables first: a sequence that a column owns follows its table.
    for kinds in (RELATION_KINDS, "S"):
        for name, kind in conn.execute(
                """select c.relname, c.relkind from pg_class c join pg_namespace n on n.oid = c.relnamespace
                   where n.nspname = %s and c.relkind = any(string_to_array(%s, null)::"char"[])
                   and pg_get_userbyid(c.relowner) <> %s""", (schema, kinds, user)).fetchall():
            what = "sequence" if kind == "S" else "table"
            conn.execute(sql.SQL("alter " + what + " {} owner to {}").format(sql.Identifier(schema, name), u))
    conn.execute("revoke create on schema public from public")
    conn.execute(sql.SQL("revoke all on schema {} from public").format(s))
    conn.execute(sql.SQL("grant usage on schema {} to {}").format(s, a))
    conn.execute(sql.SQL("grant select on all tables in schema {} to {}").format(s, a))
    conn.execute(sql.SQL("alter default privileges for role {} in schema {} grant select on tables to {}")
                 .format(u, s, a))
