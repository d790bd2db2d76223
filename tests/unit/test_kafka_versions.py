"""--kafka-version: which releases are taken, which data they may run on, and where the release goes (no
services needed: the real starts on 3.9.1 and 4.4.0 are tests/integration/test_kafka_versions.py)."""

import pytest

from harness.core import versions
from harness.core.errors import HarnessError
from harness.stack import kafka_versions, maven
from tests.conftest import harness


@pytest.fixture(autouse=True)
def nothing_requested():
    kafka_versions.request(None)
    yield
    kafka_versions.request(None)


@pytest.mark.parametrize("release", ["3.9.1", "4.0.0", "4.4.0", "10.0.12"])
def test_releases_from_3_9_on_are_taken(release):
    assert kafka_versions.check(release) == release


@pytest.mark.parametrize("release, says", [
    ("3.8.1", "3.9.0 or newer"), ("2.8.2", "3.9.0 or newer"), ("4.1", "major.minor.patch"),
    ("4.1.1-rc1", "major.minor.patch"), ("../../etc", "major.minor.patch"), ("4.1.1\n", "major.minor.patch"),
    ("", "major.minor.patch")])
def test_anything_else_is_one_line(release, says):
    with pytest.raises(HarnessError, match=says):
        kafka_versions.check(release)


def test_the_release_is_the_asked_one_else_the_recorded_one_else_the_default():
    assert kafka_versions.chosen(None, False, "/s") == versions.KAFKA_VERSION
    assert kafka_versions.chosen("3.9.1", True, "/s") == "3.9.1"                   # as the data was formatted
    assert kafka_versions.chosen("rm -rf /", False, "/s") == versions.KAFKA_VERSION  # a damaged record: ignored
    kafka_versions.request("4.1.1")
    assert kafka_versions.chosen("3.9.1", False, "/s") == "4.1.1"                  # no data yet: as asked
    with pytest.raises(HarnessError, match=r"the Kafka data under /s was written by Kafka 3.9.1; to run Kafka "
                                           r"4.1.1, run `harness down --purge` first"):
        kafka_versions.chosen("3.9.1", True, "/s")
    with pytest.raises(HarnessError, match=f"written by Kafka {versions.KAFKA_VERSION}"):
        kafka_versions.chosen(None, True, "/s")                # data of a harness that recorded no release


def test_each_release_resolves_its_own_jars_into_its_own_folder():
    pom = maven.pom_text("3.9.1")
    assert "<version>3.9.1</version>" in pom and versions.KAFKA_VERSION not in pom.replace(versions.LOG4J_VERSION, "")
    assert maven.kafka_home("3.9.1") != maven.kafka_home("4.4.0")
    assert f"<version>{versions.KAFKA_VERSION}</version>" in maven.pom_text()


def test_an_existing_cluster_takes_no_kafka_version(tmp_path):
    proc = harness("run", "offset-after", "--bootstrap-servers", "127.0.0.1:1", "--postgres-dsn", "host=x",
                   "--kafka-version", "4.4.0", env={"HARNESS_HOME": str(tmp_path)})
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert proc.stderr.strip().splitlines()[-1] == ("error: --kafka-version (or HARNESS_KAFKA_VERSION) chooses the Kafka the harness starts; an "
                                                    "existing cluster (--bootstrap-servers) runs the release it runs "
                                                    "(the report names it)")
    bad = harness("up", "--kafka-version", "3.8.0", env={"HARNESS_HOME": str(tmp_path)})
    assert bad.returncode == 2 and "3.9.0 or newer" in bad.stderr and not (tmp_path / "stack.json").exists()


def test_the_report_says_what_the_broker_says_or_unknown():
    from harness.stack import environment
    from harness.stack.stack import Stack
    st = Stack(kind="local", bootstrap_servers="127.0.0.1:1", postgres_dsn="", owned=True, kafka_version="4.4.0")
    d = environment.describe(st)
    assert d["kafka_version"] == "4.4.0" and d["kafka_metadata_version"] == "unknown"   # nothing answers there


def test_compose_names_the_image_of_the_release_and_refuses_a_named_image_of_another(tmp_path, monkeypatch):
    from harness.stack import compose_images as compose
    assert compose.chosen_images({}, release="4.1.1")["kafka"] == "apache/kafka:4.1.1"
    assert compose.chosen_images({"HARNESS_KAFKA_IMAGE": "mine:1"}, release="4.1.1")["kafka"] == "mine:1"
    monkeypatch.setenv("HARNESS_KAFKA_IMAGE", "harness-kafka:4.4.0")
    with pytest.raises(HarnessError, match=r"HARNESS_KAFKA_IMAGE names harness-kafka:4.4.0, an image of Kafka 4.4.0, "
                                           r"but this stack runs Kafka 4.1.1: unset it"):
        compose.kafka_image({}, "4.1.1")
    monkeypatch.setenv("HARNESS_KAFKA_IMAGE", "registry.local:5000/kafka")     # a port is no release tag
    compose.kafka_image({}, "4.1.1")
    monkeypatch.delenv("HARNESS_KAFKA_IMAGE")
    env = {"HARNESS_KAFKA_IMAGE": "harness-kafka:4.4.0"}                      # recorded for another release
    compose.kafka_image(env, "4.1.1")
    assert "HARNESS_KAFKA_IMAGE" not in env


def test_compose_remembers_the_release_that_wrote_its_volumes_and_reads_it_safely(tmp_path):
    import os
    from harness.stack import compose_images as compose
    assert compose.recorded_release(tmp_path) is None
    (tmp_path / compose.RELEASE_FILE).write_text("3.9.1\n")
    assert compose.recorded_release(tmp_path) == "3.9.1"
    (tmp_path / compose.RELEASE_FILE).write_text("$(reboot)\n")
    assert compose.recorded_release(tmp_path) is None
    (tmp_path / compose.RELEASE_FILE).unlink()
    os.mkfifo(tmp_path / compose.RELEASE_FILE)                  # never waited on
    assert compose.recorded_release(tmp_path) is None


def test_the_suites_child_runs_never_inherit_the_release(monkeypatch):
    """HARNESS_KAFKA_VERSION chose the suite's stack; its child runs get that stack's addresses and no
    release (with both, every child was refused as if the stack were an existing cluster)."""
    from harness.stack.stack import Stack
    from harness.run.suite_runner import run_env
    monkeypatch.setenv("HARNESS_KAFKA_VERSION", "3.9.1")
    env = run_env(Stack(kind="local", bootstrap_servers="127.0.0.1:19092", postgres_dsn="x", owned=True))
    assert "HARNESS_KAFKA_VERSION" not in env and env["HARNESS_BOOTSTRAP_SERVERS"] == "127.0.0.1:19092"


def test_a_nodes_release_is_written_beside_its_data_and_read_safely(tmp_path):
    import os
    from harness.stack.local_kafka import RELEASE_FILE, LocalKafka
    k = LocalKafka(tmp_path, 2)
    assert k.release() is None
    k.home.mkdir(parents=True)
    (k.home / RELEASE_FILE).write_text("3.9.1\n")
    assert k.release() == "3.9.1"
    (k.home / RELEASE_FILE).unlink()
    os.mkfifo(k.home / RELEASE_FILE)
    assert k.release() is None


def test_a_report_names_the_compose_release_only_when_its_image_is_that_releases(tmp_path):
    from harness.stack import compose_images
    (tmp_path / compose_images.RELEASE_FILE).write_text("4.4.0\n")
    assert compose_images.reported_release(tmp_path, {}) == "4.4.0"
    assert compose_images.reported_release(tmp_path, {"HARNESS_KAFKA_IMAGE": "harness-kafka:4.4.0"}) == "4.4.0"
    assert compose_images.reported_release(tmp_path, {"HARNESS_KAFKA_IMAGE": "mykafka:latest"}) == \
        "unknown (image mykafka:latest)"


def test_compare_says_unknown_rather_than_differs_when_one_side_was_not_measured():
    from types import SimpleNamespace
    from harness.reporting.comparison import _env_warnings
    a = SimpleNamespace(environment={"kafka_version": "4.4.0", "kafka_metadata_version": "4.4-IV2"})
    b = SimpleNamespace(environment={"kafka_version": "4.4.0"})
    a.values = b.values = lambda: []
    assert _env_warnings([a, b], ["a", "b"]) == ["kafka_metadata_version is unknown in b"]


def test_compare_takes_an_unknown_image_release_for_unknown_not_for_another_release():
    from types import SimpleNamespace
    from harness.reporting.comparison import _env_warnings
    a = SimpleNamespace(environment={"kafka_version": "4.1.1"})
    b = SimpleNamespace(environment={"kafka_version": "unknown (image mykafka:latest)"})
    c = SimpleNamespace(environment={"kafka_version": "4.4.0"})
    for t in (a, b, c):
        t.values = lambda: []
    assert _env_warnings([a, b], ["a", "b"]) == ["kafka_version is unknown in b"]
    assert _env_warnings([a, c], ["a", "c"])[0].startswith("kafka_version differs")
