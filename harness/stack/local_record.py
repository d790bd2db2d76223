"""What a state folder says about its local stack: `stack.json`, and the names and numbers of its ports.

`stack.json` remembers the ports, the cluster size (`brokers`) and the Kafka
auth the local stack was formatted with, so that later commands start it, find
it and talk to it the same way. A record that is missing or damaged is a note,
not a failure: the running services' pid records win (`known_ports`).

Apart from starting and stopping (local_services.py) and from the commands
(local.py) because many readers want only the record: the CLI, the compose
stack (which writes the same file), the broker faults and the client settings
file, none of which should load what starts services.
"""

import json
from pathlib import Path

from ..core import safefile
from ..core.paths import state_dir
from .local_kafka import AUTHS, CLUSTER_SIZES, DEFAULT_AUTH, LocalKafka, every_node
from .local_postgres import LocalPostgres
from .toxiproxy import LocalToxiproxy


PREFERRED = {"kafka": 19092, "controller": 19093, "postgres": 15432, "toxiproxy": 18474}
PORT_NAMES = ("kafka", "controller", "postgres")
# Node N of a cluster: its client port 19092 + 100 N, and after it these (a proxied stack's two more).
NODE_PORT_STEP = {"kafka": 0, "controller": 1, "proxied": 2, "proxy": 3}


def port_names(brokers: int = 1, proxies: bool = False) -> tuple:
    """The ports a stack of this size needs: per node its client and controller port (and with proxies,
    `harness up --proxies`, its proxied listener and its proxy's port), then Postgres (and Toxiproxy's API)."""
    if brokers == 1:
        return PORT_NAMES
    kinds = ("kafka", "controller", "proxied", "proxy") if proxies else ("kafka", "controller")
    return tuple(f"{k}-{i}" for i in range(1, brokers + 1) for k in kinds) + ("postgres",) + \
        (("toxiproxy",) if proxies else ())


def preferred(name: str) -> int:
    """Fixed, memorable ports: node N of a cluster uses 19092 + 100 N and the ports after it."""
    if name in PREFERRED:
        return PREFERRED[name]
    kind, _, n = name.rpartition("-")
    return 19092 + 100 * int(n) + NODE_PORT_STEP[kind]


def kafka_release(state: Path | None = None) -> str:
    """The Kafka release this state folder's local stack was started with (the default when not recorded:
    the only one earlier harnesses started)."""
    from ..core import versions
    from .kafka_versions import RELEASE
    got = (read_record(state) or {}).get("kafka_version")
    return got if isinstance(got, str) and RELEASE.fullmatch(got) else versions.KAFKA_VERSION


def size(state: Path | None = None) -> int:
    """The number of Kafka nodes this state folder's stack has (1 unless `harness up --brokers N` said so)."""
    n = (read_record(state) or {}).get("brokers", 1)
    return n if n in CLUSTER_SIZES else 1


def proxied(state: Path | None = None) -> bool:
    """Whether this state folder's stack puts Toxiproxy in front of its nodes (`harness up --proxies`): as
    stack.json says, else (a lost or damaged record) whether its Toxiproxy runs."""
    rec = read_record(state)
    if rec is not None and isinstance(rec.get("proxies"), bool):
        return rec["proxies"]
    return LocalToxiproxy(state or state_dir()).running() is not None


def service_of(port_name: str) -> str:
    """The service that binds this port: postgres, toxiproxy (its API and the proxies), kafka, or kafka-N for
    a cluster node's own ports."""
    if port_name in ("postgres", "toxiproxy"):
        return port_name
    kind, _, n = port_name.rpartition("-")
    if kind == "proxy":
        return "toxiproxy"
    if kind in ("controller", "proxied"):
        return f"kafka-{n}"
    return "kafka" if port_name == "controller" else port_name


def record_path(state: Path) -> Path:
    """The state folder's stack.json."""
    return state / "stack.json"


def read_record(state: Path | None = None) -> dict | None:
    """stack.json as a dict, or None when it is missing, not JSON or not an object."""
    try:
        rec = json.loads(record_path(state or state_dir()).read_text())
    except (OSError, ValueError):
        return None
    return rec if isinstance(rec, dict) else None


def record_damage(state: Path, services_run: bool) -> str | None:
    """Why stack.json cannot be used as it is (None when it is fine, or absent with nothing running)."""
    path = record_path(state)
    if not path.exists():
        return f"{path} is missing" if services_run else None
    rec = read_record(state)
    if rec is None:
        return f"{path} is unreadable or not a JSON object"
    bad = [n for n in port_names(size(state), proxied(state)) if not is_port(rec.get(f"{n}_port"))]
    return f"{path} lacks {', '.join(f'{n}_port' for n in bad)}" if bad else None


def is_port(v) -> bool:
    """Whether a recorded value can be a TCP port (an int, not a bool, 1..65535)."""
    return isinstance(v, int) and not isinstance(v, bool) and 0 < v < 65536


def write_record(state: Path, rec: dict) -> None:
    safefile.write_state(record_path(state), json.dumps(rec, indent=2) + "\n", safefile.PRIVATE)


def known_ports(state: Path, kafka, pg: LocalPostgres) -> dict:
    """Ports of the running services from their pid records, else from stack.json (missing keys absent).
    `kafka` is the node, or the list of nodes, of the stack."""
    names = port_names(size(state), proxied(state))
    rec = read_record(state) or {}
    out = {n: rec[f"{n}_port"] for n in names if is_port(rec.get(f"{n}_port"))}
    for svc in [*(kafka if isinstance(kafka, list) else [kafka]), pg, LocalToxiproxy(state)]:
        running = svc.running()
        if running:
            out.update({k: v for k, v in running.ports.items() if k in names and is_port(v)})
    return out


def bootstrap_of(port: dict, brokers: int, hosts: list[str] | None = None, proxies: bool = False) -> str:
    """The nodes' client addresses: on 127.0.0.1, or on `hosts` (node networks); with proxies, their
    proxies' on 127.0.0.1."""
    if proxies:
        return ",".join(f"127.0.0.1:{port.get(f'proxy-{i}', '?')}" for i in range(1, brokers + 1))
    hosts = hosts or ["127.0.0.1"] * brokers
    if brokers == 1:
        return f"{hosts[0]}:{port.get('kafka', '?')}"
    return ",".join(f"{hosts[i - 1]}:{port.get(f'kafka-{i}', '?')}" for i in range(1, brokers + 1))


def recorded_auth(state: Path | None = None) -> str:
    """The Kafka auth of the local stack in `state` ("none" or "scram"): as stack.json remembers it, else
    (a lost or damaged stack.json) as a node's server.properties says, else (a new folder) DEFAULT_AUTH."""
    state = state or state_dir()
    auth = (read_record(state) or {}).get("auth")
    if auth in AUTHS:
        return auth
    configured = [k for k in every_node(state) if k.props.exists()]
    return configured[0].configured_auth() if configured else DEFAULT_AUTH


def client_properties_file(state: Path | None = None) -> Path | None:
    """The Kafka client settings file (librdkafka names, 0600) of the local stack in `state`.

    None when that stack needs no client settings (plaintext). `harness up --auth scram` writes it;
    `kcat -F FILE` and `--kafka-config-file FILE` read it.
    """
    state = state or state_dir()
    f = LocalKafka(state).client_file
    return f if recorded_auth(state) == "scram" and f.exists() else None
