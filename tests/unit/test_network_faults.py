"""partition and client-cut (faults/network.py) on hands that record what was done: the broker faults' schedule,
with a cut for a strike and a heal for a recovery; their options and refusals in one line."""

import pytest

from harness.core.errors import HarnessError
from harness.experiments import get
from harness.faults import build
from harness.faults.network import ClientCut, Partition
from harness.run.params import RunParams
from tests.unit.test_broker_faults import FakeHands, drive, fake_sup


class NetHands(FakeHands):
    def __init__(self, networks=None):
        super().__init__()
        self.cut, self.why = {}, networks

    def networks(self):
        return self.why

    def isolate(self, node):
        self.calls.append(("isolate", node))
        self.cut[node] = "isolated"
        return f"rules in hk-n{node}"

    def cut_clients(self, node):
        self.calls.append(("cut_clients", node))
        self.cut[node] = "clients"
        return f"rules in hk-n{node}"

    def split(self, node):
        self.calls.append(("split", node))
        self.cut[node] = "minority"
        return f"rules in hk-n{node}, ..."

    def heal(self, node):
        self.calls.append(("heal", node))
        self.cut.pop(node, None)

    def heal_all(self):
        self.calls.append(("heal", "all"))
        self.cut.clear()

    def answers(self, node):
        return node not in self.cut


@pytest.mark.parametrize("cls, strike", [(Partition, "isolate"), (ClientCut, "cut_clients")])
def test_a_network_fault_cuts_one_node_at_a_time_then_heals_it(cls, strike):
    f = cls(count=3, every=1.0, down=2.0, seed=7)
    f.hands = NetHands()
    drive(f, fake_sup())
    assert [c[0] for c in f.hands.calls] == [strike, "heal"] * 3
    assert all(a[1] == b[1] for a, b in zip(f.hands.calls[::2], f.hands.calls[1::2]))
    rows = f.entries([], [])
    assert len(rows) == 3 and all(r["fault"] == cls.name and r["signal"] == cls.name for r in rows)
    assert all(r["back_at"] >= r["recovered_at"] > r["time"] for r in rows) and not f.hands.cut
    assert f.sentence(f.story([])).startswith(f" {cls.name}: node ")


def test_a_run_stopped_mid_cut_heals_the_node():
    f = Partition(count=1, every=0.0, down=600.0, seed=1)
    f.hands = NetHands()
    drive(f, fake_sup(), seconds=3)
    assert f.state == "out" and f.hands.cut
    f.finish(fake_sup())
    assert not f.hands.cut and f.hands.calls[-1][0] == "heal"


def test_network_fault_options_and_refusals_are_one_line():
    p = RunParams("eos", messages=10, faults=["partition:of=coordinator,count=1,down=2"])
    (f,) = build(p, get("eos"))
    assert (f.of, f.count, f.down) == ("coordinator", 1, 2.0)
    with pytest.raises(HarnessError, match="of must be input, output, coordinator or leader"):
        build(RunParams("eos", messages=10, faults=["client-cut:of=me"]), get("eos"))
    with pytest.raises(HarnessError, match="--fault partition needs a transactional Python worker"):
        build(RunParams("offset-after", messages=10, faults=["partition:of=coordinator"]), get("offset-after"))
    (f,) = build(RunParams("offset-after", messages=10, faults=["client-cut"]), get("offset-after"))
    assert f.of is None
    # a stack whose nodes have no networks of their own, or with a node cut already, is refused before anything
    # starts; so are an external cluster and the compose cluster, in words about networks
    from types import SimpleNamespace
    import harness.stack.brokers as brokers
    real = brokers.for_stack
    local = SimpleNamespace(kind="local", brokers=3)
    try:
        brokers.for_stack = lambda stack, name, client=None: NetHands("the Kafka nodes have no networks of their own")
        with pytest.raises(HarnessError, match="--fault client-cut cannot cut this cluster: the Kafka nodes have no networks"):
            f.check_stack(local)
        left = NetHands()
        left.cut_nodes = lambda: [2]
        brokers.for_stack = lambda stack, name, client=None: left
        with pytest.raises(HarnessError, match="node 2 is cut already .* `harness down` removes it"):
            f.check_stack(local)
        with pytest.raises(HarnessError, match="never touches an external cluster"):
            f.check_stack(SimpleNamespace(kind="external", brokers=3))
    finally:
        brokers.for_stack = real


def test_network_faults_run_alone_among_the_faults_that_act_on_nodes():
    with pytest.raises(HarnessError, match="--fault partition cannot run with client-cut"):
        build(RunParams("eos", messages=10, faults=["partition", "client-cut"]), get("eos"))
    with pytest.raises(HarnessError, match="cannot run with broker-kill"):
        build(RunParams("eos", messages=10, faults=["broker-kill", "partition"]), get("eos"))
    assert len(build(RunParams("eos", messages=10, faults=["partition", "planned-crash"]), get("eos"))) == 2


def test_a_cut_refused_half_way_leaves_no_rule(monkeypatch, tmp_path):
    from harness.stack import brokers, netns
    hands = brokers.LocalBrokers(tmp_path)
    layout = netns.Layout("hkabcdef", 7, 3)
    monkeypatch.setattr(hands.by_id[2], "network", lambda: layout)
    monkeypatch.setattr(hands, "running", lambda node: True)
    applied, healed = [], []

    def apply(lay, node, rules):
        applied.append(rules[0])
        raise HarnessError("iptables: the xtables lock is held")
    monkeypatch.setattr(netns, "apply", apply)
    monkeypatch.setattr(netns, "heal", lambda lay, node: healed.append(node))
    with pytest.raises(HarnessError, match="xtables lock"):
        hands.isolate(2)
    assert applied and healed == [2]


def test_a_partition_in_halves_cuts_the_links_between_the_sides_and_heals_both():
    (f,) = build(RunParams("eos", messages=10, faults=["partition:mode=halves,count=2,every=1,down=2"]), get("eos"))
    assert f.mode == "halves" and f.describe()["mode"] == "halves"
    f.hands = NetHands()
    drive(f, fake_sup())
    assert [c[0] for c in f.hands.calls] == ["split", "heal"] * 2 and f.hands.calls[1] == ("heal", "all")
    with pytest.raises(HarnessError, match="mode must be one or halves"):
        build(RunParams("eos", messages=10, faults=["partition:mode=thirds"]), get("eos"))


class DelayHands(NetHands):
    """Hands with proxies: a delay is a toxic, and a heal of the delay removes it."""

    def __init__(self, proxies=None, networks=None):
        super().__init__(networks)
        self.toxic, self.no_proxies = {}, proxies

    def proxies(self):
        return self.no_proxies

    def delayed_nodes(self):
        return sorted(self.toxic)

    def cut_nodes(self):
        return sorted(self.cut)

    def delay(self, node, ms, jitter, loss=0.0):
        self.calls.append(("delay", node, ms, jitter, loss))
        self.toxic[node] = (ms, jitter)
        return f"toxic on proxy kafka-{node}"

    def undelay(self, node, loss=0.0):
        self.calls.append(("undelay", node, loss))
        self.toxic.pop(node, None)

    def answers(self, node):
        return True         # a delayed node still answers on its own listener


def test_latency_delays_one_node_at_a_time_with_its_options_then_removes_the_toxic():
    from harness.faults.network import Latency
    (f,) = build(RunParams("producer", messages=10, faults=["latency:ms=300,jitter=50,count=2,down=1"]),
                 get("producer"))
    assert isinstance(f, Latency) and (f.ms, f.jitter, f.loss, f.count) == (300, 50, 0.0, 2)
    assert f.describe()["ms"] == 300 and f.describe()["jitter"] == 50
    f.hands = DelayHands()
    drive(f, fake_sup())
    assert [c[0] for c in f.hands.calls] == ["delay", "undelay"] * 2
    assert all(c[2:] == (300, 50, 0.0) for c in f.hands.calls if c[0] == "delay") and not f.hands.toxic
    rows = f.entries([], [])
    assert [r["signal"] for r in rows] == ["latency"] * 2 and rows[0]["process"].startswith("toxic on proxy")
    g = Latency(count=1, every=0.0, down=600.0, seed=1)
    g.hands = DelayHands()
    drive(g, fake_sup(), seconds=3)
    assert g.state == "out" and g.hands.toxic
    g.finish(fake_sup())                       # the run ends mid-delay (Ctrl-C, time limit): the toxic goes
    assert not g.hands.toxic


@pytest.mark.parametrize("spec, says", [
    ("latency:ms=-1", "ms must be between 0 and 120000"),
    ("latency:ms=200000", "ms must be between 0 and 120000"),
    ("latency:ms=100,jitter=101", "jitter must be between 0 and 100"),
    ("latency:loss=0.9", "loss must be between 0 and 0.5"),
    ("latency:ms=fast", "ms must be a whole number"),
    ("latency:delay=3", "unknown option"),
])
def test_latency_options_out_of_range_are_refused_in_one_line(spec, says):
    with pytest.raises(HarnessError, match=says):
        build(RunParams("producer", messages=10, faults=[spec]), get("producer"))


def test_latency_refuses_a_stack_it_cannot_delay_before_anything_starts():
    from types import SimpleNamespace
    import harness.stack.brokers as brokers
    (f,) = build(RunParams("producer", messages=10, faults=["latency"]), get("producer"))
    (lossy,) = build(RunParams("producer", messages=10, faults=["latency:loss=0.1"]), get("producer"))
    local = SimpleNamespace(kind="local", brokers=3)
    real = brokers.for_stack
    try:
        brokers.for_stack = lambda stack, name, client=None: DelayHands("no proxies: `harness up --brokers 3 --proxies`")
        with pytest.raises(HarnessError, match="--fault latency cannot delay this cluster: no proxies"):
            f.check_stack(local)
        brokers.for_stack = lambda stack, name, client=None: DelayHands(networks="no networks of their own")
        f.check_stack(local)                                   # no loss: node networks not needed
        with pytest.raises(HarnessError, match="latency:loss drops packets inside the nodes' own networks"):
            lossy.check_stack(local)
        left = DelayHands()
        left.toxic[3] = (200, 100)
        brokers.for_stack = lambda stack, name, client=None: left
        with pytest.raises(HarnessError, match="node 3 is delayed or cut already .* `harness down` removes it"):
            f.check_stack(local)
        with pytest.raises(HarnessError, match="never touches an external cluster"):
            f.check_stack(SimpleNamespace(kind="external", brokers=3))
        # the compose cluster takes it through the same hands (its Toxiproxy container), once it has proxies
        brokers.for_stack = lambda stack, name, client=None: DelayHands(
            "no proxies: `harness up --stack compose --brokers 3 --proxies`")
        with pytest.raises(HarnessError, match="cannot delay this cluster: no proxies: `harness up --stack compose"):
            f.check_stack(SimpleNamespace(kind="compose", brokers=3))
        brokers.for_stack = lambda stack, name, client=None: DelayHands()
        lossy.check_stack(SimpleNamespace(kind="compose", brokers=3))
        with pytest.raises(HarnessError, match="`harness up --stack compose --brokers 3 --proxies`"):
            f.check_stack(SimpleNamespace(kind="compose", brokers=1))
    finally:
        brokers.for_stack = real
    with pytest.raises(HarnessError, match="--fault latency cannot run with partition"):
        build(RunParams("eos", messages=10, faults=["latency", "partition"]), get("eos"))
    assert len(build(RunParams("eos", messages=10, faults=["latency", "broker-kill"]), get("eos"))) == 2


class FakeApi:
    """Toxiproxy's API as the hands use it: the nodes whose proxy has the latency toxic."""

    def __init__(self):
        self.toxic = set()

    def add_latency(self, node, ms, jitter):
        self.toxic.add(node)

    def remove_latency(self, node):
        self.toxic.discard(node)

    def delayed_nodes(self):
        return sorted(self.toxic)


def test_a_delay_whose_loss_rules_are_refused_leaves_no_toxic(monkeypatch, tmp_path):
    from harness.stack import brokers, netns
    api = FakeApi()
    hands = brokers.LocalBrokers(tmp_path)
    monkeypatch.setattr(hands, "_api", lambda: api)
    monkeypatch.setattr(hands.by_id[1], "network", lambda: netns.Layout("hkabcdef", 7, 3))

    def apply(lay, node, rules):
        raise HarnessError("iptables: the xtables lock is held")
    monkeypatch.setattr(netns, "apply", apply)
    monkeypatch.setattr(netns, "heal", lambda lay, node: None)
    with pytest.raises(HarnessError, match="xtables lock"):
        hands.delay(1, 200, 100, loss=0.1)
    assert api.toxic == set()
    assert hands.delay(1, 200, 100) == "toxic on proxy kafka-1" and api.toxic == {1}


@pytest.mark.parametrize("spec, up", [("partition", "--node-networks"), ("latency", "--proxies")])
def test_a_one_broker_stack_is_refused_with_the_whole_way_to_a_cluster_that_takes_the_fault(spec, up):
    from types import SimpleNamespace
    (f,) = build(RunParams("producer", messages=10, faults=[spec]), get("producer"))
    with pytest.raises(HarnessError, match=f"needs the 3-broker cluster.*`harness up --brokers 3 {up}`"):
        f.check_stack(SimpleNamespace(kind="local", brokers=1))


def test_compose_network_faults_put_rules_inside_the_broker_containers_namespaces(monkeypatch):
    """On the compose cluster the hands enter each broker container's namespace by its pid (from the engine),
    with rules chosen by port or peer address; half a split is undone."""
    from harness.stack import brokers, container_net
    from tests.unit.test_broker_faults import FakeDocker
    docker = FakeDocker()
    for n, c in enumerate(docker.by_service.values(), 1):
        c.attrs = {"State": {"Pid": 1000 + n}, "NetworkSettings": {"Networks": {"harness_default": {
            "IPAddress": f"172.30.0.{10 + n}"}}}}
    applied, healed, fail = [], [], {}

    def apply(pid, rules):
        if pid in fail:
            raise HarnessError("iptables: the xtables lock is held")
        applied.append((pid, rules))
    monkeypatch.setattr(container_net, "apply", apply)
    monkeypatch.setattr(container_net, "heal", lambda pid: healed.append(pid))
    hands = brokers.ComposeBrokers(docker)
    assert hands.isolate(2) == "rules in container harness-kafka-2-1"
    assert applied[-1] == (1002, container_net.isolate_rules(None, 2))
    hands.cut_clients(3)
    # its client listeners' ports only: the published one and the one its proxy forwards to
    assert applied[-1][0] == 1003 and [r[5] for r in applied[-1][1]] == ["29094", "29094", "9094", "9094"]
    applied.clear()
    hands.split(1)
    assert [(pid, [r[2:4] for r in rules]) for pid, rules in applied] == [
        (1001, [["-s", "172.30.0.12"], ["-d", "172.30.0.12"], ["-s", "172.30.0.13"], ["-d", "172.30.0.13"]]),
        (1002, [["-s", "172.30.0.11"], ["-d", "172.30.0.11"]]), (1003, [["-s", "172.30.0.11"], ["-d", "172.30.0.11"]])]
    fail[1003] = True
    healed.clear()
    with pytest.raises(HarnessError, match="xtables lock"):
        hands.split(1)
    assert healed == [1001, 1002, 1003]
    docker.by_service["kafka-2"].status = "exited"
    assert hands.isolate(2) is None                     # no running container: no target
    with pytest.raises(HarnessError, match="no container process to enter"):
        container_net.enter(0, ["iptables", "-S"])
    assert container_net.enter(1234, ["iptables", "-S"]) == ["nsenter", "--target", "1234", "--net", "iptables", "-S"]


def test_a_network_fault_on_a_one_broker_compose_stack_names_the_compose_cluster():
    from types import SimpleNamespace
    (f,) = build(RunParams("eos", messages=10, faults=["partition"]), get("eos"))
    with pytest.raises(HarnessError, match="`harness up --stack compose --brokers 3`"):
        f.check_stack(SimpleNamespace(kind="compose", brokers=1))


def test_a_rule_is_never_put_in_the_machines_own_network_namespace():
    """A pid the engine names may share the harness's namespace (an engine in another pid namespace, a
    container on the host's network, a reused pid): nothing is run there, least of all a flush."""
    import os
    from harness.stack import container_net
    with pytest.raises(HarnessError, match="shares this machine's network namespace"):
        container_net.heal(os.getpid())
    with pytest.raises(HarnessError, match="cannot open the network namespace"):
        container_net.rules_in(2 ** 22 + 12345)          # no such process


def test_a_strike_that_failed_half_way_is_healed_at_the_end_of_the_run():
    class Failing(NetHands):
        def isolate(self, node):
            self.calls.append(("isolate", node))
            self.cut[node] = "half"             # one rule went in, then the next was refused
            raise HarnessError("iptables: the xtables lock is held")
    f = Partition(count=1, every=0.0, down=2.0, seed=3)
    f.hands = Failing()
    drive(f, fake_sup(), seconds=3)
    assert f.hands.cut and f.skipped                      # the strike counted as skipped, its half-cut left
    f.finish(fake_sup())
    assert not f.hands.cut and f.hands.calls[-1][0] == "heal"


def test_compose_latency_is_a_toxic_in_the_stacks_toxiproxy_container_and_half_a_fault_is_none(monkeypatch):
    """The compose cluster's hands: proxies only when the stack was started with them and its Toxiproxy
    container runs; the delay a toxic through its API; loss rules on the proxied listener inside the node's
    container, refused half-way: no toxic left."""
    from harness.stack import compose, compose_brokers, container_net
    from tests.unit.test_broker_faults import FakeDocker
    from harness.stack import toxiproxy
    docker = FakeDocker(services=("kafka-1", "kafka-2", "kafka-3", "postgres", "toxiproxy"))
    for n, c in enumerate(docker.by_service.values(), 1):
        c.attrs = {"State": {"Pid": 1000 + n}}
    proxy = docker.by_service["toxiproxy"]
    proxy.attrs["NetworkSettings"] = {"Ports": {"8474/tcp": [{"HostIp": "127.0.0.1", "HostPort": "28475"}]}}
    real_list = docker.containers.list
    docker.containers.list = lambda all=False, filters=None: [c for c in real_list(all=all, filters=filters)
                                                              if all or c.status == "running"]
    hands = compose_brokers.ComposeBrokers(docker)
    api, asked = FakeApi(), []
    monkeypatch.setattr(toxiproxy, "Api", lambda port: asked.append(port) or api)
    monkeypatch.setattr(compose, "recorded_proxies", lambda state=None: False)
    assert "do not go through proxies: `harness up --stack compose --brokers 3 --proxies`" in hands.proxies()
    monkeypatch.setattr(compose, "recorded_proxies", lambda state=None: True)
    assert hands.proxies() is None and asked == [28475]           # the port the container publishes, no other
    proxy.attrs["NetworkSettings"]["Ports"]["8474/tcp"][0]["HostIp"] = "0.0.0.0"
    assert "publishes no API port on 127.0.0.1" in hands.proxies()
    proxy.attrs["NetworkSettings"]["Ports"]["8474/tcp"][0]["HostIp"] = "127.0.0.1"
    proxy.status = "exited"
    assert "Toxiproxy container is not running" in hands.proxies()
    with pytest.raises(HarnessError, match="Toxiproxy container is not running"):
        hands.delay(1, 300, 50)                 # never an API call to a port nobody checked
    proxy.status = "running"

    def engine_gone(**kw):
        raise ConnectionError("Connection aborted")
    docker.containers.list = engine_gone
    assert "the Docker engine did not list the stack's Toxiproxy container: Connection aborted" in hands.proxies()
    docker.containers.list = lambda all=False, filters=None: [c for c in real_list(all=all, filters=filters)
                                                              if all or c.status == "running"]
    applied, healed = [], []

    def refuse(pid, rules):
        raise HarnessError("iptables: the xtables lock is held")
    monkeypatch.setattr(container_net, "apply", refuse)
    monkeypatch.setattr(container_net, "heal", lambda pid: healed.append(pid))
    with pytest.raises(HarnessError, match="xtables lock"):
        hands.delay(2, 300, 50, loss=0.2)
    assert api.toxic == set() and healed.count(1002) >= 1
    monkeypatch.setattr(container_net, "apply", lambda pid, rules: applied.append((pid, rules)))
    assert hands.delay(2, 300, 50, loss=0.2) == "toxic on proxy kafka-2, rules in container harness-kafka-2-1"
    assert applied == [(1002, container_net.loss_rules(compose.PROXIED_PORT, 0.2))] and api.toxic == {2}
    assert "--dport 9094 -m statistic --mode random --probability 0.2000 -j DROP" in " ".join(applied[0][1][0])
    assert hands.delayed_nodes() == [2]
    hands.undelay(2, loss=0.2)
    assert api.toxic == set() and healed[-1] == 1002
    assert hands.delay(1, 300, 50) == "toxic on proxy kafka-1"
    docker.by_service["kafka-3"].status = "exited"          # no container to drop packets in: no fault at all
    with pytest.raises(HarnessError, match="kafka-3 is not running: its packets cannot be dropped"):
        hands.delay(3, 300, 50, loss=0.2)
    assert 3 not in api.toxic


def test_toxiproxy_answers_that_are_not_its_json_are_one_line():
    from harness.stack import toxiproxy
    api = toxiproxy.Api(1)
    for answer in ({"kafka-1": {"toxics": 5}}, {"kafka-1": {"toxics": "x"}}):
        api.proxies = lambda answer=answer: answer
        with pytest.raises(HarnessError, match="not its JSON"):
            api.toxics()
    api.proxies = lambda: {"kafka-\u00b2": {"toxics": [{"name": "t"}]}, "kafka-99999": {"toxics": [{"name": "t"}]},
                           "kafka-2": {"toxics": [{"name": "t"}]}, "other-3": {"toxics": [{"name": "t"}]}}
    assert api.delayed_nodes() == [2]


def test_the_compose_delay_check_is_unknown_never_a_traceback_when_the_engine_is_gone(monkeypatch):
    from harness.stack import compose, compose_brokers
    monkeypatch.setattr(compose, "recorded_proxies", lambda state=None: False)
    assert compose_brokers.delayed_nodes() == []
    monkeypatch.setattr(compose, "recorded_proxies", lambda state=None: True)
    monkeypatch.setattr(compose, "engine_available", lambda: "no Docker engine answers")
    assert compose_brokers.delayed_nodes() is None
    monkeypatch.setattr(compose, "engine_available", lambda: None)

    def sdk_fails(*a, **k):
        raise RuntimeError("Error while fetching server API version")
    monkeypatch.setattr(compose_brokers, "ComposeBrokers", sdk_fails)
    assert compose_brokers.delayed_nodes() is None


def test_only_a_compose_cluster_record_has_proxies(tmp_path, monkeypatch):
    import json
    from harness.stack import compose
    monkeypatch.setenv("HARNESS_HOME", str(tmp_path))
    for rec, has in (({"kind": "local", "brokers": 3, "proxies": True}, False),
                     ({"kind": "compose", "variant": "single", "proxies": True}, False),
                     ({"kind": "compose", "variant": "cluster", "proxies": "yes"}, False),
                     ({"kind": "compose", "variant": "cluster", "proxies": True}, True)):
        (tmp_path / "stack.json").write_text(json.dumps(rec))
        assert compose.recorded_proxies() is has, rec
    (tmp_path / "stack.json").write_text(json.dumps({"kind": "local", "brokers": 3, "proxies": True}))
    assert compose.proxies_for("single", None) is False          # a local record asks nothing of compose
