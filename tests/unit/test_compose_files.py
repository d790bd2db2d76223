"""Static checks of the Docker Compose files (no Docker engine needed).

The compose stack must run exactly the Kafka pinned in harness/core/versions.py,
publish its ports on 127.0.0.1 only, have a healthcheck on every service (so
`docker compose up --wait` means "ready"), and take the PostgreSQL password
from the environment. Where the docker client and its compose plugin exist,
`docker compose config -q` also validates the files against the Compose spec;
that needs no engine either.
"""

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from harness.core import versions
from harness.stack import compose as compose_stack

ROOT = Path(__file__).resolve().parents[2]
SINGLE = ROOT / "compose" / "docker-compose.yml"
CLUSTER = ROOT / "compose" / "docker-compose.cluster.yml"
FILES = {"single": SINGLE, "cluster": CLUSTER}
CLUSTER_KAFKA_PORTS = [29092, 29093, 29094]
# ${HARNESS_PG_PASSWORD} or ${HARNESS_PG_PASSWORD:?message}; never a default value.
PASSWORD_REF = re.compile(r"^\$\{HARNESS_PG_PASSWORD(:?\?[^}]*)?\}$")
# image: ${HARNESS_KAFKA_IMAGE:-apache/kafka:4.1.1}: a variable with the official image as its default.
IMAGE_REF = re.compile(r"^\$\{(?P<var>[A-Z_]+):-(?P<default>[^}]+)\}$")
IMAGE_VARS = {"kafka": "HARNESS_KAFKA_IMAGE", "postgres": "HARNESS_POSTGRES_IMAGE"}


def load(path: Path) -> dict:
    doc = yaml.safe_load(path.read_text())
    assert isinstance(doc, dict) and isinstance(doc.get("services"), dict), f"{path.name}: no services"
    return doc


def image_ref(svc: dict) -> tuple[str | None, str]:
    """(variable, default image) for `${VAR:-image}`; (None, image) for a literal image."""
    image = str(svc.get("image", ""))
    m = IMAGE_REF.match(image)
    return (m["var"], m["default"]) if m else (None, image)


def kafka_services(doc: dict) -> dict:
    return {name: svc for name, svc in doc["services"].items()
            if image_ref(svc)[1].startswith("apache/kafka")}


def postgres_service(doc: dict) -> dict:
    found = [svc for svc in doc["services"].values() if image_ref(svc)[1].startswith("postgres")]
    assert len(found) == 1, "expected exactly one PostgreSQL service"
    return found[0]


def environment(svc: dict) -> dict:
    env = svc.get("environment") or {}
    if isinstance(env, list):  # the KEY=VALUE list form
        env = dict(item.split("=", 1) if "=" in item else (item, None) for item in env)
    return env


def published(svc: dict) -> list[tuple[str | None, int, int]]:
    """(host_ip, host_port, container_port) for every published port, short or long syntax."""
    out = []
    for p in svc.get("ports") or []:
        if isinstance(p, dict):
            out.append((p.get("host_ip"), int(p["published"]), int(p["target"])))
            continue
        spec = str(p).split("/")[0]
        parts = spec.rsplit(":", 2)
        if len(parts) == 3:
            out.append((parts[0], int(parts[1]), int(parts[2])))
        elif len(parts) == 2:
            out.append((None, int(parts[0]), int(parts[1])))
        else:
            out.append((None, int(parts[0]), int(parts[0])))
    return out


def advertised(env: dict) -> dict[str, str]:
    """KAFKA_ADVERTISED_LISTENERS as {listener name: host:port}."""
    return dict(item.split("://", 1) for item in str(env["KAFKA_ADVERTISED_LISTENERS"]).split(","))


@pytest.fixture(params=sorted(FILES), ids=sorted(FILES))
def compose_doc(request) -> tuple[str, dict]:
    return request.param, load(FILES[request.param])


def test_every_published_port_is_bound_to_loopback(compose_doc):
    name, doc = compose_doc
    seen = 0
    for svc_name, svc in doc["services"].items():
        for host_ip, host_port, _ in published(svc):
            seen += 1
            assert host_ip == "127.0.0.1", f"{name}: {svc_name} publishes port {host_port} on {host_ip or 'all interfaces'}"
    assert seen, f"{name}: publishes no ports at all"


def test_every_service_has_a_healthcheck(compose_doc):
    name, doc = compose_doc
    for svc_name, svc in doc["services"].items():
        hc = svc.get("healthcheck")
        assert isinstance(hc, dict) and not hc.get("disable"), f"{name}: {svc_name} has no healthcheck"
        test = hc.get("test")
        assert test and test not in (["NONE"], "NONE"), f"{name}: {svc_name} has an empty healthcheck"
        for key in ("interval", "retries", "start_period"):
            assert key in hc, f"{name}: {svc_name}'s healthcheck sets no {key}"
    for svc_name, svc in kafka_services(doc).items():
        cmd = " ".join(svc["healthcheck"]["test"]) if isinstance(svc["healthcheck"]["test"], list) \
            else svc["healthcheck"]["test"]
        assert re.search(r"/opt/kafka/bin/kafka-(broker-api-versions|topics|metadata-quorum)\.sh", cmd), \
            f"{name}: {svc_name}'s healthcheck does not talk to the broker: {cmd}"
    pg_cmd = " ".join(postgres_service(doc)["healthcheck"]["test"])
    assert "pg_isready" in pg_cmd


def test_images_match_the_pinned_versions(compose_doc):
    name, doc = compose_doc
    kafkas = kafka_services(doc)
    assert kafkas, f"{name}: no apache/kafka service"
    for svc_name, svc in kafkas.items():
        var, image = image_ref(svc)
        assert var == IMAGE_VARS["kafka"], f"{name}: {svc_name}'s image is not taken from ${IMAGE_VARS['kafka']}"
        repo, _, tag = image.partition(":")
        assert repo == "apache/kafka"
        assert tag == versions.KAFKA_VERSION, \
            f"{name}: {svc_name} runs Kafka {tag!r}, harness/core/versions.py pins {versions.KAFKA_VERSION!r}"
        assert image == versions.KAFKA_IMAGE
    var, image = image_ref(postgres_service(doc))
    assert var == IMAGE_VARS["postgres"], f"{name}: the PostgreSQL image is not taken from ${IMAGE_VARS['postgres']}"
    assert image == versions.POSTGRES_IMAGE


def test_postgres_password_comes_from_the_environment(compose_doc):
    name, doc = compose_doc
    env = environment(postgres_service(doc))
    assert env.get("POSTGRES_USER") == "harness"
    assert env.get("POSTGRES_DB") == "harness"
    password = str(env.get("POSTGRES_PASSWORD"))
    assert PASSWORD_REF.match(password), f"{name}: POSTGRES_PASSWORD is {password!r}, not taken from $HARNESS_PG_PASSWORD"
    # No literal password anywhere else either.
    for svc_name, svc in doc["services"].items():
        for key, value in environment(svc).items():
            if "PASSWORD" in key.upper():
                assert PASSWORD_REF.match(str(value)), f"{name}: {svc_name} sets {key} literally"


def test_postgres_is_where_the_harness_expects_it(compose_doc):
    name, doc = compose_doc
    ports = published(postgres_service(doc))
    assert ("127.0.0.1", compose_stack.POSTGRES_PORT, 5432) in ports


def test_single_node_kafka():
    doc = load(SINGLE)
    kafkas = kafka_services(doc)
    assert len(kafkas) == 1
    (svc,) = kafkas.values()
    env = environment(svc)
    assert set(str(env["KAFKA_PROCESS_ROLES"]).split(",")) == {"broker", "controller"}
    assert str(env["CLUSTER_ID"])
    port = compose_stack.KAFKA_PORT
    assert published(svc) == [("127.0.0.1", port, port)]
    assert f"127.0.0.1:{port}" in advertised(env).values() or f"localhost:{port}" in advertised(env).values()
    for key in ("KAFKA_OFFSETS_TOPIC_REPLICATION_FACTOR", "KAFKA_TRANSACTION_STATE_LOG_REPLICATION_FACTOR",
                "KAFKA_TRANSACTION_STATE_LOG_MIN_ISR", "KAFKA_SHARE_COORDINATOR_STATE_TOPIC_REPLICATION_FACTOR"):
        assert int(env[key]) == 1, key
    assert int(env["KAFKA_GROUP_INITIAL_REBALANCE_DELAY_MS"]) == 0
    assert int(env["KAFKA_GROUP_MIN_SESSION_TIMEOUT_MS"]) <= 500
    assert str(env["KAFKA_AUTO_CREATE_TOPICS_ENABLE"]).lower() == "false"


CRASH_TIMINGS = ("group.initial.rebalance.delay.ms", "group.min.session.timeout.ms",
                 "group.consumer.min.session.timeout.ms", "group.consumer.session.timeout.ms",
                 "group.consumer.heartbeat.interval.ms", "group.consumer.min.heartbeat.interval.ms",
                 "transaction.abort.timed.out.transaction.cleanup.interval.ms", "auto.create.topics.enable")


@pytest.mark.parametrize("prop", CRASH_TIMINGS)
def test_crash_timings_match_the_local_stack(compose_doc, prop):
    """An experiment must behave the same on `--stack local` and `--stack compose`."""
    from harness.stack import local_kafka
    if prop not in local_kafka.SERVER_SETTINGS:
        pytest.skip(f"the local stack no longer sets {prop}")
    name, doc = compose_doc
    env_name = "KAFKA_" + prop.replace("_", "__").replace(".", "_").upper()
    for svc_name, svc in kafka_services(doc).items():
        value = environment(svc).get(env_name)
        assert str(value).lower() == str(local_kafka.SERVER_SETTINGS[prop]).lower(), \
            f"{name}: {svc_name} sets {env_name}={value!r}, the local stack {prop}={local_kafka.SERVER_SETTINGS[prop]!r}"


def test_cluster_has_three_kraft_nodes():
    doc = load(CLUSTER)
    kafkas = kafka_services(doc)
    assert len(kafkas) == 3, f"expected 3 Kafka services, found {sorted(kafkas)}"
    envs = [environment(svc) for svc in kafkas.values()]
    assert sorted(int(e["KAFKA_NODE_ID"]) for e in envs) == [1, 2, 3]
    assert len({e["KAFKA_CONTROLLER_QUORUM_VOTERS"] for e in envs}) == 1, "nodes disagree on the quorum"
    voters = str(envs[0]["KAFKA_CONTROLLER_QUORUM_VOTERS"]).split(",")
    assert sorted(int(v.split("@")[0]) for v in voters) == [1, 2, 3]
    assert len({e["CLUSTER_ID"] for e in envs}) == 1, "nodes disagree on the cluster id"
    for e in envs:
        assert set(str(e["KAFKA_PROCESS_ROLES"]).split(",")) == {"broker", "controller"}
        for key in ("KAFKA_OFFSETS_TOPIC_REPLICATION_FACTOR", "KAFKA_TRANSACTION_STATE_LOG_REPLICATION_FACTOR",
                    "KAFKA_SHARE_COORDINATOR_STATE_TOPIC_REPLICATION_FACTOR", "KAFKA_DEFAULT_REPLICATION_FACTOR"):
            assert int(e[key]) == 3, key
        for key in ("KAFKA_TRANSACTION_STATE_LOG_MIN_ISR", "KAFKA_SHARE_COORDINATOR_STATE_TOPIC_MIN_ISR",
                    "KAFKA_MIN_INSYNC_REPLICAS"):
            assert int(e[key]) == 2, key
    host_ports = []
    for svc_name, svc in kafkas.items():
        ports = published(svc)
        assert len(ports) == 1, svc_name
        _, host_port, container_port = ports[0]
        assert host_port == container_port, f"{svc_name}: advertised port must match inside and out"
        assert f"127.0.0.1:{host_port}" in advertised(environment(svc)).values(), \
            f"{svc_name} does not advertise 127.0.0.1:{host_port}"
        host_ports.append(host_port)
    assert sorted(host_ports) == CLUSTER_KAFKA_PORTS


# --- Validation by the docker client itself (optional: skipped without it) ---

NO_PLUGIN = ("is not a docker command", "unknown command", "unknown shorthand flag: 'f'")
NO_ENGINE = ("cannot connect to the docker daemon", "is the docker daemon running", "error during connect")


def _compose(path: Path, env: dict) -> subprocess.CompletedProcess:
    docker = shutil.which("docker")
    if docker is None:
        pytest.skip("the docker client is not on PATH")
    version = subprocess.run([docker, "compose", "version"], capture_output=True, text=True, timeout=60)
    out = (version.stdout + version.stderr).lower()
    if version.returncode != 0 and any(s in out for s in NO_PLUGIN):
        pytest.skip("the docker client has no compose plugin (`docker compose` is an unknown command)")
    proc = subprocess.run([docker, "compose", "-f", str(path), "config", "-q"], cwd=ROOT,
                          env=env, capture_output=True, text=True, timeout=120)
    if proc.returncode != 0 and any(s in (proc.stdout + proc.stderr).lower() for s in NO_ENGINE):
        pytest.skip(f"docker compose wants a Docker engine here: {(proc.stdout + proc.stderr).strip()[:200]}")
    return proc


@pytest.mark.parametrize("name", sorted(FILES))
def test_docker_compose_config_accepts_the_file(name):
    env = {**os.environ, "HARNESS_PG_PASSWORD": "dummy"}
    proc = _compose(FILES[name], env)
    assert proc.returncode == 0, f"docker compose config rejected {name}:\n{proc.stdout}{proc.stderr}"


@pytest.mark.parametrize("name", sorted(FILES))
def test_docker_compose_config_requires_the_password(name):
    env = {k: v for k, v in os.environ.items() if k != "HARNESS_PG_PASSWORD"}
    proc = _compose(FILES[name], env)
    assert proc.returncode != 0, f"{name} starts without HARNESS_PG_PASSWORD"
    assert "HARNESS_PG_PASSWORD" in proc.stdout + proc.stderr


PROXIES = ROOT / "compose" / "docker-compose.proxies.yml"


def test_the_proxies_override_puts_one_proxy_per_node_where_the_harness_expects_it():
    """Each node advertises its proxy's host port on its PROXIED listener, Toxiproxy listens there (on
    127.0.0.1 only) and forwards to that listener; its image is the pinned version's."""
    import json
    doc = yaml.safe_load(PROXIES.read_text())
    cluster = load(CLUSTER)
    proxy = doc["services"]["toxiproxy"]
    var, image = image_ref(proxy)
    assert (var, image) == ("HARNESS_TOXIPROXY_IMAGE", versions.TOXIPROXY_IMAGE)
    assert versions.TOXIPROXY_IMAGE.endswith(":" + versions.TOXIPROXY_VERSION)
    pub = published(proxy)
    assert all(ip == "127.0.0.1" for ip, _, _ in pub)
    assert (("127.0.0.1", compose_stack.TOXIPROXY_API_PORT, 8474)) in pub
    config = json.loads(doc["configs"]["toxiproxy-proxies"]["content"])
    assert [p["name"] for p in config] == ["kafka-1", "kafka-2", "kafka-3"]
    for n, port in enumerate(compose_stack.CLUSTER_PROXY_PORTS, 1):
        env = {**environment(cluster["services"][f"kafka-{n}"]), **environment(doc["services"][f"kafka-{n}"])}
        assert advertised(env)["PROXIED"] == f"127.0.0.1:{port}"
        assert f"PROXIED://:{compose_stack.PROXIED_PORT}" in env["KAFKA_LISTENERS"]
        assert "PROXIED:PLAINTEXT" in env["KAFKA_LISTENER_SECURITY_PROTOCOL_MAP"]
        assert advertised(env)["EXTERNAL"] == advertised(environment(cluster["services"][f"kafka-{n}"]))["EXTERNAL"]
        assert ("127.0.0.1", port, port) in pub
        assert config[n - 1]["listen"] == f"0.0.0.0:{port}"
        assert config[n - 1]["upstream"] == f"kafka-{n}:{compose_stack.PROXIED_PORT}"
    assert proxy["healthcheck"]["test"] == ["CMD", "/toxiproxy-cli", "list"]      # no shell in the official image


def test_the_toxiproxy_installer_builds_the_pinned_version():
    text = (ROOT / ".ci" / "install-toxiproxy.sh").read_text()
    assert f'TOXIPROXY_VERSION="${{TOXIPROXY_VERSION:-{versions.TOXIPROXY_VERSION}}}"' in text


def test_docker_compose_config_accepts_the_cluster_with_its_proxies():
    env = {**os.environ, "HARNESS_PG_PASSWORD": "dummy"}
    docker = shutil.which("docker")
    if docker is None:
        pytest.skip("no docker client")
    proc = subprocess.run([docker, "compose", "-f", str(CLUSTER), "-f", str(PROXIES), "config"], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=120)
    if proc.returncode != 0 and "compose" in proc.stderr and "is not a docker command" in proc.stderr:
        pytest.skip("the docker client has no compose plugin")
    assert proc.returncode == 0, proc.stderr
    merged = yaml.safe_load(proc.stdout)
    assert set(merged["services"]) == {"kafka-1", "kafka-2", "kafka-3", "postgres", "toxiproxy"}
    assert "PROXIED://127.0.0.1:29193" in merged["services"]["kafka-2"]["environment"]["KAFKA_ADVERTISED_LISTENERS"]
