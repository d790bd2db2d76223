"""Network faults for real: a 3-node cluster whose nodes each run in a network namespace of their own
(`harness up --brokers 3 --node-networks`), a node partitioned away and a node's clients cut by iptables rules
inside its namespace, audited runs; and nothing of the networks left after `harness down`, also when the harness
was SIGKILLed mid-partition."""

import signal
import subprocess
import sys
import time

import pytest

from harness.checker.effects import MAX_IDS

from harness.stack import netns
from tests.conftest import ROOT, harness
from tests.integration.test_cluster import local_cluster, read_keys, run_exp

pytestmark = [pytest.mark.integration,
              pytest.mark.skipif(netns.available() is not None, reason=f"no node networks: {netns.available()}")]


@pytest.fixture(scope="module")
def cluster():
    with local_cluster("harness-netfaults-test-", "--node-networks") as c:
        home = c["home"]
        yield {**c, "layout": netns.read_record(home)}
    layout = netns.Layout(netns.prefix_of(home), 1, 3)
    namespaces = [n for n in netns.existing_namespaces() if n.startswith(layout.prefix)]
    assert not namespaces, f"node networks survived `harness down`: {namespaces}"


def test_the_nodes_listen_on_their_own_addresses(cluster):
    layout = cluster["layout"]
    assert layout is not None and layout.nodes == 3
    boot = cluster["status"]["bootstrap_servers"]
    assert all(layout.address(n) in boot for n in (1, 2, 3)) and "127.0.0.1" not in boot


def test_eos_with_its_coordinator_partitioned_away_stays_exact_under_read_committed(cluster, tmp_path):
    d = run_exp(cluster, tmp_path / "p", "eos", "--messages", "200", "--fault", "planned-crash",
                "--fault", "partition:of=coordinator,count=1,down=4")
    cuts = [f for f in d["faults"] if f["fault"] == "partition"]
    assert len(cuts) == 1 and cuts[0]["back_at"] and "transaction coordinator" in cuts[0]["target"]
    k = d["kafka_output"]["read_committed"]
    assert (k["duplicates"], k["lost"]) == (0, 0)
    keys = read_keys(d["stack"]["bootstrap_servers"], d["stack"]["output_topic"], "read_committed")
    assert len(keys) == 200 and max(keys.values()) == 1         # an independent reader agrees
    for n in (1, 2, 3):                                           # healed: no rule left in any node
        assert netns.rules_in(cluster["layout"], n) == []


def test_eos_with_the_cluster_split_in_halves_stays_exact(cluster, tmp_path):
    d = run_exp(cluster, tmp_path / "h", "eos", "--messages", "200",
                "--fault", "partition:mode=halves,of=coordinator,count=1,down=4")
    cuts = [f for f in d["faults"] if f["fault"] == "partition"]
    assert len(cuts) == 1 and cuts[0]["back_at"]
    k = d["kafka_output"]["read_committed"]
    assert (k["duplicates"], k["lost"]) == (0, 0)
    for n in (1, 2, 3):
        assert netns.rules_in(cluster["layout"], n) == []


def test_an_acks_1_producer_with_its_leader_partitioned_away_names_what_it_lost(cluster, tmp_path):
    # in halves the leader keeps its clients: with acks=1 it acknowledges what its followers never fetch
    d = run_exp(cluster, tmp_path / "a1", "producer", "--messages", "300", "--acks", "1",
                "--fault", "partition:mode=halves,of=leader,count=1,down=6")
    assert [f["fault"] for f in d["faults"]] == ["partition"] and "leader of" in d["faults"][0]["target"]
    seen = read_keys(d["stack"]["bootstrap_servers"], d["stack"]["output_topic"], "read_committed")
    missing = {f"pay-{i:06d}" for i in range(1, 301)} - set(seen)
    acked_lost = set(d["anomalies"]["lost_ids"])           # the first MAX_IDS of them, the report's examples
    assert acked_lost <= missing and d["anomalies"]["lost_total"] == d["counts"]["lost"]        # as a reader finds
    assert len(acked_lost) == min(d["counts"]["lost"], MAX_IDS) and d["counts"]["lost"] <= len(missing)
    assert d["anomaly_classes"]["classes"]["lost-write"]["allowed"]


def test_a_client_cut_node_comes_back_and_the_run_is_exact(cluster, tmp_path):
    d = run_exp(cluster, tmp_path / "c", "eos-dedupe", "--messages", "200", "--fault", "client-cut:count=1,down=3")
    assert [f["fault"] for f in d["faults"] if f["fault"] == "client-cut"] == ["client-cut"]
    assert (d["counts"]["duplicates"], d["counts"]["lost"]) == (0, 0)


@pytest.mark.slow          # 43 s; the default run keeps test_latency's harness killed mid-delay
def test_a_harness_killed_mid_partition_leaves_rules_that_down_removes(cluster, tmp_path):
    layout = cluster["layout"]
    run = subprocess.Popen([sys.executable, "-m", "harness.cli", "run", "offset-after", "--messages", "3000",
                            "--quiet", "--out", str(tmp_path / "r"), "--fault", "partition:count=1,every=0,down=120"],
                           cwd=ROOT, env={**__import__("os").environ, **cluster["env"]},
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline, cut = time.time() + 120, None
        while time.time() < deadline and cut is None:
            cut = next((n for n in (1, 2, 3) if netns.rules_in(layout, n)), None)
            time.sleep(0.2)
        assert cut, "no node was partitioned"
    finally:
        run.send_signal(signal.SIGKILL)
        run.wait()
    assert netns.rules_in(layout, cut)                  # the killed harness could not heal it
    st = harness("status", env=cluster["env"], timeout=120)
    assert f"node {cut} is cut off by network rules" in st.stdout + st.stderr
    refused = harness("run", "offset-after", "--messages", "10", "--fault", "partition", env=cluster["env"], timeout=300)
    assert refused.returncode == 2 and f"Kafka node {cut} is cut off by network rules" in refused.stderr
    harness("down", env=cluster["env"], check=True, timeout=300)
    assert not [n for n in netns.existing_namespaces() if n.startswith(layout.prefix)]
    assert not netns.read_record(cluster["home"])
    harness("up", env=cluster["env"], check=True, timeout=300)    # remembered: the nodes get networks again
    assert netns.read_record(cluster["home"]) is not None
    assert all(netns.rules_in(netns.read_record(cluster["home"]), n) == [] for n in (1, 2, 3))
