"""Kill, pause, resume and restart one Kafka node of a cluster the harness started: the broker faults' hands.

Broker faults (harness/faults/broker.py) decide when and whom; this module
only acts, on one of two kinds of cluster:

- `LocalBrokers`: the nodes of `harness up --brokers 3`. Every signal goes
  through the node's verified pid record (pid, start time, our own
  server.properties on its command line), as `harness down` does, so nothing
  else is ever signalled. A killed node is started again by
  `LocalKafka.start`, exactly like the first start: same folder, ports, owner,
  quorum and cluster id, and a new pid record written the moment it exists,
  so `harness down` stops it and no process is ever left behind.
- `ComposeBrokers` (compose_brokers.py): the broker containers of
  compose/docker-compose.cluster.yml, through the Docker SDK.

`for_stack` refuses, in one line, a stack with fewer than three brokers or one
the harness did not start (an external cluster is never touched).
"""

from __future__ import annotations

import signal
from pathlib import Path

from ..core.errors import HarnessError, first_line
from . import health
from . import ports as portcheck
from .toxiproxy import ProxiedNodes
from .compose_brokers import ComposeBrokers  # noqa: F401 - the compose cluster's hands, re-exported for for_stack

CLUSTER = 3


class LocalBrokers(ProxiedNodes):
    """The local cluster's nodes, by node id (1..3)."""

    kind = "local"

    def __init__(self, state: Path):
        from .local_record import read_record
        from .local_kafka import nodes
        self.state = state
        self.by_id = {k.node_id: k for k in nodes(state, CLUSTER)}
        self.record = read_record(state) or {}
        self._saved: dict = {}           # node id -> its pid record when we killed it (owner, ports)
        self._started: dict = {}         # node id -> the Popen of the process we started again

    def node_ids(self) -> list[int]:
        return sorted(self.by_id)

    def target(self, node: int) -> str:
        return self.by_id[node].key

    def _port(self, node: int, kind: str = "kafka") -> int | None:
        """The node's port of this kind (kafka, controller, proxied; proxy: its proxy's), from the pid record
        of the process that binds it, else from stack.json."""
        if kind == "proxy":
            from .toxiproxy import LocalToxiproxy
            rec = LocalToxiproxy(self.state).running()
        else:
            rec = self.by_id[node].running() or self._saved.get(node)
        key = f"{kind}-{node}"
        if rec is not None and key in rec.ports:
            return rec.ports[key]
        v = self.record.get(f"{key}_port")
        return v if isinstance(v, int) else None

    def kill(self, node: int) -> str | None:
        """SIGKILL the node's process group; its pid as a string, or None when it was not running (ours)."""
        return self._end(node, signal.SIGKILL)

    def stop(self, node: int) -> str | None:
        """Ask the node to shut down cleanly (SIGTERM: a controlled shutdown hands its leaderships over); its
        pid as a string, or None when it was not running (ours). `running` says when it has ended."""
        return self._end(node, signal.SIGTERM)

    def _end(self, node: int, sig: signal.Signals) -> str | None:
        rec = self.by_id[node].running()
        if rec is None:
            return None
        self._saved[node] = rec              # its owner and ports, for the start that follows
        pid = self.by_id[node].signal(sig)
        return None if pid is None else f"pid {pid}"

    def start(self, node: int, release: str | None = None) -> str:
        """Start a killed or stopped node again, recorded like its first start, on its own release or on
        `release` (a rolling upgrade: the same data folder and settings, that release's jars, which its
        folder then names as its release); its new pid."""
        from .local_kafka import voters
        from .local_record import kafka_release, proxied as recorded_proxies, recorded_auth
        from .maven import resolve_kafka
        k = self.by_id[node]
        if k.running():
            return f"pid {k.pid()}"
        saved = self._saved.get(node)
        owner = saved.owner if saved else "command"
        ctrl = [self._port(n, "controller") for n in self.node_ids()]
        port = self._port(node)
        if port is None or None in ctrl:
            raise HarnessError(f"cannot restart {k.name}: its ports are not recorded in {self.state}")
        hosts = [self.by_id[n].host() for n in self.node_ids()]
        proxied = None
        if recorded_proxies(self.state):         # its second listener, the one its proxy forwards to
            proxied = (self._port(node, "proxied"), self._port(node, "proxy"))
            if None in proxied:
                raise HarnessError(f"cannot restart {k.name} behind its proxy: its proxied ports are not "
                                   f"recorded in {self.state}")
        if release:
            k.record_release(release)
        release = k.release() or kafka_release(self.state)       # the release its own data was formatted by
        pid = k.start(resolve_kafka(lambda _m: None, release), port, ctrl[node - 1], owner, voters=voters(ctrl, hosts),
                      cluster_id=k.cluster_id(), proxied=proxied, auth=recorded_auth(self.state))
        self._started[node] = k.proc        # ours to reap, and to read its exit status from
        return f"pid {pid}"

    def pause(self, node: int) -> str | None:
        pid = self.by_id[node].signal(signal.SIGSTOP)
        return None if pid is None else f"pid {pid}"

    def resume(self, node: int) -> None:
        self.by_id[node].signal(signal.SIGCONT)

    def running(self, node: int) -> bool:
        return self.by_id[node].running() is not None

    def answers(self, node: int) -> bool:
        """The node itself serves requests on its client port and the cluster lists it as a live broker
        (it may still be catching up on its partitions)."""
        port, host = self._port(node), self.by_id[node].host()
        if not self.running(node) or port is None or not portcheck.answers(port, timeout=0.2, host=host):
            return False
        others = [f"{self.by_id[n].host()}:{p}" for n in self.node_ids() if (p := self._port(n)) is not None]
        return health.node_answers(host, port, node, ",".join(others))

    def in_sync(self) -> bool:
        """Every partition of the cluster (internal ones included) has all its replicas in sync again."""
        hosts = [f"{self.by_id[n].host()}:{p}" for n in self.node_ids() if (p := self._port(n)) is not None]
        return health.partitions_short_of_replicas(",".join(hosts)) == 0

    def condition(self, node: int) -> str:
        """What the node is doing, in words, for a fault that gave up waiting for it."""
        k = self.by_id[node]
        proc = self._started.get(node)
        if k.running() is not None:
            return f"{k.key} runs (pid {k.pid()}) but does not answer"
        if proc is not None and proc.poll() is not None:
            return f"{k.key} exited with status {proc.returncode}"
        return f"{k.key} is not running"

    def log_tail(self, node: int, lines: int = 5) -> str:
        return self.by_id[node].log_tail(lines)

    def activity(self, node: int):
        """Something that changes while the node is at work: the sizes of its logs."""
        return self.by_id[node].log_sizes()

    # -- network faults: rules inside the node's own network namespace (netns.py) ----------------
    def networks(self) -> str | None:
        """Why the nodes' networks cannot be cut (None: they can)."""
        if any(self.by_id[n].network() is None for n in self.node_ids()):
            return ("the Kafka nodes have no networks of their own: `harness down`, then "
                    "`harness up --brokers 3 --node-networks` (needs root)")
        return None

    def _cut(self, node: int, rules) -> str | None:
        from . import netns
        layout = self.by_id[node].network()
        if layout is None or not self.running(node):
            return None
        try:
            netns.apply(layout, node, rules(layout, node))
        except BaseException:               # half a cut (a rule refused, Ctrl-C between two): none at all
            netns.heal(layout, node)
            raise
        return f"rules in {layout.namespace(node)}"

    def cut_nodes(self) -> list[int]:
        """Nodes with rules in their namespace now (a fault of another run, or one a killed harness left)."""
        from . import netns
        return [n for n in self.node_ids() if (layout := self.by_id[n].network()) and netns.rules_in(layout, n)]

    def isolate(self, node: int) -> str | None:
        """Nothing in or out of the node but its own loopback: clients and other nodes alike."""
        from . import netns
        return self._cut(node, netns.isolate_rules)

    def cut_clients(self, node: int) -> str | None:
        """The node's client link resets every TCP packet: its clients are cut, the other nodes are not."""
        from . import netns
        return self._cut(node, netns.client_cut_rules)

    def split(self, node: int) -> str | None:
        """The cluster in two: this node (the minority) on one side, the others on the other; only the links
        between the sides are cut, so clients still reach every node."""
        from . import netns
        layout = self.by_id[node].network()
        if layout is None or not self.running(node):
            return None
        others = [n for n in self.node_ids() if n != node]
        try:
            netns.apply(layout, node, netns.split_rules(layout, node, others))
            for n in others:
                netns.apply(layout, n, netns.split_rules(layout, n, [node]))
        except BaseException:
            self.heal_all()
            raise
        return f"rules in {', '.join(layout.namespace(n) for n in [node, *others])}"

    def heal(self, node: int) -> None:
        from . import netns
        layout = self.by_id[node].network()
        if layout is not None:
            netns.heal(layout, node)

    def heal_all(self) -> None:
        """Every node's rules removed (a split puts rules on both sides)."""
        for n in self.node_ids():
            self.heal(n)

    # -- the latency fault: a toxic on the node's Toxiproxy proxy (toxiproxy.py) ---------------------
    def proxies(self) -> str | None:
        """Why the nodes' client traffic cannot be delayed (None: it can)."""
        from .local_record import proxied
        from .toxiproxy import LocalToxiproxy
        if not proxied(self.state):
            return ("the Kafka nodes' clients do not go through proxies: `harness down`, then "
                    "`harness up --brokers 3 --proxies`")
        if LocalToxiproxy(self.state).running() is None:
            return "the stack's Toxiproxy is not running (`harness up` starts it again)"
        return None

    def _api(self):
        from .toxiproxy import LocalToxiproxy
        api = LocalToxiproxy(self.state).api()
        if api is None:
            raise HarnessError("the stack's Toxiproxy is not running")
        return api

    def _recorded_upstreams(self) -> dict[int, str]:
        from .toxiproxy import LocalToxiproxy
        return LocalToxiproxy(self.state).upstreams()

    def _add_loss(self, node: int, share: float) -> str:
        from . import netns
        layout = self.by_id[node].network()
        netns.apply(layout, node, netns.loss_rules(layout, node, share))
        return f"rules in {layout.namespace(node)}"


def for_stack(stack, fault: str, docker_client=None):
    """The hands for broker faults on this stack, or one line saying why there are none."""
    if stack.kind == "external":
        raise HarnessError(f"--fault {fault} kills or pauses brokers the harness started; it never touches an "
                           f"external cluster (--bootstrap-servers)")
    if stack.brokers < CLUSTER:
        how = "--stack compose --brokers 3" if stack.kind == "compose" else "harness up --brokers 3"
        raise HarnessError(f"--fault {fault} needs the {CLUSTER}-broker cluster, but this stack has "
                           f"{stack.brokers} broker(s): start it with `{how}` (after `harness down --purge`)")
    if stack.kind == "compose":
        return ComposeBrokers(docker_client)
    from ..core.paths import state_dir
    return LocalBrokers(state_dir())


def java_string_hash(s: str) -> int:
    """Java's String.hashCode (UTF-16 code units, 32-bit signed), as Kafka's coordinators hash ids."""
    h = 0
    data = s.encode("utf-16-be")
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h


def coordinator_partition(transactional_id: str, partitions: int) -> int:
    """The __transaction_state partition whose leader coordinates this transactional.id
    (Kafka: Utils.abs(id.hashCode) % transaction.state.log.num.partitions, Utils.abs = n & 0x7fffffff)."""
    return (java_string_hash(transactional_id) & 0x7FFFFFFF) % partitions


TRANSACTION_STATE_TOPIC = "__transaction_state"


def leader_of(bootstrap: str, topic: str, partition: int | None = None, transactional_id: str | None = None,
              timeout: float = 5.0) -> tuple[int | None, str]:
    """The node id that leads `topic`'s `partition` (or, with `transactional_id`, that id's transaction
    coordinator), and what it is, in words. (None, why) when the metadata does not say."""
    from confluent_kafka.admin import AdminClient
    from ..clients import kafka_client, kafka_logging
    admin = AdminClient(kafka_client.config(bootstrap, kafka_logging.client_config()))
    try:
        if transactional_id is not None:
            md = admin.list_topics(TRANSACTION_STATE_TOPIC, timeout=timeout).topics.get(TRANSACTION_STATE_TOPIC)
            if md is None or md.error is not None or not md.partitions:
                return None, f"{TRANSACTION_STATE_TOPIC} has no metadata yet"
            partition = coordinator_partition(transactional_id, len(md.partitions))
            what = f"transaction coordinator of {transactional_id} ({TRANSACTION_STATE_TOPIC} partition {partition})"
        else:
            md = admin.list_topics(topic, timeout=timeout).topics.get(topic)
            what = f"leader of {topic} partition {partition}"
            if md is None or md.error is not None:
                return None, f"{topic} has no metadata"
        p = md.partitions.get(partition)
        if p is None or p.leader < 0:
            return None, f"no leader known for {what}"
        return p.leader, what
    except Exception as e:  # noqa: BLE001 - a fault that cannot find its target says so, never breaks the run
        return None, first_line(e)
