"""partition, client-cut: network faults of the Kafka cluster, on the same schedule as the broker faults.

A broker fault stops a node; a network fault leaves it running and cuts what
it can reach, the harder case: a request that timed out may still have been
applied, a producer's or coordinator's view of who leads goes stale. Both act
on the local cluster's node networks (`harness up --brokers 3
--node-networks`: each node in a network namespace of its own, see
stack/netns.py), with iptables rules inside the node's namespace, so nothing
of the machine's own network is touched:

- partition: the node reaches nobody and nobody reaches it (clients and the
  other nodes), for a seeded time, then heals; `of=` picks what the
  experiment depends on (input, output, coordinator, or leader: the
  experiment's own), else a seeded node. `mode=halves` cuts only the links
  between that node (a minority of one) and the other nodes (the majority):
  clients still reach both sides.
- client-cut: the node's client link answers every TCP packet with a reset
  (open connections break at their next packet, new ones are refused at
  once); the other nodes still reach it.

`count`, `every` and `down` are the broker faults' (faults/broker.py): the
schedule starts with the workers' first record, one node at a time, and the
run does not end while a node is cut. Whatever the run's end, `finish` heals
the node; a SIGKILLed harness's rules go with the namespaces (`harness down`).
"""

from __future__ import annotations

from ..errors import HarnessError
from .broker import BrokerFault, LeaderKill


class NetworkFault(LeaderKill):
    """A broker fault whose strike cuts the node's network and whose recovery heals it."""
    verb = "cut off"
    # A heal flushes the node's whole table, and a node being restarted cannot be cut: one at a time.
    excludes = {name: "both act on the same nodes, and a heal would end the other's cut early"
                for name in ("partition", "client-cut", "broker-kill", "broker-pause", "leader-kill")}
    options = {**BrokerFault.options,
               "of": "input, output, coordinator or leader (the experiment's own); default: a seeded node"}

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
        if stack.kind == "compose":
            raise HarnessError(f"--fault {self.name} runs on the local cluster's node networks (`harness up "
                               f"--brokers 3 --node-networks`), not yet on the compose cluster")
        super().check_stack(stack, docker_client)
        why = self.hands.networks()
        if why:
            raise HarnessError(f"--fault {self.name} cannot cut this cluster: {why}")
        cut = self.hands.cut_nodes()
        if cut:
            raise HarnessError(f"--fault {self.name}: node {', '.join(map(str, cut))} is cut already (another "
                               f"run's fault, or one a killed harness left: `harness down` removes it)")

    def setup(self, run) -> None:
        BrokerFault.setup(self, run)
        if self.of == "leader":
            self.of = run.exp.leader

    def choose(self, sup):
        return BrokerFault.choose(self, sup) if self.of is None else super().choose(sup)

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
