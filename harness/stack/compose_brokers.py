"""The compose cluster's broker containers as the broker and network faults' hands (see brokers.py).

Through the Docker SDK (`docker` package, imported only when used): kill,
pause/unpause, start. Containers are found by their compose labels (project
`harness`, services `kafka-1`..`kafka-3`), never by a guessed name. Network
faults put iptables rules inside each container's own network namespace
(container_net.py), entered through a descriptor of that namespace checked to
be neither the harness's nor the machine's.

`cut_nodes` is the check every command on the compose stack makes first: a
node a killed harness left cut would make the stack never answer as a whole.
The latency fault's toxics live in the stack's Toxiproxy container (compose
file docker-compose.proxies.yml), reached through its API on 127.0.0.1.
"""

from __future__ import annotations

import ipaddress

from ..core.errors import HarnessError, first_line
from ..core.paths import state_dir
from . import compose, container_net, health
from . import ports as portcheck
from .compose import CLUSTER_KAFKA_PORTS
from .toxiproxy import ProxiedNodes

DOCKER_TIMEOUT_S = 30
CHECK_TIMEOUT_S = 5       # the cut check before every command: a slow engine must not hold it for minutes


class ComposeBrokers(ProxiedNodes):
    """The broker containers of the compose cluster, through the Docker SDK (or a stand-in with its API)."""

    kind = "compose"
    PROJECT_LABEL = "com.docker.compose.project"
    SERVICE_LABEL = "com.docker.compose.service"

    def __init__(self, client=None, project: str = "harness", timeout: float = DOCKER_TIMEOUT_S):
        if client is None:
            try:
                import docker
            except ImportError:
                raise HarnessError("broker faults on the compose stack need the Docker SDK (the `docker` "
                                   "package, one of the harness's dependencies): install it")
            client = docker.from_env(timeout=timeout)
        self.client, self.project = client, project

    def exists(self) -> bool:
        """Whether the project has any broker container at all (the stack may simply not be up)."""
        return bool(self.client.containers.list(all=True, filters={"label": [
            f"{self.PROJECT_LABEL}={self.project}", f"{self.SERVICE_LABEL}=kafka-1"]}))

    def node_ids(self) -> list[int]:
        return list(range(1, len(CLUSTER_KAFKA_PORTS) + 1))

    def target(self, node: int) -> str:
        return f"kafka-{node}"

    def container(self, node: int):
        found = self.client.containers.list(all=True, filters={"label": [
            f"{self.PROJECT_LABEL}={self.project}", f"{self.SERVICE_LABEL}={self.target(node)}"]})
        if len(found) != 1:
            raise HarnessError(f"expected one container of service {self.target(node)} in compose project "
                               f"{self.project}, found {len(found)}")
        return found[0]

    def kill(self, node: int) -> str | None:
        c = self.container(node)
        c.kill()
        return f"container {c.name}"

    def stop(self, node: int) -> str | None:
        """Ask the node's broker to shut down cleanly (SIGTERM to the container: a controlled shutdown hands
        its leaderships over); `running` says when it has ended. None when it was not running."""
        c = self.container(node)
        c.reload()
        if c.status != "running":
            return None
        c.kill(signal="SIGTERM")
        return f"container {c.name}"

    def start(self, node: int, release: str | None = None, image: str | None = None) -> str:
        """Start the node's container again; with `release` and `image` (a rolling upgrade), recreate it on
        that image with the same volume and settings (compose.recreate)."""
        if release and image:
            from .compose import recreate
            return recreate(self.target(node), image, release)
        c = self.container(node)
        c.start()
        return f"container {c.name}"

    def pause(self, node: int) -> str | None:
        c = self.container(node)
        c.pause()
        return f"container {c.name}"

    def resume(self, node: int) -> None:
        self.container(node).unpause()

    def running(self, node: int) -> bool:
        c = self.container(node)
        c.reload()
        return c.status == "running"

    def answers(self, node: int) -> bool:
        """The broker in the container itself serves requests and the cluster lists it (never merely
        that its container started: a container whose broker exits at once is "running" for a moment)."""
        port = CLUSTER_KAFKA_PORTS[node - 1]
        if not self.running(node) or not portcheck.answers(port, timeout=0.2):
            return False
        return health.node_answers("127.0.0.1", port, node, ",".join(f"127.0.0.1:{p}" for p in CLUSTER_KAFKA_PORTS))

    def in_sync(self) -> bool:
        """Every partition of the cluster (internal ones included) has all its replicas in sync again."""
        return health.partitions_short_of_replicas(",".join(f"127.0.0.1:{p}" for p in CLUSTER_KAFKA_PORTS)) == 0

    def has_image(self, image: str) -> bool:
        try:
            self.client.images.get(image)
            return True
        except Exception:  # noqa: BLE001 - not on the engine (or the engine cannot say): not there
            return False

    def condition(self, node: int) -> str:
        try:
            c = self.container(node)
            c.reload()
        except Exception as e:  # noqa: BLE001 - said, never raised: this is already a failure's story
            return f"{self.target(node)}: {first_line(e)}"
        st = c.attrs.get("State") or {}
        code = f", exit code {st.get('ExitCode')}" if c.status == "exited" else ""
        return f"container {c.name} is {c.status}{code}"

    def log_tail(self, node: int, lines: int = 5) -> str:
        try:
            return self.container(node).logs(tail=lines).decode(errors="replace")
        except Exception as e:  # noqa: BLE001
            return first_line(e)

    def activity(self, node: int):
        """Something that changes while the node is at work: the last lines of its container's log."""
        return self.log_tail(node, 3)

    # -- network faults: rules inside the container's own network namespace (container_net.py) -------
    def networks(self) -> str | None:
        """Why the containers' networks cannot be cut from here (None: they can)."""
        return container_net.available()

    def _pid(self, node: int) -> int | None:
        """The container's main process (its network namespace's), or None when it does not run."""
        c = self.container(node)
        c.reload()
        pid = (c.attrs.get("State") or {}).get("Pid")
        return pid if isinstance(pid, int) and not isinstance(pid, bool) and pid > 1 and c.status == "running" \
            else None

    def _address(self, node: int) -> str | None:
        """The container's address on the compose project's network (where its peers reach it)."""
        c = self.container(node)
        c.reload()
        nets = ((c.attrs.get("NetworkSettings") or {}).get("Networks") or {})
        for net in nets.values():
            if isinstance(net, dict) and net.get("GlobalIPv6Address"):
                raise HarnessError(f"container {c.name} has an IPv6 address too: a split by iptables (IPv4) would "
                                   f"leak through it, so it is refused")
            ip = (net or {}).get("IPAddress") if isinstance(net, dict) else None
            try:
                return str(ipaddress.ip_address(ip))
            except (TypeError, ValueError):
                continue
        return None

    def _cut(self, node: int, rules: list) -> str | None:
        pid = self._pid(node)
        if pid is None:
            return None
        try:
            container_net.apply(pid, rules)
        except BaseException:               # half a cut is none at all
            container_net.heal(pid)
            raise
        return f"rules in container {self.container(node).name}"

    def cut_nodes(self) -> list[int]:
        return [n for n in self.node_ids() if (pid := self._pid(n)) and container_net.rules_in(pid)]

    def isolate(self, node: int) -> str | None:
        return self._cut(node, container_net.isolate_rules(None, node))

    def cut_clients(self, node: int) -> str | None:
        return self._cut(node, container_net.client_cut_rules(CLUSTER_KAFKA_PORTS[node - 1], compose.PROXIED_PORT))

    def split(self, node: int) -> str | None:
        others = [n for n in self.node_ids() if n != node]
        addresses = {n: self._address(n) for n in self.node_ids()}
        unknown = [self.target(n) for n, a in addresses.items() if a is None]
        if unknown:
            raise HarnessError(f"no address for {', '.join(unknown)} (not running?): a split needs every side's")
        if self._pid(node) is None:
            return None
        try:
            for n, peers in [(node, [addresses[o] for o in others]), *((o, [addresses[node]]) for o in others)]:
                pid = self._pid(n)
                if pid is not None:
                    container_net.apply(pid, container_net.split_rules(peers))
        except BaseException:
            self.heal_all()
            raise
        return f"rules in containers kafka-{node} and {', '.join(f'kafka-{o}' for o in others)}"

    def heal(self, node: int) -> None:
        pid = self._pid(node)
        if pid is not None:
            container_net.heal(pid)

    def heal_all(self) -> None:
        for n in self.node_ids():
            self.heal(n)

    # -- the latency fault: a toxic on the node's proxy in the stack's Toxiproxy container ----------------
    def proxies(self) -> str | None:
        """Why the nodes' client traffic cannot be delayed (None: it can)."""
        if not compose.recorded_proxies():
            return ("the Kafka nodes' clients do not go through proxies: `harness up --stack compose --brokers 3 "
                    "--proxies`")
        try:
            self._api()
        except HarnessError as e:
            return str(e)
        return None

    def _api(self):
        """The API of the project's own running Toxiproxy container, on the port it publishes on 127.0.0.1
        (never a port merely assumed: another program may listen there)."""
        from .toxiproxy import Api
        try:
            found = self.client.containers.list(filters={"label": [
                f"{self.PROJECT_LABEL}={self.project}", f"{self.SERVICE_LABEL}=toxiproxy"], "status": "running"})
        except Exception as e:  # noqa: BLE001 - the Docker SDK's and requests' own errors: one line
            raise HarnessError(f"the Docker engine did not list the stack's Toxiproxy container: {first_line(e)}")
        if len(found) != 1:
            raise HarnessError("the stack's Toxiproxy container is not running (`harness up --stack compose` starts "
                               "it again)")
        ports = ((found[0].attrs.get("NetworkSettings") or {}).get("Ports") or {}).get("8474/tcp") or []
        published = [int(b["HostPort"]) for b in ports if isinstance(b, dict) and b.get("HostIp") == "127.0.0.1"
                     and str(b.get("HostPort", "")).isascii() and str(b.get("HostPort", "")).isdigit()]
        if not published:
            raise HarnessError(f"the stack's Toxiproxy container {found[0].name} publishes no API port on 127.0.0.1")
        return Api(published[0])

    def _add_loss(self, node: int, share: float) -> str:
        where = self._cut(node, container_net.loss_rules(compose.PROXIED_PORT, share))
        if where is None:           # no rules: the fault would be half made (its toxic's undone by the caller)
            raise HarnessError(f"{self.target(node)} is not running: its packets cannot be dropped")
        return where


def cut_nodes(brokers: int | None = None) -> list[int] | None:
    """The cluster's broker containers with network-fault rules inside (a fault under way, or one a killed
    harness left); [] when there is no cluster up; None when they cannot be looked into (no root, no engine,
    the engine failed): unknown, never "none"."""
    variant = compose.variant_for(brokers) if brokers else compose._recorded_variant(state_dir())
    if variant != "cluster":
        return []
    if container_net.available() or compose.engine_available():
        return None
    try:
        hands = ComposeBrokers(timeout=CHECK_TIMEOUT_S)
        if not hands.exists():
            return []
        return hands.cut_nodes()
    except HarnessError:
        return None
    except Exception:  # noqa: BLE001 - the Docker SDK's and requests' own errors: unknown, said by the caller
        return None


def delayed_nodes() -> list[int] | None:
    """The cluster's nodes whose proxy has a toxic (a latency fault under way, or one a killed harness left);
    [] when the stack has no proxies; None when Toxiproxy does not answer: unknown, never "none"."""
    if not compose.recorded_proxies():
        return []
    if compose.engine_available():
        return None
    try:
        return ComposeBrokers(timeout=CHECK_TIMEOUT_S).delayed_nodes()
    except Exception:  # noqa: BLE001 - HarnessError, and the Docker SDK's own: unknown, said by the caller
        return None
