"""Which images `harness up --stack compose` uses, with a stand-in Docker SDK client: the official ones
when the engine has or can pull them, local builds when asked or when they cannot be had, and never a
silent substitute for an image the user named."""

from types import SimpleNamespace

import pytest

from harness.core.errors import HarnessError
from harness.stack import compose_images as compose

OFFICIAL = compose.chosen_images({})


class FakeImages:
    def __init__(self, have=(), pullable=()):
        self.have, self.pullable, self.pulled = set(have), set(pullable), []

    def get(self, name):
        if name not in self.have:
            raise LookupError(f"No such image: {name}")

    def pull(self, name):
        self.pulled.append(name)
        if name not in self.pullable:
            raise OSError(f"Get \"https://registry/v2/\": dial tcp: lookup registry: no such host ({name})")
        self.have.add(name)


def client(**kw):
    return SimpleNamespace(images=FakeImages(**kw))


@pytest.fixture
def builds(monkeypatch):
    calls = []
    built = {"kafka": "harness-kafka:x", "postgres": "harness-postgres:15"}     # a builder without Go: no Toxiproxy

    def build(env, only=compose.NEEDED):
        calls.append((env, tuple(only)))
        return {compose.IMAGE_VARS[svc][0]: built[svc] for svc in only if svc in built}
    monkeypatch.setattr(compose, "build_images", build)
    return calls


def test_the_official_images_when_the_engine_has_them(builds):
    said = []
    assert compose.ensure_images({}, log=said.append, client=client(have=OFFICIAL.values())) == {}
    assert not builds and said == [f"images: kafka {OFFICIAL['kafka']}, postgres {OFFICIAL['postgres']}"]


def test_images_that_cannot_be_pulled_are_built_here_saying_so(builds):
    said = []
    got = compose.ensure_images({}, log=said.append, client=client(have=[OFFICIAL["postgres"]]))
    assert got == {"HARNESS_KAFKA_IMAGE": "harness-kafka:x"}          # only what could not be had
    assert [only for _, only in builds] == [("kafka",)]
    assert said[0].startswith(f"cannot pull {OFFICIAL['kafka']} (") and "building kafka here instead" in said[0]
    assert said[-1] == f"images: kafka harness-kafka:x, postgres {OFFICIAL['postgres']} (kafka built here)"


def test_an_image_the_user_named_is_never_replaced(builds):
    env = {"HARNESS_KAFKA_IMAGE": "mine/kafka:1"}
    with pytest.raises(HarnessError, match=r"the image mine/kafka:1 \(set in HARNESS_KAFKA_IMAGE\) is not on the "
                                           r"Docker engine and cannot be pulled"):
        compose.ensure_images(env, log=lambda m: None, client=client(have=[OFFICIAL["postgres"]]))
    assert not builds


def test_build_images_builds_without_asking_a_registry(builds):
    c = client()
    compose.ensure_images({}, build=True, log=lambda m: None, client=c)
    assert [only for _, only in builds] == [("kafka", "postgres")] and c.images.pulled == []


def test_a_later_compose_call_reuses_the_images_the_stack_was_started_with(tmp_path, monkeypatch):
    import json
    (tmp_path / "stack.json").write_text(json.dumps({"kind": "compose", "variant": "single", "images": {
        "HARNESS_KAFKA_IMAGE": "harness-kafka:x", "HARNESS_POSTGRES_IMAGE": "harness-postgres:15", "PATH": "/evil"}}))
    (tmp_path / "compose.password").write_text("pw\n")
    monkeypatch.delenv("HARNESS_KAFKA_IMAGE", raising=False)
    monkeypatch.delenv("HARNESS_PG_PASSWORD", raising=False)
    from harness.stack import compose as stack_compose
    env = stack_compose._env(tmp_path)
    assert env["HARNESS_KAFKA_IMAGE"] == "harness-kafka:x" and env["PATH"] != "/evil"
    monkeypatch.setenv("HARNESS_KAFKA_IMAGE", "mine/kafka:1")       # the user's own choice wins
    assert stack_compose._env(tmp_path)["HARNESS_KAFKA_IMAGE"] == "mine/kafka:1"


def test_commands_follow_the_kind_of_stack_the_state_folder_holds(tmp_path, monkeypatch):
    """`harness up --stack compose --brokers 3`, then `harness run ... --fault broker-kill` without --stack:
    the run took the local default and said the stack had 1 broker."""
    import json
    from harness.cli.commands.stack_options import recorded_stack as _recorded_stack
    monkeypatch.setenv("HARNESS_HOME", str(tmp_path))
    assert _recorded_stack() == "local"
    (tmp_path / "stack.json").write_text(json.dumps({"kind": "compose", "variant": "cluster"}))
    assert _recorded_stack() == "compose"
    (tmp_path / "stack.json").write_text(json.dumps({"kind": "local", "brokers": 3}))
    assert _recorded_stack() == "local"


def test_toxiproxys_image_is_needed_only_with_the_proxies(builds):
    official = compose.chosen_images({}, services=(*compose.NEEDED, "toxiproxy"))
    c = client(have=OFFICIAL.values())            # no Toxiproxy image, none pullable
    assert compose.ensure_images({}, log=lambda m: None, client=c) == {} and not builds
    said = []
    with pytest.raises(KeyError):                 # the stand-in builder had no Go (the real one says why)
        compose.ensure_images({}, log=said.append, client=c, services=(*compose.NEEDED, "toxiproxy"))
    assert said[0].startswith(f"cannot pull {official['toxiproxy']} (") and builds[-1][1] == ("toxiproxy",)


def test_a_missing_image_never_replaces_images_the_user_named(builds):
    """Only Toxiproxy's image is missing: only it is built; the Kafka and PostgreSQL images the user named
    stay as named (a rebuild of everything would replace them under the same volumes)."""
    env = {"HARNESS_KAFKA_IMAGE": "mine/kafka:1", "HARNESS_POSTGRES_IMAGE": "mine/pg:1"}
    c = client(have=["mine/kafka:1", "mine/pg:1"])
    compose.build_images = lambda env, only: builds.append((env, tuple(only))) or {
        "HARNESS_TOXIPROXY_IMAGE": "harness-toxiproxy:2.5.0", "HARNESS_KAFKA_IMAGE": "harness-kafka:x"}
    got = compose.ensure_images(env, log=lambda m: None, client=c, services=(*compose.NEEDED, "toxiproxy"))
    assert got == {"HARNESS_TOXIPROXY_IMAGE": "harness-toxiproxy:2.5.0"} and builds[-1][1] == ("toxiproxy",)
    got = compose.ensure_images(env, build=True, log=lambda m: None, client=c,
                                services=(*compose.NEEDED, "toxiproxy"))
    assert got == {"HARNESS_TOXIPROXY_IMAGE": "harness-toxiproxy:2.5.0"}      # --build-images: the unnamed only


def test_only_the_cluster_has_proxies_and_its_down_always_removes_them(tmp_path, monkeypatch):
    import json
    from harness.stack import compose as stack_compose
    monkeypatch.setenv("HARNESS_HOME", str(tmp_path))
    with pytest.raises(HarnessError, match="--proxies puts Toxiproxy in front of the compose cluster's nodes: add "
                                           "--brokers 3"):
        stack_compose.proxies_for("single", True)
    assert stack_compose.proxies_for("cluster", None) is False
    (tmp_path / "stack.json").write_text(json.dumps({"kind": "compose", "variant": "cluster", "proxies": True}))
    assert stack_compose.proxies_for("cluster", None) is True and stack_compose.proxies_for("single", None) is False
    assert stack_compose.proxies_for("cluster", False) is False
    st = stack_compose._stack(tmp_path, "cluster", True)
    assert st.bootstrap_servers == "127.0.0.1:29192,127.0.0.1:29193,127.0.0.1:29194"
    down = stack_compose._down_command("cluster", False)
    assert str(stack_compose.PROXIES_FILE) in down and str(stack_compose.PROXIES_FILE) not in stack_compose._down_command("single", True)
