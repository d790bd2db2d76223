"""--fault rolling-upgrade on the compose cluster without an engine: which image holds the `to` release, the
one-line refusals (no such image, another release, an image of no known release), each container stopped by
SIGTERM and recreated on that image by `docker compose up --no-deps --force-recreate` of its service alone,
and the state folder then naming the new release and image (a later `up` starts every node on it)."""

import json
import subprocess
from types import SimpleNamespace

import pytest

from harness.core.errors import HarnessError
from harness.faults.upgrade import RollingUpgrade
from harness.stack import compose
from harness.stack.compose_brokers import ComposeBrokers
from harness.stack.compose_images import RELEASE_FILE
from harness.stack.stack import Stack
from tests.unit.test_broker_faults import drive, fake_sup
from tests.unit.test_rolling_upgrade import UpgradeHands


def state(tmp_path, monkeypatch, image="harness-kafka:3.9.1"):
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HARNESS_HOME", str(home))
    monkeypatch.delenv("HARNESS_KAFKA_IMAGE", raising=False)
    (home / "stack.json").write_text(json.dumps({"kind": "compose", "variant": "cluster", "proxies": False,
                                                 "auth": "none", "images": {"HARNESS_KAFKA_IMAGE": image} if image
                                                 else {}}))
    (home / RELEASE_FILE).write_text("3.9.1\n")
    return home


class Container:
    def __init__(self, name, log):
        self.name, self.log, self.status = name, log, "running"

    def reload(self):
        pass

    def kill(self, signal="SIGKILL"):
        self.log.append((signal, self.name))
        self.status = "exited"


class Engine:
    """What docker.DockerClient offers that the upgrade uses: containers.list and images.get."""

    def __init__(self, images=("harness-kafka:3.9.1", "harness-kafka:4.4.0")):
        self.log, self.have = [], set(images)
        self.by_service = {f"kafka-{n}": Container(f"harness-kafka-{n}-1", self.log) for n in (1, 2, 3)}
        self.containers = SimpleNamespace(list=lambda all=False, filters=None: [
            self.by_service[dict(x.split("=", 1) for x in filters["label"])["com.docker.compose.service"]]])
        self.images = SimpleNamespace(get=self._get)

    def _get(self, image):
        if image not in self.have:
            raise LookupError(f"No such image: {image}")
        return image


def compose_stack(release="3.9.1"):
    return Stack(kind="compose", bootstrap_servers="127.0.0.1:29092", postgres_dsn="", owned=True, brokers=3,
                 kafka_version=release)


def test_the_to_image_is_the_same_kind_as_the_from_one_and_an_unknown_one_is_refused(tmp_path, monkeypatch):
    state(tmp_path, monkeypatch)
    assert compose.upgrade_image("3.9.1", "4.4.0") == "harness-kafka:4.4.0"
    (tmp_path / "home" / "stack.json").write_text(json.dumps({"kind": "compose", "images": {
        "HARNESS_KAFKA_IMAGE": "apache/kafka:3.9.1"}}))
    assert compose.upgrade_image("3.9.1", "4.4.0") == "apache/kafka:4.4.0"
    (tmp_path / "home" / "stack.json").write_text(json.dumps({"kind": "compose", "images": {
        "HARNESS_KAFKA_IMAGE": "registry.example:5000/kafka:latest"}}))
    with pytest.raises(HarnessError, match="not one tagged with Kafka 3.9.1"):
        compose.upgrade_image("3.9.1", "4.4.0")


def test_the_compose_cluster_takes_it_only_on_the_from_release_with_the_to_image_on_the_engine(tmp_path, monkeypatch):
    state(tmp_path, monkeypatch)
    f = RollingUpgrade("3.9.1", "4.4.0")
    with pytest.raises(HarnessError) as e:
        f.check_stack(compose_stack("4.4.0"), Engine())
    assert "`harness up --stack compose --brokers 3 --kafka-version 3.9.1`" in str(e.value)
    with pytest.raises(HarnessError) as e:
        f.check_stack(compose_stack(), Engine(images=("harness-kafka:3.9.1",)))
    assert str(e.value) == ("--fault rolling-upgrade: the Docker engine has no image harness-kafka:4.4.0 to upgrade "
                            "the compose cluster to; make it first (`HARNESS_KAFKA_VERSION=4.4.0 bash "
                            "scripts/build-images.sh --only kafka`)")
    f.check_stack(compose_stack(), Engine())
    assert f.image == "harness-kafka:4.4.0" and isinstance(f.hands, ComposeBrokers)


def test_a_node_is_stopped_by_sigterm_and_recreated_on_the_to_image_alone(tmp_path, monkeypatch):
    home = state(tmp_path, monkeypatch)
    ran = []

    def run(cmd, env=None, **kwargs):
        ran.append((cmd, env))
        return subprocess.CompletedProcess(cmd, 0, "", "")

    monkeypatch.setattr(compose.subprocess, "run", run)
    engine = Engine()
    hands = ComposeBrokers(engine)
    assert hands.stop(2) == "container harness-kafka-2-1" and engine.log == [("SIGTERM", "harness-kafka-2-1")]
    assert hands.stop(2) is None and not hands.running(2)          # already ended: nothing sent again
    said = hands.start(2, release="4.4.0", image="harness-kafka:4.4.0")
    assert said == "container of kafka-2 recreated on harness-kafka:4.4.0"
    (cmd, env), = ran
    assert cmd[:4] == ["docker", "compose", "-p", "harness"] and "docker-compose.cluster.yml" in " ".join(cmd)
    assert cmd[-5:] == ["up", "-d", "--no-deps", "--force-recreate", "kafka-2"]
    assert env["HARNESS_KAFKA_IMAGE"] == "harness-kafka:4.4.0" and env["HARNESS_KAFKA_VERSION"] == "4.4.0"
    # from now on the state folder says the volumes hold 4.4.0's data, on that image, the rest kept
    assert (home / RELEASE_FILE).read_text() == "4.4.0\n"
    rec = json.loads((home / "stack.json").read_text())
    assert rec["images"] == {"HARNESS_KAFKA_IMAGE": "harness-kafka:4.4.0"} and rec["variant"] == "cluster"
    assert compose.reported_release(home, rec["images"]) == "4.4.0"


def test_a_recreate_compose_refuses_is_one_line_and_the_state_folder_is_left_as_it_was(tmp_path, monkeypatch):
    home = state(tmp_path, monkeypatch)
    monkeypatch.setattr(compose.subprocess, "run", lambda cmd, **kw: subprocess.CompletedProcess(
        cmd, 1, "", "Error response from daemon: No such image: harness-kafka:4.4.0\n"))
    with pytest.raises(HarnessError, match="docker compose could not recreate kafka-1 on harness-kafka:4.4.0"):
        compose.recreate("kafka-1", "harness-kafka:4.4.0", "4.4.0")
    assert (home / RELEASE_FILE).read_text() == "3.9.1\n"
    assert json.loads((home / "stack.json").read_text())["images"] == {"HARNESS_KAFKA_IMAGE": "harness-kafka:3.9.1"}


class ComposeUpgradeHands(UpgradeHands):
    def start(self, node, release=None, image=None):
        self.calls.append(("start", node, release, image))
        self.down.discard(node)
        self.looks = 0
        return f"container of kafka-{node} recreated on {image}"


def test_on_compose_each_node_in_turn_is_recreated_on_the_image_and_no_jars_are_resolved():
    f = RollingUpgrade("3.9.1", "4.4.0", "end", every=1.0, seed=3)
    f.hands, f.image = ComposeUpgradeHands(), "harness-kafka:4.4.0"
    f.run = SimpleNamespace(stack=SimpleNamespace(bootstrap_servers="127.0.0.1:1"))
    f._start_finalize = lambda: setattr(f, "state", "finalizing")
    drive(f, fake_sup(), seconds=60)
    assert f.hands.calls == [c for n in (1, 2, 3) for c in (("stop", n), ("start", n, "4.4.0", "harness-kafka:4.4.0"))]
