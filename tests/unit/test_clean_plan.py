"""What `harness clean` drops: only the exact names of runs the harness knows, never a live run's."""

import json

from harness.run import cleanup as clean
from harness.workload import registry
from harness.workload.naming import RunNames, new_run_id, run_tables

OLD = new_run_id("dedupe", now=1.8e9)
LIVE = new_run_id("offset-after", now=1.8e9 + 5)
FOREIGN_TOPICS = ["harness.customer-config", "harness.orders", "payments.input"]
FOREIGN_TABLES = ["ledger_reports", "acct_receivable", "rows_customers", "outbox_q; drop table x; --"]


def _names(*runs):
    return [t for r in runs for t in RunNames(r).topics()], sorted(t for r in runs for t in run_tables(r))


def test_clean_all_drops_known_runs_only_and_keeps_live_and_foreign_names():
    topics, tables = _names(OLD, LIVE)
    p = clean.plan(topics + FOREIGN_TOPICS, tables + FOREIGN_TABLES + [registry.TABLE], {OLD, LIVE},
                   {LIVE: f"run {LIVE} is in progress (pid 42)"})
    assert sorted(p.topics) == sorted(RunNames(OLD).topics())
    assert sorted(p.tables) == sorted(f"harness.{t}" for t in run_tables(OLD))
    assert p.runs == [OLD]
    kept = dict(p.kept)
    for t in ("harness.customer-config", "harness.orders"):
        assert "no run the harness knows" in kept[t]
    assert "payments.input" not in kept                      # not a harness name at all: not ours to mention
    for t in FOREIGN_TABLES[:3]:
        assert "no run the harness knows" in kept[f"harness.{t}"]
    for t in RunNames(LIVE).topics() + [f"harness.{t}" for t in run_tables(LIVE)]:
        assert "in progress" in kept[t]
    assert f"harness.{registry.TABLE}" not in kept and f"harness.{registry.TABLE}" not in p.tables


def test_names_shaped_like_a_run_of_an_unknown_run_id_are_kept():
    stranger = new_run_id("dedupe", now=1.7e9)
    topics, tables = _names(stranger)
    p = clean.plan(topics, tables, {OLD}, {})
    assert p.topics == [] and p.tables == [] and len(p.kept) == len(topics) + len(tables)


def test_named_runs_are_dropped_but_never_a_live_one():
    topics, tables = _names(OLD, LIVE)
    p = clean.plan(topics + FOREIGN_TOPICS, tables, set(), {LIVE: "in progress"}, named=[OLD, LIVE])
    assert sorted(p.topics) == sorted(RunNames(OLD).topics()) and len(p.tables) == len(run_tables(OLD))
    assert {n for n, _ in p.kept} == set(RunNames(LIVE).topics()) | {f"harness.{t}" for t in run_tables(LIVE)}
    assert p.runs == [OLD]


def test_a_control_character_in_a_kept_name_is_shown_escaped():
    p = clean.plan([], ["ledger_x\x1b[2J\nforged"], set(), {})
    assert p.kept and "\x1b" not in p.kept[0][0] and "\n" not in p.kept[0][0]


def test_run_ids_come_from_reports_that_name_a_valid_one(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "report.json").write_text(json.dumps({"run_id": OLD}))
    (tmp_path / "s" / "b").mkdir(parents=True)
    (tmp_path / "s" / "b" / "report.json").write_text(json.dumps({"run_id": LIVE}))
    for name, text in {"c": json.dumps({"run_id": "customer-config"}), "d": "[" * 100000, "e": "not json",
                       "f": json.dumps({"run_id": f"{OLD}.input\nx"}), "g": json.dumps([OLD])}.items():
        (tmp_path / name).mkdir()
        (tmp_path / name / "report.json").write_text(text)
    assert clean.reported_run_ids(tmp_path) == {OLD, LIVE}


def test_valid_run_ids():
    assert registry.valid_run_id(OLD) and registry.valid_run_id(f"{OLD}-dedupe-100b-r1")
    for bad in ("customer-config", "", None, 5, f"{OLD}\n", f"{OLD}/..", "20261129T183000.123-", OLD.upper()):
        assert not registry.valid_run_id(bad)


def test_topics_under_a_runs_own_prefix_go_with_the_run_and_a_live_runs_stay():
    """A run's Kafka user may create topics under `harness-<run id>-` (Kafka Streams' internal topics; a consumer
    may make its own there): `clean` listed none of them, so they stayed for ever."""
    made = f"harness-{OLD}-KSTREAM-AGGREGATE-STATE-STORE-0000000001-changelog"
    own = f"harness-{OLD}-made-by-its-consumer"
    live = f"harness-{LIVE}-repartition"
    stray = "harness-shell-scratch"
    topics, tables = _names(OLD, LIVE)
    p = clean.plan(topics + [made, own, live, stray], tables, {OLD, LIVE}, {LIVE: f"run {LIVE} is in progress"})
    assert made in p.topics and own in p.topics
    kept = dict(p.kept)
    assert "in progress" in kept[live] and live not in p.topics
    assert "no run the harness knows" in kept[stray] and stray not in p.topics
    named = clean.plan([made, own, live, stray], [], {OLD, LIVE}, {}, named=[OLD])
    assert sorted(named.topics) == sorted([made, own])


def test_clean_retires_only_users_that_can_still_log_in_and_never_calls_a_retired_one_foreign(monkeypatch):
    """A retired user (run_users leaves it out) is neither retired again nor taken for a user the harness did
    not make; a named run whose user never existed gets none made (retiring writes a credential); a user
    named like a run's without its ACL is kept and said."""
    from types import SimpleNamespace
    from harness.run import cleanup
    from harness.workload import run_kafka_user as ru
    gone, live, dead, impostor, never = "r-gone", "r-live", "r-dead", "r-impostor", "r-never"
    retired_ones = []
    monkeypatch.setattr(ru, "run_users", lambda stack: [ru.user_name(r) for r in (live, dead, impostor)])
    monkeypatch.setattr(ru, "run_of", lambda stack, u: None if u == ru.user_name(impostor) else u)
    monkeypatch.setattr(ru, "retire_users", lambda stack, users: retired_ones.extend(sorted(users)))
    monkeypatch.setattr(cleanup.registry, "entries", lambda dsn: {live: SimpleNamespace(live=lambda: True)})
    p = cleanup.Plan(runs=[gone, never])          # `gone`'s user was retired before: run_users leaves it out
    cleanup._drop_kafka_users(SimpleNamespace(postgres_dsn="x"), p, all_runs=True)
    assert retired_ones == [ru.user_name(dead)]
    assert [name for name, _ in p.kept] == [ru.user_name(impostor)]
    retired_ones.clear()
    cleanup._drop_kafka_users(SimpleNamespace(postgres_dsn="x"), cleanup.Plan(runs=[dead, never]), all_runs=False)
    assert retired_ones == [ru.user_name(dead)]
