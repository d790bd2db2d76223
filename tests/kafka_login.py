"""The one place tests get the Kafka login of a stack the harness started for them.

A stack the harness starts may have SCRAM and an authorizer (`--auth scram`; a compose stack's default),
so a plain confluent_kafka client a test builds itself (to read a topic as an outsider would, to produce a
foreign record, to ask the admin API) needs the stack's client settings, as the harness's own clients do. `config(bootstrap, extra)` is
that client's config: the settings of the state folder whose stack serves `bootstrap` (its
client.properties: the harness's own user), found among the test session's state folders by port.
It also binds them in harness.clients.kafka_client, so harness code a test calls in its own process
(create_topic, stable_ends, leader_of, OutputWatcher) logs in the same way. A plaintext stack
(`--auth none`) has no client settings: then the config is the address alone.
"""

import json
from pathlib import Path

from harness.clients import kafka_client


def _ports(bootstrap: str) -> set[int]:
    return {int(p) for p in (a.rpartition(":")[2] for a in bootstrap.split(",")) if p.isdigit()}


def _recorded_ports(rec: dict) -> set[int]:
    """The Kafka ports a stack.json names: a local stack's own, or a compose stack's fixed ones."""
    if rec.get("kind") == "compose":
        from harness.stack import compose
        return {compose.KAFKA_PORT, *compose.CLUSTER_KAFKA_PORTS, *compose.CLUSTER_PROXY_PORTS}
    return {v for k, v in rec.items() if k.endswith("_port") and isinstance(v, int)}


def _home_of(bootstrap: str) -> Path | None:
    """The session's state folder whose stack.json records a port of `bootstrap`."""
    from tests.conftest import _made
    want = _ports(bootstrap)
    for home in reversed(_made):
        try:
            rec = json.loads((home / "stack.json").read_text())
        except (OSError, ValueError):
            continue
        if isinstance(rec, dict) and want & _recorded_ports(rec):
            return home
    return None


def settings(bootstrap: str) -> dict:
    """The stack's client settings for `bootstrap` ({} for a plaintext stack), bound in kafka_client."""
    home = _home_of(bootstrap)
    found = kafka_client.load_file(home / "client.properties") if home and (home / "client.properties").exists() \
        else kafka_client.settings_for(bootstrap)
    kafka_client.use(bootstrap, found)
    return dict(found)


def config(bootstrap: str, extra: dict | None = None) -> dict:
    """A confluent_kafka config for the stack at `bootstrap`, logged in as the harness: `extra` wins."""
    return {**settings(bootstrap), "bootstrap.servers": bootstrap, **(extra or {})}


def forget(bootstrap: str) -> None:
    """Unbind `bootstrap`'s settings in this process and the ones it starts: a stack a module started and
    stopped must not lend its login to the next stack on the same port (the session's plaintext one)."""
    kafka_client.forget(bootstrap)
