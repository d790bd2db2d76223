"""`harness env`, `harness audit` and the reports' "Audit it yourself" section, on hand-made data."""

import stat

from harness.checker.crosscheck import compare, verdict
from harness.checker.recount import LedgerRecount, OutputRecount, TopicRead, display, recount_output
from harness.reporting import html, markdown
from harness.reporting.recount_by_hand import commands
from harness.reporting.run_report import RunReport
from harness.stack import pgpass, shellenv
from harness.stack.stack import Stack
from tests.unit.sample_report import sample

SENT = {f"pay-{i:06d}": 100 for i in range(1, 11)}


def _ledger(**over):
    base = dict(effects=13, distinct_ids=10, total=1300, duplicates=3, duplicate_ids=["pay-000003"],
                missing_ids=[], stray_ids=[], wrong_amount_ids=[])
    return LedgerRecount(**{**base, **over})


def test_pgpass_round_trip_escapes_and_is_private(tmp_path):
    path = pgpass.write(tmp_path / "pgpass", "127.0.0.1", 15432, "harness", "harness", r"a:b\c")
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert path.read_text() == "127.0.0.1:15432:harness:harness:a\\:b\\\\c\n"
    assert pgpass.lookup("127.0.0.1", "15432", "harness", "harness", path) == r"a:b\c"
    assert pgpass.lookup("127.0.0.1", 15433, "harness", "harness", path) is None
    (tmp_path / "wild").write_text("# comment\n*:*:*:harness:w\n")
    assert pgpass.lookup("db.example", 5432, "x", "harness", tmp_path / "wild") == "w"
    assert pgpass.lookup("h", 1, "d", "u", tmp_path / "missing") is None


def test_env_settings_never_carry_the_password(tmp_path):
    st = Stack("local", "127.0.0.1:19092", "postgresql://harness:s3cr%40t@127.0.0.1:15432/harness", True)
    values = shellenv.settings(st, tmp_path)
    text = shellenv.shell_lines(values)
    assert "s3cr" not in text and "s3cr" not in repr(values)
    assert values["PGHOST"] == "127.0.0.1" and values["PGPORT"] == "15432" and values["PGUSER"] == "harness"
    assert values["PGDATABASE"] == "harness" and values["HARNESS_BOOTSTRAP_SERVERS"] == "127.0.0.1:19092"
    assert (tmp_path / "pgpass").read_text().strip().endswith(":s3cr@t")
    assert "password" not in values["HARNESS_POSTGRES_DSN"]
    assert text.splitlines()[0] == "export PGHOST=127.0.0.1"


def test_env_without_a_password_writes_no_file(tmp_path):
    st = Stack("external", "k:9092", "host=db port=5433 user=me dbname=pay", False)
    values = shellenv.settings(st, tmp_path)
    assert "PGPASSFILE" not in values and not (tmp_path / "pgpass").exists()
    assert values["PGPORT"] == "5433" and values["PGDATABASE"] == "pay"


def test_report_and_recount_agree():
    rows = compare(sample(dups=3), SENT, _ledger())
    assert verdict(rows) and all(r.agrees for r in rows), [(r.metric, r.reported, r.recounted) for r in rows]


def test_an_added_row_differs_and_is_named():
    """Someone inserts one more effect for pay-000007 (never crashed) and one for an id never sent."""
    ledger = _ledger(effects=15, total=1405, duplicates=4, duplicate_ids=["pay-000003", "pay-000007"],
                     stray_ids=["evil"])
    rows = {r.metric: r for r in compare(sample(dups=3), SENT, ledger)}
    assert not verdict(list(rows.values()))
    assert rows["duplicated effects"].agrees is False and rows["duplicated effects"].ids == ["pay-000007"]
    assert rows["ids never sent"].agrees is False and rows["ids never sent"].ids == ["evil"]
    assert rows["total amount"].ids == ["evil", "pay-000007"]
    assert rows["ids without an effect (lost + unprocessed)"].agrees is True


def test_ids_of_the_crash_records_are_accounted_for():
    """A report lists 20 ids per check; ids its crash records name are not 'new' evidence."""
    rep = sample(dups=3)
    rep["anomalies"]["duplicate_ids"] = []
    rows = {r.metric: r for r in compare(rep, SENT, _ledger(duplicates=4, effects=14, total=1400))}
    assert rows["duplicated effects"].agrees is False and rows["duplicated effects"].ids == []


def test_unknown_report_numbers_are_not_judged():
    rep = sample()
    rep["counts"]["duplicates"] = None
    rep["verdict"] = "audit-failed"
    rows = {r.metric: r for r in compare(rep, SENT, _ledger())}
    assert rows["duplicated effects"].agrees is None and rows["ids never sent"].agrees is None
    assert verdict(list(rows.values()))


def test_output_recount_counts_every_copy():
    read = TopicRead(records=5, ids={"pay-000001": 2, "pay-000002": 1, "pay-000009": 2}, values={})
    out = recount_output(read, {"pay-000001": 1, "pay-000002": 1, "pay-000003": 1})
    assert (out.records, out.duplicates, out.missing) == (5, 2, 1)
    assert out.missing_ids == ["pay-000003"] and out.duplicate_ids == ["pay-000001", "pay-000009"]
    rep = sample()
    rep["kafka_output"] = {"read_committed": {"records": 5, "duplicates": 2, "lost": 1, "unprocessed": 0},
                           "read_uncommitted": {"records": 6, "duplicates": 2, "lost": 1, "unprocessed": 0}}
    rows = compare(rep, SENT, None, {"read_committed": out, "read_uncommitted": out})
    by = {(r.store, r.metric): r.agrees for r in rows}
    assert by[("output read_committed", "records")] and by[("output read_uncommitted", "records")] is False
    assert OutputRecount(0, 0, 0).duplicate_ids == []


def test_the_recount_states_the_duplicate_and_torn_transaction_classes_on_its_own():
    from collections import Counter
    from harness.checker.crosscheck import judge
    from harness.checker.recount import _transaction_of
    # read_committed saw transaction (w0, 1, 2) in part: 1 of its 2 records; (w0, 1, 1) whole
    rc = OutputRecount(3, 1, 0, ["pay-000001"], [], Counter({("w0", 1, 1): 2, ("w0", 1, 2): 1}))
    ru = OutputRecount(5, 1, 0, ["pay-000001"], [], Counter({("w0", 1, 1): 2, ("w0", 1, 2): 2, ("w1", 2, 1): 1}))
    rep = sample()
    rep["anomaly_classes"] = {"classes": {"duplicate": {"count": 1}, "torn-transaction": {"count": 0}}}
    rows = {r.metric.split(":")[0]: r for r in compare(rep, SENT, None, {"read_committed": rc, "read_uncommitted": ru})
            if r.store == "anomalies"}
    assert rows["duplicate"].agrees is True
    assert rows["torn-transaction"].agrees is False and rows["torn-transaction"].ids == ["w0/1 transaction 2"]
    # a class the run could not check is not judged; a report without classes (older) gets no such rows
    rep["anomaly_classes"]["classes"]["duplicate"]["count"] = None
    assert [r.agrees for r in compare(rep, SENT, None, {"read_committed": rc, "read_uncommitted": ru})
            if r.metric.startswith("duplicate:")] == [None]
    assert not [r for r in compare(sample(), SENT, None, {"read_committed": rc}) if r.store == "anomalies"]
    # a hostile report: classes of the wrong shape are refused in one line, not a traceback
    rep["anomaly_classes"] = {"classes": {"duplicate": {"count": "1"}}}
    assert "not a whole number" in judge(rep, SENT, None, {"read_committed": rc})[1]
    rep["anomaly_classes"] = ["not", "an", "object"]
    assert "wrong type" in judge(rep, SENT, None, {"read_committed": rc})[1]
    # values name their transaction only with whole numbers and a short worker name
    assert _transaction_of({"worker": "w0", "attempt": 1, "txn": 2}) == ("w0", 1, 2)
    assert not any(_transaction_of(v) for v in ({"worker": "w0", "attempt": True, "txn": 2},
                                                {"worker": "w0", "attempt": 1, "txn": 2.0}, [], "x",
                                                {"worker": "w" * 65, "attempt": 1, "txn": 2}))


def test_reports_end_with_the_commands_that_recount_them():
    d = sample()
    d["stack"]["dedupe_table"] = 'harness.dedupe_"odd'
    d["stack"]["output_topic"] = "harness.x.output"
    cmds = dict((what, cmd) for what, cmd in commands(d))
    assert cmds[next(k for k in cmds if k.startswith("settings"))] == 'eval "$(harness env)"'
    assert any('from "harness"."ledger_x"' in c for c in cmds.values())
    assert any('"harness"."dedupe_""odd"' in c for c in cmds.values())   # identifiers quoted, quotes doubled
    assert any("isolation.level=read_committed -t harness.x.output" in c for c in cmds.values())
    assert cmds["all of the above, compared with this report"] == f"harness audit {d['run_id']}"
    md, page = markdown.render(RunReport(d)), html.render(RunReport(d))
    assert "## Audit it yourself" in md and md.rstrip().endswith("```")
    assert "id=audit" in page and "harness audit" in page
    assert "***" not in "".join(cmds.values()) and "password" not in "".join(cmds.values())
    assert display("select 1 from {t}", "harness.a") == 'select 1 from "harness"."a"'


def test_parameters_show_only_what_was_in_force():
    d = sample()
    d["params"].update(kills=None, fresh_transactional_id=False, effect="none", payload_bytes=0,
                       faults=["random-kill:kills=3"], time_limit=600.0, crash_rate=0.2)
    rows = dict(RunReport(d).parameter_rows())
    assert "kills" not in rows and "fresh-transactional-id" not in rows and "effect" not in rows
    assert "payload-bytes" not in rows and "kill-point" not in rows
    assert rows["faults"] == "random-kill:kills=3" and rows["time-limit"] == "600" and rows["crash-rate"] == "0.20"
    assert not any(v in ("None", "False", "True") for v in rows.values())


def test_broker_version_from_an_api_versions_answer():
    """A hand-built ApiVersions v3 body: two api keys, then tagged field 2 with metadata.version 27."""
    import struct
    from harness.stack import broker_version as bv
    keys = b"".join(struct.pack(">hhh", k, 0, 9) + bv._uvarint(0) for k in (0, 18))
    feature = bv._compact_string("metadata.version") + struct.pack(">hh", 27, 7) + bv._uvarint(0)
    features = bv._uvarint(2) + feature
    tags = bv._uvarint(1) + bv._uvarint(2) + bv._uvarint(len(features)) + features
    body = struct.pack(">h", 0) + bv._uvarint(3) + keys + struct.pack(">i", 0) + tags
    assert bv.finalized_features(body) == {"metadata.version": 27}
    assert bv.LEVELS[27] == "4.1-IV1"
    assert bv.finalized_features(struct.pack(">h", 0) + bv._uvarint(1) + struct.pack(">i", 0) + bv._uvarint(0)) == {}
    assert bv.request()[:4] == struct.pack(">i", len(bv.request()) - 4)
    assert bv.describe("127.0.0.1:1", timeout=0.5) is None


def test_kcat_lines_read_the_client_settings_file_when_the_cluster_wants_credentials(tmp_path):
    d = sample()
    plain = [c for _, c in commands(d) if c.startswith("kcat")]
    assert plain and not any("-F" in c for c in plain)
    d["stack"]["kafka_auth"] = "SASL_PLAINTEXT SCRAM-SHA-512 as harness"
    assert all('-F "$HARNESS_KAFKA_CONFIG_FILE"' in c for _, c in commands(d) if c.startswith("kcat"))
    st = Stack("local", "127.0.0.1:19092", "postgresql://harness:pw@127.0.0.1:15432/harness", True)
    values = shellenv.settings(st, tmp_path, tmp_path / "client.properties")
    assert values["HARNESS_KAFKA_CONFIG_FILE"] == str(tmp_path / "client.properties")


def test_a_services_rows_events_and_outbox_are_recounted_and_judged():
    from harness.checker.crosscheck import service_rows
    from harness.checker.recount import ServiceRecount
    svc = {"rows": 10, "events": 9, "unpublished": 1, "orphaned": 0, "event_duplicates": 0,
           "outbox_rows": 10, "outbox_unsent": 0, "unpublished_ids": ["pay-000004"], "orphaned_ids": [],
           "duplicate_event_ids": []}
    same = ServiceRecount(10, 9, ["pay-000004"], [], 0, [], 10, 0)
    assert all(r.agrees for r in service_rows(svc, same, set()))
    extra = ServiceRecount(10, 10, ["pay-000004"], ["evil"], 0, [], 10, 0)     # someone published an event
    rows = {r.metric: r for r in service_rows(svc, extra, set())}
    assert rows["events without a row"].agrees is False and rows["events without a row"].ids == ["evil"]
    assert rows["events"].agrees is False and rows["outbox rows"].agrees is True


def test_service_stores_come_from_the_reports_lists():
    from harness.checker.recount import service_stores
    from harness.workload.naming import RunNames
    d = sample()
    assert service_stores(d) is None
    n = RunNames(d["run_id"])
    d["stack"]["tables"] = [n.ledger_table, n.rows_table, n.outbox_table]
    d["stack"]["topics"] = [n.input_topic, n.events_topic]
    assert service_stores(d) == {"rows_table": n.rows_table, "events_topic": n.events_topic, "outbox_table": n.outbox_table}
    cmds = [c for _, c in commands(d)]
    assert any(f'from "harness"."{n.rows_table.split(".", 1)[1]}"' in c for c in cmds)
    assert any("sent_at is null" in c for c in cmds) and any(n.events_topic in c for c in cmds)


def test_audit_refuses_a_report_that_names_stores_its_run_cannot_have_written():
    from harness.cli.commands.audit import foreign_stores
    from harness.workload.naming import RunNames
    d = sample()
    n = RunNames(d["run_id"])
    d["stack"].update(input_topic=n.input_topic, ledger_table=n.ledger_table, output_topic=None, dedupe_table=None)
    assert foreign_stores(d) is None
    d["stack"]["ledger_table"] = "public.users"
    assert foreign_stores(d) == "ledger_table 'public.users'"
    d["stack"]["ledger_table"], d["stack"]["input_topic"] = n.ledger_table, "payments-prod"
    assert "input_topic" in foreign_stores(d)
    d["stack"].update(input_topic=n.input_topic, rejects_table=n.rejects_table)
    assert foreign_stores(d) is None
    d["stack"]["rejects_table"] = "public.refunds"
    assert foreign_stores(d) == "rejects_table 'public.refunds'"


def test_env_says_in_one_line_when_it_cannot_keep_the_password_file(tmp_path):
    import pytest
    from harness.core.errors import HarnessError
    blocked = tmp_path / "file"
    blocked.write_text("not a folder")
    st = Stack("local", "127.0.0.1:19092", "postgresql://harness:pw@127.0.0.1:15432/harness", True)
    with pytest.raises(HarnessError, match="cannot write the password file"):
        shellenv.settings(st, blocked)


def test_each_accounts_balance_is_recounted_and_judged():
    from harness.checker.crosscheck import account_rows
    from harness.checker.recount import AccountsRecount
    section = {"expected_total": 1000, "actual_total": 1200, "accounts": [
        {"account": "acct-a", "expected": 600, "predicted": 700, "predicted_op": "==", "actual": 700,
         "version": 7, "stale_updates": 0},
        {"account": "acct-b", "expected": 400, "predicted": 500, "predicted_op": "==", "actual": 500,
         "version": 5, "stale_updates": 0}]}
    same = AccountsRecount(balances={"acct-a": 700, "acct-b": 500}, expected={"acct-a": 600, "acct-b": 400})
    rows = account_rows(section, same)
    assert len(rows) == 4 and all(r.agrees for r in rows)
    # Someone adds 100 to acct-b by hand; an account the report never named appears.
    moved = AccountsRecount(balances={"acct-a": 700, "acct-b": 600, "acct-z": 5}, expected={"acct-a": 600, "acct-b": 400})
    by = {r.metric: r for r in compare(sample(dups=3), SENT, _ledger(), accounts=moved)}
    assert by["acct-a: balance"].agrees is None          # sample() has no accounts section: nothing stated
    by = {r.metric: r for r in account_rows(section, moved)}
    assert by["acct-b: balance"].agrees is False and by["acct-a: balance"].agrees is True
    assert by["acct-z: balance"].agrees is None and by["acct-z: expected (its payments' sum)"].recounted == 0


def test_the_accounts_table_gets_its_psql_line():
    from harness.checker.recount import ACCOUNT_BALANCES
    d = sample()
    d["stack"]["accounts_table"] = "harness.acct_x"
    cmds = dict(commands(d))
    assert cmds["accounts: each balance"] == "psql -c 'select account, balance from \"harness\".\"acct_x\" order by account'"
    assert "{a}" in ACCOUNT_BALANCES


def test_the_dedupe_keys_the_report_counted_are_compared_as_stated():
    """key-before-effect: a key recorded before a lost payment's effect stays, so the keys are not the
    ids with an effect; the report states the keys its audit counted, and those are compared."""
    rep = sample(dups=3)
    ledger = _ledger(dedupe_keys=12, dedupe_hits=rep["counts"].get("dedupe_hits"))
    rep["ledger"]["dedupe_keys"] = 12
    by = {r.metric: r for r in compare(rep, SENT, ledger)}
    assert by["keys"].agrees is True and "keys (= ids with an effect)" not in by
    ledger.dedupe_keys = 13                               # a key added by hand
    assert {r.metric: r for r in compare(rep, SENT, ledger)}["keys"].agrees is False
    del rep["ledger"]["dedupe_keys"]                      # a report from before: keys are ids with an effect
    by = {r.metric: r for r in compare(rep, SENT, _ledger(dedupe_keys=10, dedupe_hits=0))}
    assert by["keys (= ids with an effect)"].agrees is True


def test_audit_refuses_an_accounts_table_its_run_cannot_have_written():
    """The accounts table is read like the ledger: one named outside the run (a catalog, someone's
    table with an `account` and a `balance`) is refused before anything is read."""
    from harness.cli.commands.audit import foreign_stores
    from harness.workload.naming import RunNames
    d = sample()
    n = RunNames(d["run_id"])
    d["stack"].update(input_topic=n.input_topic, ledger_table=n.ledger_table, output_topic=None, dedupe_table=None,
                      accounts_table=n.accounts_table)
    assert foreign_stores(d) is None
    d["stack"]["accounts_table"] = "public.customer_balances"
    assert foreign_stores(d) == "accounts_table 'public.customer_balances'"


def test_an_edited_report_of_the_wrong_shape_is_one_reason_not_a_traceback():
    """report.json is a file anyone can edit: wrong types anywhere `harness audit` reads become one line."""
    from harness.checker.crosscheck import judge
    rows, why = judge(sample(dups=3), SENT, _ledger())
    assert why is None and verdict(rows)
    edits = {
        "stack is a list": lambda d: d.update(stack=[1, 2]),
        "counts is a list": lambda d: d.update(counts=[1]),
        "ledger is text": lambda d: d.update(ledger="abc"),
        "crashes are text": lambda d: d.update(crashes=["a", "b"]),
        "unacked is a number": lambda d: d["crashes"][0].update(unacked=5),
        "lost ids are text": lambda d: d.update(anomalies={"lost_ids": "abc", "unprocessed_ids": [1]}),
        "differing totals are text": lambda d: d.update(verdict_detail={"differing_totals": "x"}, verdict="x"),
        "a count is text": lambda d: d["counts"].update(sent="10"),
        "the dedupe keys are text": lambda d: d["ledger"].update(dedupe_keys="10"),
        "a count is a float": lambda d: d["counts"].update(effects=1e308),
    }
    for name, edit in edits.items():
        d = sample(dups=3)
        d.setdefault("ledger", {})
        edit(d)
        rows, why = judge(d, SENT, _ledger(dedupe_keys=10, dedupe_hits=3))
        assert rows == [] and why and "\n" not in why, name
    d = sample(dups=3)
    d["counts"]["sent"] = 10 ** 400             # a huge number is a number: it differs, it is not malformed
    rows, why = judge(d, SENT, _ledger())
    assert why is None and not verdict(rows)


def test_down_purge_deletes_the_password_file_env_wrote(tmp_path, monkeypatch):
    """`harness down --purge` deletes the stack's password; the copy `harness env` keeps goes with it."""
    from harness.stack import local
    from harness.stack import marker
    monkeypatch.setenv("HARNESS_HOME", str(tmp_path))
    marker.mark(tmp_path)                     # `harness up` made this folder
    pgpass.write(tmp_path / shellenv.PGPASS_NAME, "127.0.0.1", 5432, "harness", "harness", "s3cret")
    local.down(purge=True, log=lambda *_: None)
    assert not (tmp_path / shellenv.PGPASS_NAME).exists()


def test_the_recount_compares_the_reader_during_the_run_with_the_committed_records_where_it_got():
    from harness.checker.crosscheck import judge
    from harness.checker.output_watcher import reach_of
    # partition 0: committed offsets 0..4 (the reader got to 3); partition 1: 10, 12 (it got to 12)
    rc = OutputRecount(7, 0, 0, offsets={0: [0, 1, 2, 3, 4], 1: [10, 12]})
    seen = reach_of({(0, 0): "a", (0, 1): "b", (0, 2): "c", (0, 3): "d", (1, 10): "e", (1, 12): "f"})
    assert seen == {"0": {"records": 4, "first_offset": 0, "last_offset": 3},
                    "1": {"records": 2, "first_offset": 10, "last_offset": 12}}
    rep = sample()
    rep["kafka_output"] = {"reader_during_run": seen}

    def row():
        (r,) = [r for r in compare(rep, SENT, None, {"read_committed": rc}) if r.metric.startswith("records the reader")]
        return r
    assert (row().reported, row().recounted, row().agrees) == (6, 6, True)
    # a reader that skipped offset 1 of partition 0 saw fewer committed records than the topic holds there
    rep["kafka_output"]["reader_during_run"] = reach_of({(0, 0): "a", (0, 2): "c", (0, 3): "d", (1, 10): "e",
                                                         (1, 12): "f"})
    assert row().agrees is False and row().ids == ["partition 0: 3 records at offsets 0 to 3 (the topic holds 4)"]
    # a partition whose head retention deleted is not judged; the others still are; all gone: not stated
    rc.offsets[1] = [12]
    rep["kafka_output"]["reader_during_run"] = seen
    assert (row().reported, row().recounted, row().agrees) == (4, 4, True)
    rc.offsets[0] = [4]
    assert row().agrees is None
    # unknown (the reader failed) or no reader: no row; a hostile count is refused in one line
    for unknown in (None, {}):
        rep["kafka_output"]["reader_during_run"] = unknown
        assert not [r for r in compare(rep, SENT, None, {"read_committed": rc}) if r.metric.startswith("records the")]
    assert reach_of(None) is None
    for bad in ({"0": {"records": "4", "first_offset": 0, "last_offset": 3}}, {"0": {"records": 4, "last_offset": 3}},
                {"x": {"records": 4, "first_offset": 0, "last_offset": 3}}, {"0": [4, 3]}):
        rep["kafka_output"]["reader_during_run"] = bad
        assert judge(rep, SENT, None, {"read_committed": rc})[1], bad
