"""--client java for the queues family: the declarations hand their runs to the Java share consumer, whose
command line carries the group's numbers and no secret, whose source names the same kill points as the Python
loops, and which is refused on a broker without share groups as the Python members are."""

import re
from pathlib import Path
from types import SimpleNamespace

import pytest

from harness.core.errors import HarnessError
from harness.experiments import REGISTRY
from harness.experiments.common_options import CLIENT
from harness.experiments.queues import SHARE_ACK_AFTER, SHARE_ACK_BEFORE, SHARE_DEDUPE, SHARE_POISON, share_java
from harness.experiments.queues.share_facts import DELIVERY_LIMIT, POLL_RECORDS, QUIET_S
from harness.experiments.queues.share_launcher import ShareWorkers
from harness.experiments.streams_jvm import SOURCES, WorkerStart

QUEUES = [SHARE_ACK_AFTER, SHARE_ACK_BEFORE, SHARE_DEDUPE, SHARE_POISON]
JAVA_SOURCE = SOURCES / "src" / "main" / "java" / "harness" / "share"


@pytest.mark.parametrize("exp", QUEUES, ids=lambda e: e.name)
def test_client_java_is_a_variant_of_each_with_the_java_launcher_judged_the_same_way(exp):
    java = exp.resolve(SimpleNamespace(client="java"))
    assert isinstance(java.launcher, share_java.ShareJavaWorkers)
    assert java.predictors == exp.predictors and java.kill_points == exp.kill_points
    python = exp.resolve(SimpleNamespace(client="python"))
    assert type(python.launcher) is ShareWorkers and CLIENT in exp.options


def test_suite_and_matrix_offer_client_java_for_the_queues_family():
    from harness.run.matrix_runner import client_experiments
    takers = set(client_experiments(list(REGISTRY)))
    assert {e.name for e in QUEUES} <= takers and {"eos", "zombie"} <= takers
    assert all(e.name in CLIENT.applies_to for e in QUEUES)


@pytest.mark.parametrize("exp", QUEUES, ids=lambda e: e.name)
def test_the_java_worker_names_every_kill_point_of_the_python_loops(exp):
    source = "\n".join(p.read_text() for p in JAVA_SOURCE.glob("*.java"))
    constants = set(re.findall(r'static final String \w+ = "([a-z-]+)";', source))
    # the gap after share-poison's ACCEPT is never struck (its payments die before the effect)
    assert set(exp.point_names()) - {"after-accept"} <= constants, exp.point_names()
    assert f'"{exp.name}"' in source


def _run(exp, **params):
    p = dict(commit_every=1)
    p.update(params)
    names = SimpleNamespace(group="g", share_group="g-share", input_topic="in", ledger_table="harness.l",
                            dedupe_table="harness.d")
    stack = SimpleNamespace(bootstrap_servers="127.0.0.1:9092", kafka_version="4.4.0")
    return SimpleNamespace(params=SimpleNamespace(**p), names=names, exp=exp, stack=stack,
                           worker_dsn="postgresql://harness_run_r1:s3cret@127.0.0.1:5432/harness",
                           crash_plan=Path("/r/plan.json"), crash_log=Path("/r/crashes.jsonl"),
                           events=Path("/r/events.jsonl"))


def _flags(cmd: list[str]) -> dict:
    args = cmd[cmd.index(share_java.MAIN_CLASS) + 1:]
    return dict(zip(args[::2], args[1::2]))


def test_the_command_line_carries_the_group_s_numbers_and_never_the_password():
    slot = SimpleNamespace(index=1, name="w1", attempt=3)
    start = WorkerStart("java", None, None, "plain")
    cmd = share_java.command(_run(SHARE_DEDUPE, commit_every=4), slot, Path("/j/share-worker.jar"), start, 40)
    f = _flags(cmd)
    assert (f["--experiment"], f["--share-group"], f["--worker"], f["--attempt"]) == ("share-dedupe", "g-share", "w1", "3")
    assert (f["--ledger"], f["--dedupe"], f["--jdbc-user"]) == ("harness.l", "harness.d", "harness_run_r1")
    assert f["--delivery-limit"] == str(DELIVERY_LIMIT) and f["--max-poll-records"] == str(POLL_RECORDS)
    assert f["--quiet-ms"] == str(round(QUIET_S * 1000)) and f["--commit-every"] == "4" and f["--total"] == "40"
    assert not any("s3cret" in a for a in cmd)
    assert "--dedupe" not in _flags(share_java.command(_run(SHARE_POISON), slot, Path("/j/x.jar"), start, 40))


def test_a_broker_without_share_groups_refuses_the_java_members_in_one_line(monkeypatch):
    from harness.stack import broker_version
    monkeypatch.setattr(broker_version, "features", lambda bootstrap: {"metadata.version": 21})
    with pytest.raises(HarnessError) as e:
        share_java.ShareJavaWorkers().check(SimpleNamespace(bootstrap_servers="127.0.0.1:1", kafka_version="3.9.1"))
    assert "4.2" in str(e.value) and "3.9.1" in str(e.value) and "\n" not in str(e.value)


def test_the_report_says_whose_share_consumer_ran_its_release_and_status():
    java = share_java.ShareJavaWorkers().said()
    assert java["version"] == share_java.client_version() and java["status"].startswith("GA")
    major, minor = (int(x) for x in java["version"].split(".")[:2])
    assert (major, minor) >= (4, 2)                              # KafkaShareConsumer's acknowledgements: GA
    assert ShareWorkers().said()["status"] == "Preview"
    from harness.reporting.run_report import RunReport
    rows = dict(RunReport({"share_consumer": java}).client_rows())
    assert rows["share consumer of the workers"] == \
        f"kafka-clients KafkaShareConsumer {java['version']} (GA (Kafka 4.2+); --client java)"


def test_share_release_stays_the_python_loop_s_alone():
    from harness.experiments.queues import SHARE_RELEASE
    assert CLIENT not in SHARE_RELEASE.options and "client=java" not in SHARE_RELEASE.variants
