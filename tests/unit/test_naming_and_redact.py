import re

import psycopg
import pytest
from psycopg.conninfo import conninfo_to_dict

from harness.reporting.compare_targets import TIMESTAMPED
from harness.stack.stack import redact
from harness.core.redaction import scrub
from harness.workload.naming import PG_IDENTIFIER_MAX, RunNames, SCHEMA, is_run_table, new_run_id, run_tables, slug
from harness.workload.sqlnames import table_identifier


def test_run_ids_sort_by_time_and_say_what_ran():
    a, b = new_run_id("offset-after", 1_700_000_000), new_run_id("dedupe", 1_700_000_060)
    assert re.fullmatch(r"20231114T221320\.000-offset-after-[0-9a-f]{6}", a) and a < b
    assert new_run_id("dedupe", 1_700_000_000.123, suffix="3f9a2c") == "20231114T221320.123-dedupe-3f9a2c"
    # a later millisecond sorts later whatever the random suffixes
    assert new_run_id("x", 1_700_000_000.001, suffix="000000") > new_run_id("x", 1_700_000_000.000, suffix="ffffff")
    assert TIMESTAMPED.match(a), "compare's `latest` and the suite ids recognise run ids by their timestamp"


def test_two_runs_started_in_the_same_second_get_different_ids():
    ids = {new_run_id("offset-after", 1_764_441_000.0) for _ in range(200)}
    assert len(ids) == 200
    tables = {RunNames(i).ledger_table for i in ids} | {RunNames(i).dedupe_table for i in ids}
    assert len(tables) == 400


def test_names_are_safe_identifiers():
    n = RunNames("20261129T183000-eos-boundary")
    assert n.ledger_table == "harness.ledger_r20261129t183000_eos_boundary"
    assert n.input_topic == "harness.20261129T183000-eos-boundary.input"
    assert slug("A b--c") == "ra_b_c"
    assert RunNames("20261129T183000.123-dedupe-3f9a2c").dedupe_table == "harness.dedupe_r20261129t183000_123_dedupe_3f9a2c"


def test_slugs_fit_postgres_identifiers_and_stay_unique():
    """Postgres cuts identifiers at 63 bytes: two long run ids must not end up naming one table."""
    bench = new_run_id("bench")
    ids = [f"{bench}-{case}-{size}b-r{rep}" for case in ("eos-dedupe-100ms", "bare-cp-100ms", "offset-after")
           for size in (100, 10_000, 1_000_000) for rep in range(1, 12)]
    ids += ["x" * 200 + "-a", "x" * 200 + "-b", "Ü" * 80]
    names = [t for i in ids for t in run_tables(i)]
    assert len(set(names)) == len(names)
    for t in names:
        assert len(t.encode()) <= PG_IDENTIFIER_MAX, t
        assert is_run_table(t), t


@pytest.mark.parametrize("name", ["ledger_q; drop table public.victim2; --", 'ledger_r"x', "ledger_R2026",
                                  "ledger_r__x", "ledger_r_", "other_r2026", "ledger_r" + "1" * 60, "ledger_r x",
                                  "dedupe_r2026\n"])
def test_only_names_the_harness_makes_count_as_run_tables(name):
    assert not is_run_table(name)


def test_table_identifier_is_quoted():
    ident = table_identifier(RunNames("20261129T183000.123-dedupe-3f9a2c").ledger_table)
    assert ident.as_string(None) == '"harness"."ledger_r20261129t183000_123_dedupe_3f9a2c"'
    crafted = table_identifier(f'{SCHEMA}.ledger_q"; drop table public.victim2; --')
    assert crafted.as_string(None) == '"harness"."ledger_q""; drop table public.victim2; --"'


def test_redact_removes_passwords():
    assert redact("postgresql://u:s3cret@h:5/db") == "postgresql://u:***@h:5/db"
    assert "s3cret" not in redact("host=h user=u password=s3cret dbname=d")
    assert redact("postgresql://h/db") == "postgresql://h/db"
    assert redact("postgresql://h1:5432,[::1]:5433/db") == "postgresql://h1:5432,[::1]:5433/db"
    assert redact(None) is None


# DSNs that no parser accepts (or that libpq reads differently from what the user meant), each
# with a password made of the pieces below; none of them may survive redaction.
PIECES = ("S3cret", "PWzz9", "zz9")
MALFORMED = [
    "postgresql://harness:S3cret PWzz9@127.0.0.1:1/db",         # space
    "postgresql://harness:S3cret%zzPWzz9@127.0.0.1:1/db",       # bad percent-encoding
    "postgresql://harness:S3cret@PWzz9@127.0.0.1:1/db",         # @ in the password
    "postgresql://harness:S3cret:PW/zz9?x@127.0.0.1:1/db",      # : / ? in the password
    "postgresql://harness:S3cret PWzz9",                        # no host at all
    "postgresql://127.0.0.1:1/db?sslmode=disable&password=S3cret PWzz9&x",
    "host=127.0.0.1 port=1 password='S3cret PW\\'zz9' dbname=d bogus",   # quoted, escaped quote
    "host=127.0.0.1 port=1 password='S3cret PWzz9 dbname=d",             # unterminated quote
    "host=127.0.0.1 port=1 password=S3cret PWzz9 dbname=d",              # unquoted space
    "host=127.0.0.1 port=1 password = S3cret\\ PWzz9 dbname=d",          # escaped space
    "host=127.0.0.1 port=1 sslpassword=S3cretPWzz9",
    "harness:S3cret@PWzz9@127.0.0.1:1/x",                       # no scheme at all
    "harness:S3cretPWzz9@127.0.0.1:1/x",
    "postgresql:/harness:S3cretPWzz9@127.0.0.1:1/x",            # // mistyped
    "postgresql:harness:S3cret PWzz9@127.0.0.1:1/x",
]


def no_secret(text: str) -> bool:
    return not any(p in text for p in PIECES)


@pytest.mark.parametrize("dsn", MALFORMED)
def test_redact_works_on_dsns_no_parser_accepts(dsn):
    out = redact(dsn)
    assert no_secret(out), out
    assert "***" in out
    assert "127.0.0.1" in out or dsn.startswith("postgresql://harness:S3cret PWzz9") and out.endswith(":***")


@pytest.mark.parametrize("dsn", MALFORMED)
def test_errors_libpq_derives_from_a_dsn_are_scrubbed(dsn):
    """libpq quotes the offending piece (`unexpected spaces found in "S3cret PWzz9"`): scrub hides it."""
    messages = []
    for attempt in (lambda: conninfo_to_dict(dsn), lambda: psycopg.connect(dsn, connect_timeout=2).close()):
        try:
            attempt()
        except Exception as e:  # noqa: BLE001
            messages.append(str(e))
    assert messages
    for m in messages:
        assert no_secret(scrub(m, dsn)), (m, scrub(m, dsn))


def test_scrub_leaves_other_text_alone():
    dsn = "postgresql://harness:S3cret PWzz9@127.0.0.1:1/db"
    msg = 'unexpected spaces found in "S3cret PWzz9", use percent-encoded spaces (%20) instead'
    assert scrub(msg, dsn) == 'unexpected spaces found in "***", use percent-encoded spaces (%20) instead'
    assert scrub("connection refused", "postgresql://u:ab@h/db") == "connection refused"
    assert scrub("port 5 on ab", "postgresql://u:ab@h/db") == "port 5 on ***"
