"""The latency fault for real: a 3-node cluster whose clients reach each node through a Toxiproxy proxy
(`harness up --brokers 3 --proxies`), a node's replies held back longer than the producer's request timeout,
audited runs checked by an independent reader; and nothing of the delay left after a run, nor after `harness
down` when the harness was SIGKILLed mid-delay."""

import json
import os
import socket
import time

import pytest

from harness.stack import toxiproxy
from tests.conftest import harness, processes_of
from tests.integration.test_cluster import local_cluster, read_keys, run_exp, sigkill_mid_fault
from tests import kafka_login
from harness.reporting.summary import whole

pytestmark = [pytest.mark.integration,
              pytest.mark.skipif(toxiproxy.find_binary() is None and not os.environ.get("CI"),
                                 reason="toxiproxy-server is not installed (bash .ci/install-toxiproxy.sh)")]


def toxics(home) -> dict:
    rec = toxiproxy.LocalToxiproxy(home).running()
    assert rec is not None, "the stack's Toxiproxy is not running"
    return toxiproxy.Api(rec.ports["toxiproxy"]).toxics()


@pytest.fixture(scope="module")
def cluster():
    with local_cluster("harness-latency-test-", "--proxies") as c:
        yield c


def test_clients_reach_every_node_through_its_proxy(cluster):
    from confluent_kafka.admin import AdminClient
    rec = json.loads((cluster["home"] / "stack.json").read_text())
    proxies = [rec[f"proxy-{n}_port"] for n in (1, 2, 3)]
    assert cluster["status"]["bootstrap_servers"] == ",".join(f"127.0.0.1:{p}" for p in proxies)
    md = AdminClient(kafka_login.config(cluster["status"]["bootstrap_servers"])).list_topics(timeout=10)
    # the metadata the clients get names the proxies, so every later connection goes through them too
    assert sorted((b.host, b.port) for b in md.brokers.values()) == sorted(("127.0.0.1", p) for p in proxies)
    assert toxics(cluster["home"]) == {}


def test_a_delay_is_a_real_delay_on_the_wire_and_goes_when_removed(cluster):
    """Toxiproxy's own API, through the harness's client: a latency toxic holds a reply back."""
    rec = json.loads((cluster["home"] / "stack.json").read_text())
    api = toxiproxy.Api(toxiproxy.LocalToxiproxy(cluster["home"]).running().ports["toxiproxy"])

    def round_trip() -> float:      # a Kafka ApiVersions request (v0) to node 1 through its proxy
        with socket.create_connection(("127.0.0.1", rec["proxy-1_port"]), timeout=10) as s:
            body = (18).to_bytes(2, "big") + (0).to_bytes(2, "big") + (7).to_bytes(4, "big") + (0).to_bytes(2, "big")
            t = time.monotonic()
            s.sendall(len(body).to_bytes(4, "big") + body)
            assert len(s.recv(4)) == 4
            return time.monotonic() - t
    api.add_latency(1, 700, 0)
    try:
        assert toxics(cluster["home"]) == {"kafka-1": [toxiproxy.TOXIC]}
        assert round_trip() >= 0.65
    finally:
        api.remove_latency(1)
    # the fastest of a few: one trip slowed by a busy machine (a GC pause, the scheduler) is not the toxic
    assert toxics(cluster["home"]) == {} and min(round_trip() for _ in range(3)) < 0.65
    api.remove_latency(1)           # removing what is gone is no error


# about 36 s (two producer runs under latency): nightly; eos under latency runs every time
@pytest.mark.slow
def test_a_producer_under_latency_past_its_request_timeout_duplicates_only_without_idempotence(cluster, tmp_path):
    """The leader's replies held 2.5 s, past the producer's 1 s socket timeout: the request was applied, the
    producer does not know it and sends it again. The broker drops the second copy only when idempotent."""
    fault = "latency:of=leader,ms=2500,jitter=200,count=2,every=1,down=4"
    on = run_exp(cluster, tmp_path / "on", "producer", "--messages", "400", "--idempotence", "on", "--fault", fault)
    off = run_exp(cluster, tmp_path / "off", "producer", "--messages", "400", "--idempotence", "off", "--fault", fault)
    for d in (on, off):
        # The producer is paced (about 8 s for 400): the second delay strikes only if the first node answered
        # again soon enough, which depends on the machine; either way the report says so.
        rows = [f for f in d["faults"] if f["fault"] == "latency"]
        assert 1 <= len(rows) <= 2 and all(r["back_at"] and r["process"].startswith("toxic on proxy kafka-")
                                           for r in rows)
        assert (f"Only {len(rows)} of 2 latency faults struck (the workers finished first)" in whole(d)) == \
            (len(rows) < 2), whole(d)
        assert all("leader of" in r["target"] for r in rows) and d["counts"]["lost"] == 0
        keys = read_keys(d["stack"]["bootstrap_servers"], d["stack"]["output_topic"], "read_committed")
        assert len(keys) == 400 and sum(n - 1 for n in keys.values()) == d["counts"]["duplicates"]  # a reader agrees
    assert on["counts"]["duplicates"] == 0 and "kafka.read_committed.duplicates == 0" in on["predicted"]["expectations"]
    assert any(e.startswith("kafka.read_committed.duplicates <= ") for e in off["predicted"]["expectations"])
    assert toxics(cluster["home"]) == {}                          # healed


def test_eos_under_latency_stays_exact_under_read_committed(cluster, tmp_path):
    d = run_exp(cluster, tmp_path / "eos", "eos", "--messages", "200", "--fault", "planned-crash",
                "--fault", "latency:of=coordinator,ms=1200,count=1,down=4")
    (row,) = [f for f in d["faults"] if f["fault"] == "latency"]
    assert row["back_at"] and "transaction coordinator" in row["target"]
    k = d["kafka_output"]["read_committed"]
    assert (k["duplicates"], k["lost"]) == (0, 0)
    keys = read_keys(d["stack"]["bootstrap_servers"], d["stack"]["output_topic"], "read_committed")
    assert len(keys) == 200 and max(keys.values()) == 1


@pytest.mark.slow          # 76 s in CI; the default run keeps eos under latency and the harness killed mid-delay
def test_a_node_killed_and_restarted_comes_back_behind_its_proxy(cluster, tmp_path):
    """A broker fault restarts a node with the same listeners, its proxied one included: clients that
    bootstrap through the proxies see all three nodes again, and a delay still lands."""
    from confluent_kafka.admin import AdminClient
    d = run_exp(cluster, tmp_path / "kill", "eos", "--messages", "200", "--fault", "planned-crash",
                "--fault", "broker-kill:count=1,every=0.5,down=2", "--fault", "latency:count=1,ms=500,down=2")
    kills = [f for f in d["faults"] if f["fault"] == "broker-kill"]
    assert len(kills) == 1 and kills[0]["back_at"]
    k = d["kafka_output"]["read_committed"]
    assert (k["duplicates"], k["lost"]) == (0, 0)
    md = AdminClient(kafka_login.config(cluster["status"]["bootstrap_servers"])).list_topics(timeout=10)
    assert len(md.brokers) == 3                   # the restarted node advertises its proxy again
    props = (cluster["home"] / f"kafka-{kills[0]['node']}" / "server.properties").read_text()
    assert "PROXIED://" in props


def test_a_harness_killed_mid_delay_leaves_a_toxic_that_is_refused_and_down_removes(cluster, tmp_path):
    delayed = sigkill_mid_fault(cluster["env"], tmp_path / "r", ["offset-after", "--messages", "3000", "--fault",
                                                              "latency:count=1,every=0,down=120"],
                                lambda: toxics(cluster["home"]), timeout=120)
    (proxy,) = delayed
    assert toxics(cluster["home"]) == delayed                    # the killed harness could not remove it
    st = harness("status", env=cluster["env"], timeout=120)
    assert f"{proxy} delayed by Toxiproxy" in st.stdout + st.stderr
    refused = harness("run", "offset-after", "--messages", "10", "--fault", "latency", env=cluster["env"], timeout=300)
    assert refused.returncode == 2 and "is delayed by Toxiproxy" in refused.stderr and "harness down" in refused.stderr
    harness("down", env=cluster["env"], check=True, timeout=300)
    assert not processes_of(cluster["home"])                      # the toxic went with the server
    harness("up", env=cluster["env"], check=True, timeout=300)  # remembered: the proxies come back, clean
    assert toxics(cluster["home"]) == {}


@pytest.mark.slow
def test_eos_on_the_java_client_with_its_endtxn_requests_held_stays_exact(cluster, tmp_path):
    """delay-request: for the run, each node's Toxiproxy proxy forwards to the protocol proxy, which holds three
    EndTxn requests 2 s each; the proxy's own log names exactly those (EndTxn, the workers' transactional
    producers), read_committed stays exact, and afterwards every proxy forwards to its node again."""
    d = run_exp(cluster, tmp_path / "endtxn", "eos", "--client", "java", "--messages", "200",
                "--fault", "delay-request:api=EndTxn,ms=2000,count=3")
    log = tmp_path / "endtxn" / "report" / "protocol-proxy.jsonl"
    touched = [json.loads(line) for line in log.read_text().splitlines()]
    rows = [f for f in d["faults"] if f["fault"] == "delay-request"]
    assert len(touched) == len(rows) == 3, rows
    assert all(t["api"] == "EndTxn" and t["action"] == "delay" and t["held_ms"] >= 2000 and t["node"] in (1, 2, 3)
               and str(t["client_id"]).endswith("-producer") for t in touched), touched
    assert [(r["correlation_id"], r["client_id"]) for r in rows] == \
        [(t["correlation_id"], t["client_id"]) for t in touched]
    assert [t["fault"] for t in d["timeline"]["faults"]].count("delay-request") == 3
    k = d["kafka_output"]["read_committed"]
    assert (k["records"], k["duplicates"], k["lost"]) == (200, 0, 0)
    keys = read_keys(d["stack"]["bootstrap_servers"], d["stack"]["output_topic"], "read_committed")
    assert len(keys) == 200 and set(keys.values()) == {1}
    server = toxiproxy.LocalToxiproxy(cluster["home"])
    assert toxiproxy.Api(server.running().ports["toxiproxy"]).upstreams() == server.upstreams()


def rerouted(home) -> list[int]:
    server = toxiproxy.LocalToxiproxy(home)
    now, recorded = toxiproxy.Api(server.running().ports["toxiproxy"]).upstreams(), server.upstreams()
    return sorted(n for n in recorded if now.get(n) != recorded[n])


@pytest.mark.slow
def test_a_harness_killed_mid_protocol_fault_leaves_routes_status_names_and_the_next_fault_puts_back(cluster, tmp_path,
                                                                                                monkeypatch):
    """SIGKILLed while its protocol proxy holds requests: the proxy (a thread of the harness) and its ports go with
    it, Toxiproxy's proxies still forward to those ports; `harness status` says so, and the next protocol
    fault's check points each proxy back at its node before anything else."""
    left = sigkill_mid_fault(cluster["env"], tmp_path / "r", ["eos", "--messages", "3000", "--fault",
                                                              "delay-request:api=EndTxn,ms=1000,count=100"],
                             lambda: rerouted(cluster["home"]) == [1, 2, 3], timeout=180)
    assert left and rerouted(cluster["home"]) == [1, 2, 3]
    st = harness("status", env=cluster["env"], timeout=120)
    assert "the proxies of node 1, 2, 3 forward to a protocol proxy" in st.stdout + st.stderr
    from types import SimpleNamespace
    from harness.experiments import get
    from harness.faults import build
    from harness.run.params import RunParams
    (f,) = build(RunParams("eos", messages=10, faults=["delay-request:api=EndTxn"]), get("eos"))
    monkeypatch.setenv("HARNESS_HOME", str(cluster["home"]))
    f.check_stack(SimpleNamespace(kind="local", brokers=3))
    assert rerouted(cluster["home"]) == []
    d = run_exp(cluster, tmp_path / "after", "eos", "--messages", "100")     # the clients reach the nodes again
    assert d["kafka_output"]["read_committed"]["lost"] == 0
