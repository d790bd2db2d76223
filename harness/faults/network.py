"""partition, client-cut, latency: network faults of the Kafka cluster, on the same schedule as the broker faults.

A broker fault stops a node; a network fault leaves it running and cuts what
it can reach, the harder case: a request that timed out may still have been
applied, a producer's or coordinator's view of who leads goes stale. Both act
on the local cluster's node networks (`harness up --brokers 3
--node-networks`: each node in a network namespace of its own, see
stack/netns.py), or on the compose cluster's broker containers (each in the
namespace its engine made, entered with nsenter: stack/container_net.py),
with iptables rules inside the node's namespace, so nothing of the machine's
own network is touched:

- partition: the node reaches nobody and nobody reaches it (clients and the
  other nodes), for a seeded time, then heals; `of=` picks what the
  experiment depends on (input, output, coordinator, or leader: the
  experiment's own), else a seeded node. `mode=halves` cuts only the links
  between that node (a minority of one) and the other nodes (the majority):
  clients still reach both sides.
- client-cut: the node's client link answers every TCP packet with a reset
  (open connections break at their next packet, new ones are refused at
  once); the other nodes still reach it.

- latency: every reply the node sends its clients is held back `ms` ± `jitter`
  milliseconds (Toxiproxy's latency toxic on the node's proxy: `harness up
  --brokers 3 --proxies`, see stack/toxiproxy.py), optionally with a share of
  the packets on its client link dropped (`loss`, iptables' statistic match in
  the node's namespace: on the local cluster it needs node networks too). Longer than a client's
  request timeout, a request that was applied comes back as a timeout: an
  unknown outcome. Toxiproxy draws the jitter itself (not from the seed).

`count`, `every` and `down` are the broker faults' (faults/broker.py): the
schedule starts with the workers' first record, one node at a time, and the
run does not end while a node is cut. Whatever the run's end, `finish` heals
the node; a SIGKILLed harness's rules go with the namespaces or the containers
(`harness down`). On the compose cluster `latency` needs its proxies too
(`harness up --stack compose --brokers 3 --proxies`: a Toxiproxy container,
compose/docker-compose.proxies.yml), and its `loss` drops packets inside the
node's container.
"""

from __future__ import annotations

from ..core.errors import HarnessError
from .base import number
from .broker import BrokerFault, LeaderKill

MAX_LATENCY_MS = 120_000
MAX_LOSS = 0.5


class NetworkFault(LeaderKill):
    """A broker fault whose strike cuts the node's network and whose recovery heals it."""
    verb = "cut off"
    # A heal flushes the node's whole table, and a node being restarted cannot be cut: one at a time.
    excludes = {name: "both act on the same nodes, and a heal would end the other's cut early"
                for name in ("partition", "client-cut", "broker-kill", "broker-pause", "leader-kill")}
    options = {**BrokerFault.options,
               "of": "input, output, coordinator or leader (the experiment's own); default: a seeded node"}

    touched: set

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.touched = set()

    @classmethod
    def from_options(cls, spec: str, opts: dict, params) -> "NetworkFault":
        of = opts.pop("of", None)
        f = BrokerFault.from_options.__func__(cls, spec, opts, params)
        if of is not None and of not in ("input", "output", "coordinator", "leader"):
            raise HarnessError(f"--fault {spec}: of must be input, output, coordinator or leader, got {of!r}")
        f.of = of
        return f

    def unmet(self, exp) -> str | None:
        return super().unmet(exp) if self.of not in (None, "leader") else None

    def check_stack(self, stack, docker_client=None) -> None:
        if stack.kind == "external":
            raise HarnessError(f"--fault {self.name} cuts the network of nodes the harness started; it never "
                               f"touches an external cluster (--bootstrap-servers)")
        self._needs_cluster(stack)
        super().check_stack(stack, docker_client)
        why = self.hands.networks()
        if why:
            raise HarnessError(f"--fault {self.name} cannot cut this cluster: {why}")
        cut = self.hands.cut_nodes()
        if cut:
            raise HarnessError(f"--fault {self.name}: node {', '.join(map(str, cut))} is cut already (another "
                               f"run's fault, or one a killed harness left: `harness down` removes it)")

    up_option = "--node-networks"       # what `harness up` needs for this fault
    compose_up_option = ""              # and `harness up --stack compose`

    def _needs_cluster(self, stack) -> None:
        from ..stack.brokers import CLUSTER
        if stack.kind == "compose" and stack.brokers < CLUSTER:
            raise HarnessError(f"--fault {self.name} needs the {CLUSTER}-broker cluster, but this stack has "
                               f"{stack.brokers} broker(s): `harness up --stack compose --brokers {CLUSTER}"
                               f"{self.compose_up_option}`")
        if stack.brokers < CLUSTER:
            raise HarnessError(f"--fault {self.name} needs the {CLUSTER}-broker cluster, but this stack has "
                               f"{stack.brokers} broker(s): `harness down --purge`, then `harness up --brokers "
                               f"{CLUSTER} {self.up_option}`")

    def setup(self, run) -> None:
        BrokerFault.setup(self, run)
        if self.of == "leader":
            self.of = run.exp.leader

    def choose(self, sup):
        node, what = BrokerFault.choose(self, sup) if self.of is None else super().choose(sup)
        if node is not None:
            self.touched.add(node)      # healed at the end whatever happens to the strike (a half-made cut)
        return node, what

    def finish(self, sup) -> None:
        """The broker faults' end (the node out is healed), then every node this fault ever aimed at is
        healed again: a strike that failed half-way and whose own undo failed too leaves nothing behind."""
        super().finish(sup)
        for node in sorted(getattr(self, "touched", ())):
            try:
                self.recover(node)
            except Exception as e:  # noqa: BLE001 - said in the report: the next run is refused until `harness down`
                self.broken = self.broken or f"{self.name}: node {node} could not be healed at the end: {e}"

    def recover(self, node: int) -> str | None:
        self.hands.heal(node)
        return "healed"

    def _recovered_word(self) -> str:
        return "healed"


class Partition(NetworkFault):
    name = "partition"
    action = "partition"
    options = {**NetworkFault.options,
               "mode": "one (default: the node reaches nobody, clients included) or halves (the node alone on one "
                       "side, the other nodes on the other; clients still reach both)"}

    def __init__(self, *args, mode: str = "one", **kwargs):
        super().__init__(*args, **kwargs)
        self.mode = mode

    @classmethod
    def from_options(cls, spec: str, opts: dict, params) -> "Partition":
        mode = opts.pop("mode", "one")
        if mode not in ("one", "halves"):
            raise HarnessError(f"--fault {spec}: mode must be one or halves, got {mode!r}")
        f = super().from_options(spec, opts, params)
        f.mode = mode
        return f

    def describe(self) -> dict:
        return {**super().describe(), "mode": self.mode}

    def strike(self, node: int) -> str | None:
        return self.hands.split(node) if self.mode == "halves" else self.hands.isolate(node)

    def recover(self, node: int) -> str | None:
        if self.mode == "halves":
            self.hands.heal_all()
            return "healed"
        return super().recover(node)


class ClientCut(NetworkFault):
    name = "client-cut"
    action = "client-cut"
    verb = "cut from its clients"

    def strike(self, node: int) -> str | None:
        return self.hands.cut_clients(node)


class Latency(NetworkFault):
    """The node's replies to its clients delayed (and perhaps some of its client packets dropped) for a while."""
    name = "latency"
    action = "latency"
    verb = "delayed"
    up_option = "--proxies"
    compose_up_option = " --proxies"
    excludes = {name: "a heal of the node's rules would end the other's cut or loss early"
                for name in ("partition", "client-cut")}
    options = {**NetworkFault.options,
               "ms": f"milliseconds each reply to a client is held (default 200, at most {MAX_LATENCY_MS}); longer "
                     f"than the clients' request timeout makes their outcomes unknown",
               "jitter": "up to this many ms more or less, drawn by Toxiproxy (default 100, at most ms)",
               "loss": f"share of the packets on the node's client link dropped, 0 to {MAX_LOSS} (default 0; iptables "
                       f"rules: the local cluster needs node networks as well, the compose cluster root)"}

    def __init__(self, *args, ms: int = 200, jitter: int = 100, loss: float = 0.0, **kwargs):
        super().__init__(*args, **kwargs)
        self.ms, self.jitter, self.loss = ms, jitter, loss

    @classmethod
    def from_options(cls, spec: str, opts: dict, params) -> "Latency":
        ms = number(spec, "ms", opts.pop("ms"), int, 0, MAX_LATENCY_MS) if "ms" in opts else 200
        jitter = number(spec, "jitter", opts.pop("jitter"), int, 0, ms) if "jitter" in opts else min(100, ms)
        loss = number(spec, "loss", opts.pop("loss"), float, 0.0, MAX_LOSS) if "loss" in opts else 0.0
        f = super().from_options(spec, opts, params)
        f.ms, f.jitter, f.loss = ms, jitter, loss
        return f

    def describe(self) -> dict:
        return {**super().describe(), "ms": self.ms, "jitter": self.jitter, "loss": self.loss}

    def check_stack(self, stack, docker_client=None) -> None:
        if stack.kind == "external":
            raise HarnessError(f"--fault {self.name} delays nodes the harness started; it never touches an external "
                               f"cluster (--bootstrap-servers)")
        self._needs_cluster(stack)
        BrokerFault.check_stack(self, stack, docker_client)
        why = self.hands.proxies()
        if why:
            raise HarnessError(f"--fault {self.name} cannot delay this cluster: {why}")
        if self.loss and (why := self.hands.networks()):
            raise HarnessError(f"--fault {self.name}:loss drops packets inside the nodes' own networks: {why}")
        busy = sorted(set(self.hands.delayed_nodes()) | set(self.hands.cut_nodes() if self.loss else []))
        if busy:
            raise HarnessError(f"--fault {self.name}: node {', '.join(map(str, busy))} is delayed or cut already "
                               f"(another run's fault, or one a killed harness left: `harness down` removes it)")

    def strike(self, node: int) -> str | None:
        return self.hands.delay(node, self.ms, self.jitter, self.loss)

    def recover(self, node: int) -> str | None:
        self.hands.undelay(node, self.loss)
        return "healed"
