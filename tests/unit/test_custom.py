"""`harness run custom`: the claim as prediction, the kill-every fault, kill quality and witnesses,
on hand-made data (and, for the fault, real sleeping processes and real SIGKILLs)."""

import signal
import subprocess
import sys
import time
from types import SimpleNamespace

import pytest

from harness.checker.predict import predict
from harness.checker.verdict import Evidence, judge
from harness.core.errors import HarnessError
from harness.experiments import get
from harness.experiments.custom.custom_launch import libpq_uri
from harness.experiments.custom.custom_report import kill_quality
from harness.experiments.custom.custom_witnesses import Placer, attempt_at, slot_of, witnesses
from harness.faults import build
from harness.runtime import crashlog
from harness.faults.kill_every import KillEvery
from harness.faults.random_kill import RandomKill
from harness.run.params import RunParams

SUPERVISOR_KILL = {"point": "random", "by": "supervisor", "worker": "w0", "attempt": 1, "time": 10.0}


def claim(name=None, crashes=(SUPERVISOR_KILL,)):
    return predict(get("custom").resolve(RunParams("custom", worker_cmd="true", expect=name)), list(crashes))


def test_the_claim_is_the_prediction_and_it_is_exact_despite_undescribed_kills():
    p = claim()
    assert p.exact and p.claim == "exactly-once"
    assert {e.text() for e in p.expectations if not e.if_measured} == {"ledger.duplicates == 0", "ledger.lost == 0"}
    assert "upper bounds" not in p.note and "exactly-once" in p.note


@pytest.mark.parametrize("name, judged", [("exactly-once", {"ledger.duplicates", "ledger.lost"}),
                                          ("at-least-once", {"ledger.lost"}),
                                          ("at-most-once", {"ledger.duplicates"})])
def test_each_claim_judges_what_it_forbids(name, judged):
    assert {e.metric for e in claim(name).expectations if not e.if_measured} == judged


def test_a_broken_claim_names_the_duplicated_ids():
    v = judge(claim(), {"ledger.duplicates": 2, "ledger.lost": 0},
              Evidence(ledger_per_id={"a": 2, "b": 2}, ledger_lost_ids=[]))
    assert v.verdict == "unexpected" and v.differing_ids["duplicates"] == ["a", "b"]


def test_at_least_once_tolerates_duplicates_but_not_losses():
    ev = Evidence(ledger_per_id={"a": 3}, ledger_lost_ids=[])
    assert judge(claim("at-least-once"), {"ledger.duplicates": 2, "ledger.lost": 0}, ev).verdict == "as-predicted"
    v = judge(claim("at-least-once"), {"ledger.duplicates": 0, "ledger.lost": 1},
              Evidence(ledger_per_id={}, ledger_lost_ids=["c"]))
    assert v.verdict == "unexpected" and v.differing_ids["lost"] == ["c"]


def test_an_unused_output_topic_is_not_judged_but_an_unreadable_one_fails_the_audit():
    ev = Evidence(ledger_per_id={}, ledger_lost_ids=[])
    base = {"ledger.duplicates": 0, "ledger.lost": 0}
    assert judge(claim(), base, ev).verdict == "as-predicted"
    bad = {**base, "kafka.read_committed.duplicates": None, "kafka.read_committed.lost": None}
    assert judge(claim(), bad, ev).verdict == "audit-failed"
    dup = {**base, "kafka.read_committed.duplicates": 1, "kafka.read_committed.lost": 0}
    assert judge(claim(), dup, ev).verdict == "unexpected"


def test_kill_quality_warns_about_few_or_early_kills():
    kills = [{"time": t} for t in (1.0, 2.0, 3.0, 4.0, 5.0)]
    assert kill_quality(kills, first_commit_at=0.5, requested=5) == []
    few = kill_quality(kills[:2], first_commit_at=0.5, requested=12)
    assert len(few) == 1 and "only 2 kill(s) landed of 12 asked" in few[0]
    early = kill_quality(kills, first_commit_at=9.0, requested=None)
    assert len(early) == 1 and "before the group's first committed offset" in early[0]
    assert any("first committed" in w for w in kill_quality(kills, None, None))


def assigned(starts=(), slots=None, samples=()):
    """A Placer for consumers that assign: ownership from the slots, attempts from their starts."""
    from harness.checker.group_timeline import Timeline
    return Placer(Timeline(list(samples)), None, False, list(starts), slots or {"w0": [0], "w1": [1]}, {})


def untold(*times):
    """Effects whose ledger rows left worker and attempt empty."""
    return [(t, None, None) for t in times]


def test_witnesses_name_the_kill_between_two_effects_and_spread_over_kills():
    positions = {"a": (0, 0), "b": (0, 1), "c": (1, 0), "lost1": (1, 5)}
    kills = [{"worker": "w0", "attempt": 1, "pid": 11, "time": 105.0},
             {"worker": "w1", "attempt": 1, "pid": 12, "time": 106.0},
             {"worker": "w0", "attempt": 2, "pid": 13, "time": 120.0}]
    starts = [{"worker": "w0", "attempt": 1, "t": 100.0}, {"worker": "w0", "attempt": 2, "t": 105.5},
              {"worker": "w1", "attempt": 1, "t": 100.0}, {"worker": "w1", "attempt": 2, "t": 106.5}]
    # partition 1's commit passes offset 5 between +5.6 s and +5.8 s, while w1 attempt 1 runs
    samples = [{"t": 105.6, "committed": {0: 0, 1: 5}}, {"t": 105.8, "committed": {0: 0, 1: 6}}]
    dup = {"a": untold(104.0, 107.0), "b": untold(104.5, 107.5), "c": untold(105.8, 108.0)}
    seen, explained, lost, _ = witnesses(dup, ["lost1"], kills, assigned(starts, samples=samples), positions,
                                         t0=100.0)
    assert [w["id"] for w in seen] == ["a", "c", "b", "lost1"]     # one per explaining kill first, in kill order
    a = seen[0]
    assert a["worker"] == "w0" and a["partition"] == 0 and a["explained_by"] == "kill"
    assert a["effects"] == [{"t": 4.0, "worker": "w0", "attempt": 1, "by": "placed"},
                            {"t": 7.0, "worker": "w0", "attempt": 2, "by": "placed"}]
    assert a["kills"] == [{"worker": "w0", "attempt": 1, "pid": 11, "t": 5.0}]
    assert seen[1]["kills"][0]["pid"] == 12
    assert explained == {0: 2, 1: 1}
    assert seen[-1]["kind"] == "lost" and [k["pid"] for k in seen[-1]["kills"]] == [12]
    assert seen[-1]["committed_past_at"] == 5.8 and lost == {1: 1}


def test_a_kill_of_another_attempt_between_the_effects_does_not_explain_a_duplicate():
    kills = [{"worker": "w1", "attempt": 1, "pid": 12, "time": 105.0}]
    starts = [{"worker": "w0", "attempt": 1, "t": 100.0}, {"worker": "w1", "attempt": 1, "t": 100.0}]
    seen, explained, _, _ = witnesses({"a": untold(104.0, 107.0)}, [], kills, assigned(starts), {"a": (0, 0)},
                                      t0=100.0)
    assert seen[0]["kills"] == [] and seen[0]["explained_by"] == "unexplained" and explained == {}


def test_without_insert_times_a_duplicate_lists_its_slots_kills_and_explains_none():
    kills = [{"worker": "w0", "attempt": 1, "pid": 11, "time": 105.0}, {"worker": "w1", "attempt": 1, "pid": 12, "time": 106.0}]
    seen, explained, _, _ = witnesses({"a": []}, [], kills, assigned(), {"a": (1, 0)}, t0=100.0)
    assert seen[0]["effects"] == [] and [k["pid"] for k in seen[0]["kills"]] == [12] and explained == {}


def test_many_duplicates_leave_room_for_lost_witnesses():
    kills = [{"worker": "w0", "attempt": 1, "pid": 11, "time": 105.0}]
    dups = {f"d{i:02d}": untold(104.0, 106.0) for i in range(40)}
    seen, _, _, _ = witnesses(dups, ["x1", "x2"], kills, assigned(slots={"w0": [0]}), {}, t0=100.0)
    assert len(seen) == 20 and [w["id"] for w in seen if w["kind"] == "lost"] == ["x1", "x2"]


def test_slot_and_attempt_lookups():
    assert slot_of(3, {"w0": [0, 2], "w1": [1, 3]}) == "w1" and slot_of(9, {"w0": [0]}) is None
    starts = [{"worker": "w0", "attempt": 1, "t": 1.0}, {"worker": "w0", "attempt": 2, "t": 5.0}]
    assert (attempt_at(starts, "w0", 0.5), attempt_at(starts, "w0", 4.9), attempt_at(starts, "w0", 5.0)) == (None, 1, 2)


def test_the_dsn_reaches_consumers_as_one_uri_form():
    assert libpq_uri("host=127.0.0.1 port=5433 user=harness password='p@ss:w/rd' dbname=harness") == \
        "postgresql://harness:p%40ss%3Aw%2Frd@127.0.0.1:5433/harness?require_auth=scram-sha-256"
    assert libpq_uri("postgresql://u:pw@127.0.0.1:1234/db", require_scram=False) == "postgresql://u:pw@127.0.0.1:1234/db"


def test_kill_every_alone_replaces_the_random_kills_and_both_can_be_asked():
    exp = get("custom")
    only = build(RunParams("custom", worker_cmd="true", kill_every=2.0), exp)
    assert [type(f) for f in only] == [KillEvery]
    both = build(RunParams("custom", worker_cmd="true", kill_every=2.0, kills=3), exp)
    assert [type(f) for f in both] == [RandomKill, KillEvery]
    assert [type(f) for f in build(RunParams("custom", worker_cmd="true"), exp)] == [RandomKill]
    with pytest.raises(HarnessError, match="give the beat"):
        build(RunParams("custom", worker_cmd="true", faults=["kill-every"]), exp)
    assert build(RunParams("custom", worker_cmd="true", faults=["kill-every:seconds=1.5"]), exp)[0].seconds == 1.5


def test_kill_every_kills_running_workers_in_turn_on_the_beat(tmp_path):
    procs = [subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"]) for _ in range(2)]
    try:
        slots = [SimpleNamespace(name=f"w{i}", attempt=1, finished=False, proc=p) for i, p in enumerate(procs)]
        sup = SimpleNamespace(slots=slots, crash_log=tmp_path / "crash-log.jsonl")
        fault = KillEvery(0.2)
        fault.tick(sup)                                  # the first tick starts the beat: no kill yet
        assert all(p.poll() is None for p in procs)
        deadline = time.time() + 30
        while any(p.poll() is None for p in procs) and time.time() < deadline:
            fault.tick(sup)
            time.sleep(0.01)
        assert [p.wait(5) for p in procs] == [-signal.SIGKILL, -signal.SIGKILL]
        log = crashlog.read(sup.crash_log)
        assert [(c["worker"], c["point"], c["by"]) for c in log] == [("w0", "beat", "supervisor"),
                                                                    ("w1", "beat", "supervisor")]
        assert log[0]["pid"] == procs[0].pid
        assert len(fault.entries(log, [])) == 2 and RandomKill(2).entries(log, []) == []
    finally:
        for p in procs:
            p.kill()
            p.wait()


@pytest.mark.parametrize("kwargs, needle", [
    ({"experiment": "custom"}, "custom runs your consumer: give it with --worker-cmd"),
    ({"experiment": "custom", "worker_cmd": "/nonexistent/consumer --flag"}, "'/nonexistent/consumer' is not an executable"),
    ({"experiment": "custom", "worker_cmd": "python 'unclosed"}, "cannot be split into words"),
    ({"experiment": "custom", "worker_cmd": "true", "expect": "twice"}, "--expect must be one of exactly-once"),
    ({"experiment": "custom", "worker_cmd": "true", "audit_sql": "  "}, "--audit-sql is empty"),
    ({"experiment": "custom", "worker_cmd": "true", "kill_every": 0.0}, "--kill-every must be between 0.1"),
    ({"experiment": "offset-after", "expect": "exactly-once"}, "--expect applies to custom only"),
    ({"experiment": "dedupe", "worker_cmd": "true"}, "--worker-cmd applies to custom only"),
    ({"experiment": "eos", "audit_sql": "select 1, 1"}, "--audit-sql applies to custom only"),
    ({"experiment": "custom", "worker_cmd": "true", "kill_point": "any"}, "--kill-point applies to planned crashes"),
    ({"experiment": "custom", "worker_cmd": "true", "commit_every": 10}, "--commit-every does not apply to custom"),
    ({"experiment": "custom", "worker_cmd": "true", "crash_rate": 0.5}, "--crash-rate does not apply to custom"),
    ({"experiment": "custom", "worker_cmd": "true", "faults": ["planned-crash"]}, "needs kill points; custom has none"),
])
def test_custom_options_are_refused_where_they_do_not_apply(kwargs, needle):
    with pytest.raises(HarnessError) as e:
        RunParams(**kwargs).validate()
    assert needle in str(e.value)


def test_the_suite_leaves_custom_out():
    from harness.run.suite_runner import suite_experiments
    assert "custom" not in suite_experiments() and "dedupe" in suite_experiments()


def consumer_section():
    return {"command": "python my.py", "claim": "exactly-once", "claim_held": False, "audit": "ledger",
            "membership": "group", "protocol": "classic", "session_timeout_ms": None,
            "members_tied": {"client.id": 3, "first appearance": 0}, "members_unidentified": 0,
            "kills_landed": 2, "kills_by_state": {"could do damage": 1, "after its last commit": 1, "before joining": 0},
            "first_commit_seconds": 1.0, "restart_median_seconds": 6.4, "restart_max_seconds": 6.5,
            "kills": [{"worker": "w0", "attempt": 1, "pid": 4242, "t": 2.5, "by": "random", "state": "could do damage",
                       "partitions": [0], "committed": {"0": 40}, "effects_since_commit": 3, "stall_seconds": 6.5,
                       "duplicates_explained": 3, "lost_explained": 0},
                      {"worker": "w0", "attempt": 2, "pid": 4343, "t": 4.0, "by": "beat",
                       "state": "after its last commit", "partitions": [0], "committed": {"0": 100},
                       "effects_since_commit": 0, "stall_seconds": None, "duplicates_explained": 0, "lost_explained": 0}],
            "starts": [{"worker": "w0", "attempt": 1, "pid": 4242, "t": 0.0}],
            "warnings": ["only 2 kill(s) landed of 12 asked: too few to mean much"],
            "witnesses": [{"id": "pay-000007", "kind": "duplicated", "partition": 0, "worker": "w0",
                           "effects": [{"t": 2.0, "worker": "w0", "attempt": 1}, {"t": 3.0, "worker": None,
                                                                               "attempt": None,
                                                                               "owners": ["w0 attempt 2", "w1 attempt 1"]}],
                           "kills": [{"worker": "w0", "attempt": 1, "pid": 4242, "t": 2.5}], "explained_by": "kill"}]}


def test_the_consumer_section_validates_and_renders_its_witnesses():
    from harness.reporting import html, markdown
    from harness.reporting.run_report import RunReport
    from tests.unit.sample_report import sample, validate
    d = {**sample("custom", dups=1, verdict="unexpected"), "consumer": consumer_section()}
    validate(d)
    md, page = markdown.render(RunReport(d)), html.render(RunReport(d))
    for text in ("Your consumer", "exactly-once: BROKEN", "pay-000007",
                 "+2.000 s (w0 attempt 1), +3.000 s (w0 attempt 2 or w1 attempt 1)",
                 "w0 attempt 1 pid 4242 at +2.500 s", "Warning:", "too few to mean much",
                 "the group (classic protocol; session timeout set by your client, not shown by the broker)",
                 "2 (1 could do damage, 1 after its last commit, 0 before joining)"):
        assert text in md and text in page, text
    assert "| 1 | w0 | 1 | 4242 | +2.500 s | could do damage | 0: 40 | 3 | 6.500 s | 3 |" in md
    assert "| 2 | w0 | 2 | 4343 | +4.000 s | after its last commit | 0: 100 | 0 | unknown | 0 |" in md
    no_consumer = sample()
    assert "Your consumer" not in markdown.render(RunReport(no_consumer))


def test_the_environment_contract_is_what_the_launcher_sets_and_the_readme_lists(tmp_path):
    import re
    from pathlib import Path
    from harness.experiments.custom.custom_launch import ENV, CustomWorkers
    from harness.workload.naming import RunNames
    run = SimpleNamespace(params=RunParams("custom", worker_cmd="my-consumer --flag", partitions=3, workers=2),
                          names=RunNames("20261130T000000.000-custom-abcdef"), run_dir=tmp_path, positions={},
                          stack=SimpleNamespace(bootstrap_servers="127.0.0.1:9092",
                                                postgres_dsn="postgresql://u:stack@127.0.0.1:5432/db"),
                          worker_dsn="postgresql://harness_run_r1:secret@127.0.0.1:5432/db", progress=None)
    launch = CustomWorkers().prepare(run)
    env = launch.env(SimpleNamespace(index=1, name="w1", attempt=4))
    assert {k for k in env if k.startswith("HARNESS_")} >= set(ENV)
    assert (env["HARNESS_PARTITIONS"], env["HARNESS_WORKER"], env["HARNESS_ATTEMPT"]) == ("1", "w1", "4")
    assert env["HARNESS_POSTGRES_DSN"].startswith("postgresql://harness_run_r1:secret@"), "not the run's own role"
    argv = launch.command(SimpleNamespace(index=0, name="w0", attempt=1))
    assert argv[-2:] == ["my-consumer", "--flag"] and "secret" not in " ".join(argv)
    readme = (Path(__file__).resolve().parents[2] / "docs" / "your-own-consumer.md").read_text()
    section = readme.split("## Test your own consumer", 1)[1].split("\n## ", 1)[0]
    assert set(re.findall(r"^\| `(HARNESS_[A-Z_]+)` \|", section, re.M)) == set(ENV)


def test_a_custom_consumer_gets_the_runs_login_in_both_clients_names():
    import json
    from harness.experiments.custom.custom_launch import kafka_settings_env
    assert kafka_settings_env({}) == {"HARNESS_KAFKA_CONFIG": "{}", "HARNESS_KAFKA_JAVA_CONFIG": ""}
    login = {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "SCRAM-SHA-512",
             "sasl.username": "harness_run_r1", "sasl.password": 'p"w=1'}
    env = kafka_settings_env(login)
    assert json.loads(env["HARNESS_KAFKA_CONFIG"]) == login
    java = env["HARNESS_KAFKA_JAVA_CONFIG"]
    assert "security.protocol=SASL_PLAINTEXT\n" in java and "sasl.mechanism=SCRAM-SHA-512\n" in java
    assert 'ScramLoginModule required username\\="harness_run_r1" password\\="p\\\\"w\\=1";' in java
    assert kafka_settings_env({"enable.ssl.certificate.verification": "false"})["HARNESS_KAFKA_JAVA_CONFIG"] == "", \
        "no Java equivalent: left out"


def test_a_runs_workers_inherit_only_the_runs_login_never_the_harnesss(monkeypatch):
    """Every worker's environment carries the run's own Kafka login under kafka_client.ENV: the harness's own
    settings there (the super user on its SCRAM stack) would let a consumer under test log in as it."""
    import json
    from types import SimpleNamespace
    from harness.clients import kafka_client
    from harness.experiments.launch import worker_env
    boot = "127.0.0.1:9"
    monkeypatch.setenv(kafka_client.ENV, json.dumps({boot: {"sasl.username": "harness", "sasl.password": "super"},
                                                     "127.0.0.1:8": {"sasl.password": "super"}}))
    run = SimpleNamespace(stack=SimpleNamespace(bootstrap_servers=boot),
                          kafka_login={"sasl.username": "harness_run_r1", "sasl.password": "own"})
    env = worker_env(run)
    assert json.loads(env[kafka_client.ENV]) == {boot: {"sasl.username": "harness_run_r1", "sasl.password": "own"}}
    assert "super" not in json.dumps(env)
