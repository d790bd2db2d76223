"""What a compose stack with SCRAM (its default) must hold, checked on a running stack by the compose tests
(test_compose_engine.py), so that they need no stack of their own for it:

- the harness logs in as `harness` with its 0600 client.properties, and a client without a login is refused
  on the published listener and on the containers' own network;
- the KRaft controller listener takes nothing but the `controller` user's PLAIN login (case 8 of issue 53);
- no password is in the containers' configuration (`docker inspect`), their logs, what `up` printed, or
  any process's command line while the stack started (`ArgvWatch`).
"""

from __future__ import annotations

import json
import stat
import subprocess
import threading
from pathlib import Path

from harness.clients.kafka_client import load_file
from tests.conftest import harness, pids_where

PROJECT = "harness"


def passwords(home: Path) -> list[str]:
    """The Kafka passwords of the state folder's stack (the harness's, the controller's)."""
    found = [load_file(home / "client.properties")["sasl.password"],
             load_file(home / "kafka-controller.properties")["password"]]
    assert all(len(pw) >= 16 for pw in found)
    return found


class ArgvWatch:
    """Every process whose command line holds a password of `home`'s stack, sampled until `stop()`; the
    passwords are read once the harness has written them (`up` makes them before it starts a container)."""

    def __init__(self, home: Path):
        self.home, self.seen, self.sampled = home, [], 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, daemon=True)
        self._thread.start()

    def _watch(self):
        pws = None
        while not self._stop.is_set():
            if pws is None and (self.home / "kafka-controller.properties").is_file() and \
                    (self.home / "client.properties").is_file():
                pws = passwords(self.home)
            if pws:
                self.seen.extend(pids_where(lambda cmd: any(pw in cmd for pw in pws)))
                self.sampled += 1
            self._stop.wait(0.2)

    def stop(self) -> list[int]:
        self._stop.set()
        self._thread.join(10)
        return self.seen


def _docker(env, *args, timeout=120) -> subprocess.CompletedProcess:
    return subprocess.run(["docker", *args], env=env, capture_output=True, text=True, timeout=timeout)


def _refused_without_login(bootstrap: str) -> bool:
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AdminClient
    try:
        AdminClient({"bootstrap.servers": bootstrap, "log_level": 0}).list_topics(timeout=5)
    except KafkaException:
        return True
    return False


def _controller_config(env, container: str, settings: dict, *args) -> subprocess.CompletedProcess:
    """Kafka's ConfigCommand (the image's kafka-configs.sh, as a user would call it) inside `container` against the controller listener (`--bootstrap-controller`),
    with `settings` in a 0600 --command-config file there: the cluster-wide broker defaults."""
    text = "".join(f"{k}={v}\n" for k, v in {"request.timeout.ms": "5000", "default.api.timeout.ms": "8000",
                                              **settings}.items())
    write = subprocess.run(["docker", "exec", "-i", container, "bash", "-c", "umask 077; cat > /tmp/admin.properties"],
                           input=text, env=env, capture_output=True, text=True, timeout=60)
    assert write.returncode == 0, write.stderr
    return _docker(env, "exec", container, "/opt/kafka/bin/kafka-configs.sh", "--bootstrap-controller", "kafka:9093", "--command-config", "/tmp/admin.properties",
                   "--entity-type", "brokers", "--entity-default", *args, timeout=180)


def scram_holds(env: dict, home: Path, said: str) -> None:
    """The single-node compose stack of `home` has SCRAM and the authorizer as promised (see the module);
    `said`: everything `harness up` printed."""
    from tests import kafka_login
    st = json.loads(harness("status", "--json", env=env, check=True, timeout=120).stdout)
    assert st["kafka_auth"] == "SASL_PLAINTEXT SCRAM-SHA-512 as harness", st
    for name in ("client.properties", "kafka-controller.properties", "compose.auth"):
        assert stat.S_IMODE((home / name).stat().st_mode) == 0o600, name
    pws = passwords(home)
    container = f"{PROJECT}-kafka-1"
    ip = _docker(env, "inspect", "-f", "{{range .NetworkSettings.Networks}}{{.IPAddress}}{{end}}", container).stdout.strip()
    assert ip, "the Kafka container has no address"
    assert _refused_without_login(st["bootstrap_servers"]), "a client without a login was let in"
    assert _refused_without_login(f"{ip}:9092"), "the containers' own listener let a client without a login in"
    assert kafka_login.config(st["bootstrap_servers"])["sasl.username"] == "harness"
    anon = _controller_config(env, container, {}, "--alter", "--add-config", "log.cleaner.threads=3")
    assert anon.returncode != 0, anon.stdout + anon.stderr
    login = {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
             "sasl.jaas.config": 'org.apache.kafka.common.security.plain.PlainLoginModule required '
                                 f'username="controller" password="{pws[1]}";'}
    described = _controller_config(env, container, login, "--describe")
    assert described.returncode == 0, described.stdout + described.stderr
    assert "log.cleaner.threads=3" not in described.stdout, "the change without a login went through"
    shown = _docker(env, "inspect", container).stdout + _docker(env, "logs", container).stdout + \
        _docker(env, "logs", container).stderr + said + described.stdout + described.stderr
    for pw in pws:
        assert pw not in shown, "a Kafka password is in the container's configuration, its log or the output"
