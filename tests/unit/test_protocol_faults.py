"""The protocol faults (faults/protocol.py) and their proxy (faults/protocol_proxy.py, kafka_wire.py): Kafka's
framing on hand-made bytes, the proxy in front of a stand-in node that answers like a broker (real sockets on
127.0.0.1, no Kafka), the faults' options, refusals and placement on hands that record what was done."""

import json
import socket
import struct
import threading
import time
from types import SimpleNamespace

import pytest

from harness.core.errors import HarnessError
from harness.experiments import get
from harness.faults import build
from harness.faults import kafka_wire as wire
from harness.faults.protocol_proxy import ProtocolProxy, Rule
from harness.run.params import RunParams
from tests.raw_kafka_produce import _read as _exactly       # n bytes from a socket, EOFError when it closes


def request(api: str, version: int, corr: int, client: str = "worker-1", body: bytes = b"") -> bytes:
    head = struct.pack(">hhih", wire.API_KEYS[api], version, corr, len(client)) + client.encode()
    if version >= wire.FLEXIBLE_FROM[api]:
        head += b"\0"
    return struct.pack(">i", len(head) + len(body)) + head + body


def produce_body(acks: int) -> bytes:        # Produce v3: transactional id (null), acks, timeout, (no topics)
    return struct.pack(">hhii", -1, acks, 1000, 0)


class Node:
    """A stand-in broker on 127.0.0.1: remembers each request (header, when) and answers all but an acks=0
    Produce with its correlation id, a zero throttle time and error code 0 (the layout of EndTxn's answer)."""

    def __init__(self):
        self.seen, self.sock = [], socket.create_server(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn):
        with conn:
            while True:
                try:
                    size = wire.frame_size(_exactly(conn, 4))
                    body = _exactly(conn, size)
                except (OSError, EOFError):
                    return
                head = wire.request_header(body)
                self.seen.append((head, time.monotonic()))
                if not wire.expects_response(head, body):
                    continue
                flexible = wire.flexible_response(head["api"], head["version"])
                out = struct.pack(">i", head["correlation_id"]) + (b"\0" if flexible else b"") + struct.pack(">ih", 0, 0)
                out += b"\0" if flexible else b""
                conn.sendall(struct.pack(">i", len(out)) + out)

    def close(self):
        self.sock.close()


def answer(conn) -> tuple[int, int]:
    """(correlation id, error code) of the next answer to a non-flexible EndTxn/ApiVersions-like request."""
    body = _exactly(conn, wire.frame_size(_exactly(conn, 4)))
    corr, _throttle, error = struct.unpack(">iih", body[:10])
    return corr, error


@pytest.fixture
def node():
    n = Node()
    yield n
    n.close()


def proxied(node, tmp_path, rule):
    proxy = ProtocolProxy({1: ("127.0.0.1", node.port)}, rule, tmp_path / "touched.jsonl")
    ports = proxy.start()
    return proxy, ports[1]


def logged(tmp_path) -> list[dict]:
    path = tmp_path / "touched.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def wait_for(cond, seconds=20.0):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if cond():
            return True
        time.sleep(0.02)
    return False


# -- the wire ---------------------------------------------------------------------------------------------

def test_a_request_header_is_read_and_an_error_answer_has_the_brokers_layout():
    frame = request("EndTxn", 3, 42, "txn-worker")
    head = wire.request_header(frame[4:])
    assert head == {"api_key": 26, "api": "EndTxn", "version": 3, "correlation_id": 42, "client_id": "txn-worker"}
    # v3: flexible (a tagged-fields byte after the correlation id and at the end); v5 adds producer id and epoch
    assert wire.error_response(head, 15) == struct.pack(">iiBihB", 12, 42, 0, 0, 15, 0)
    assert wire.error_response({**head, "version": 1}, 47) == struct.pack(">iiih", 10, 42, 0, 47)
    assert wire.error_response({**head, "version": 5}, 6) == struct.pack(">iiBihqhB", 22, 42, 0, 0, 6, -1, -1, 0)
    broker = struct.pack(">iBih", 42, 0, 0, 0) + b"\0"
    assert wire.response_error(head, broker) == 0
    assert wire.response_error(head, wire.with_error(head, broker, 51)) == 51
    assert wire.with_error(head, broker, 51)[:5] == broker[:5]          # the header stays the broker's


def test_an_acks_0_produce_is_the_one_request_never_answered():
    for acks, answered in ((0, False), (1, True), (-1, True)):
        frame = request("Produce", 3, 1, body=produce_body(acks))
        assert wire.expects_response(wire.request_header(frame[4:]), frame[4:]) is answered
    # flexible (v9): a compact nullable transactional id ("t" is length 2), then acks
    frame = request("Produce", 9, 1, body=b"\x02t" + struct.pack(">hi", 0, 1000))
    assert wire.expects_response(wire.request_header(frame[4:]), frame[4:]) is False
    assert wire.expects_response(wire.request_header(request("EndTxn", 1, 1)[4:]), b"") is True


def test_a_frame_larger_than_kafkas_or_negative_is_refused():
    for size in (-1, wire.MAX_FRAME + 1):
        with pytest.raises(wire.WireError):
            wire.frame_size(struct.pack(">i", size))


# -- the proxy, in front of a stand-in node ------------------------------------------------------------------

def test_a_delayed_request_holds_the_ones_after_it_and_is_logged(node, tmp_path):
    proxy, port = proxied(node, tmp_path, Rule("delay", "EndTxn", ms=400))
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=10) as c:
            t = time.monotonic()
            c.sendall(request("EndTxn", 1, 7) + request("AddOffsetsToTxn", 1, 8))
            assert answer(c) == (7, 0) and answer(c) == (8, 0)         # in order, both late
            assert time.monotonic() - t >= 0.4
        (row,) = logged(tmp_path)
        assert (row["api"], row["correlation_id"], row["client_id"], row["node"], row["ms"]) == \
            ("EndTxn", 7, "worker-1", 1, 400) and row["held_ms"] >= 400 and row["client_gone"] is False
        assert [h["api"] for h, _ in node.seen] == ["EndTxn", "AddOffsetsToTxn"]
    finally:
        proxy.stop()


def test_a_held_request_lands_after_its_client_closed_the_connection(node, tmp_path):
    """KAFKA-17754's setting: the client gave up and went; the late EndTxn still reaches the node."""
    proxy, port = proxied(node, tmp_path, Rule("delay", "EndTxn", ms=300))
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=10) as c:
            c.sendall(request("EndTxn", 1, 9))
            closed = time.monotonic()
        assert wait_for(lambda: node.seen)
        (head, at), = node.seen
        assert head["correlation_id"] == 9 and at - closed >= 0.3
        assert wait_for(lambda: logged(tmp_path)) and logged(tmp_path)[0]["client_gone"] is True
    finally:
        proxy.stop()


@pytest.mark.parametrize("when, forwarded", [("before", False), ("after", True)])
def test_a_failed_request_is_answered_with_the_error_and_reaches_the_node_only_after(node, tmp_path, when, forwarded):
    proxy, port = proxied(node, tmp_path, Rule("fail", "EndTxn", error=51, when=when))
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=10) as c:
            c.sendall(request("EndTxn", 1, 3) + request("AddOffsetsToTxn", 1, 4))
            assert answer(c) == (3, 51) and answer(c) == (4, 0)
        assert wait_for(lambda: len(node.seen) == (2 if forwarded else 1))
        assert [h["api"] for h, _ in node.seen] == (["EndTxn"] if forwarded else []) + ["AddOffsetsToTxn"]
        (row,) = logged(tmp_path)
        assert (row["action"], row["when"], row["error"], row["forwarded"]) == ("fail", when, 51, forwarded)
    finally:
        proxy.stop()


def test_a_duplicated_produce_reaches_the_node_twice_and_is_answered_once(node, tmp_path):
    proxy, port = proxied(node, tmp_path, Rule("duplicate", "Produce"))
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=10) as c:
            c.sendall(request("Produce", 3, 5, body=produce_body(1)) + request("EndTxn", 1, 6))
            assert answer(c)[0] == 5 and answer(c) == (6, 0)           # the copy's answer is not the client's
            c.sendall(request("Produce", 3, 10, body=produce_body(0)) + request("EndTxn", 1, 11))
            assert answer(c) == (11, 0)                                 # acks=0: no answer to wait for, twice
        assert [h["correlation_id"] for h, _ in node.seen] == [5, 5, 6, 10, 10, 11]
        assert [r["correlation_id"] for r in logged(tmp_path)] == [5, 10]
    finally:
        proxy.stop()


def test_the_share_touched_is_drawn_from_the_seed_and_count_caps_it():
    heads = [{"api": "Produce", "client_id": "w", "correlation_id": i} for i in range(200)]

    def picks(seed, count=None):
        rule = Rule("duplicate", "Produce", rate=0.3, seed=seed, count=count)
        return [h["correlation_id"] for h in heads if rule.matches(1, h)]
    assert picks(4) == picks(4) != picks(5) and 30 < len(picks(4)) < 90
    assert picks(4, count=3) == picks(4)[:3]
    only = Rule("delay", "EndTxn", nodes=(2,), client="txn-")
    assert not only.matches(1, {"api": "EndTxn", "client_id": "txn-1"})
    assert not only.matches(2, {"api": "EndTxn", "client_id": "other"})
    assert not only.matches(2, {"api": "Produce", "client_id": "txn-1"})
    assert only.matches(2, {"api": "EndTxn", "client_id": "txn-1"})


# -- the faults ------------------------------------------------------------------------------------------------

def fault(spec, exp="eos"):
    (f,) = build(RunParams(exp, messages=10, faults=[spec], seed=3), get(exp))
    return f


def test_the_options_become_the_proxys_rule():
    f = fault("delay-request:api=EndTxn,ms=8000,count=2,node=2,client=txn-")
    assert (f.rule.action, f.rule.api, f.rule.ms, f.rule.count, f.rule.nodes, f.rule.client, f.rule.seed) == \
        ("delay", "EndTxn", 8000, 2, (2,), "txn-", 3)
    g = fault("fail-request:api=InitProducerId,error=NOT_COORDINATOR,rate=0.5,when=after")
    assert (g.rule.error, g.rule.when, g.rule.rate) == (16, "after", 0.5)
    assert fault("duplicate-request").rule.api == "Produce"


@pytest.mark.parametrize("spec, says", [
    ("delay-request", "api must be one of Produce"),
    ("delay-request:api=EndTx", "api must be one of"),
    ("delay-request:api=EndTxn,ms=-5", "ms must be between 0 and 300000"),
    ("fail-request:api=Produce", "api must be one of EndTxn, AddOffsetsToTxn, InitProducerId"),
    ("fail-request:api=EndTxn,error=OOPS", "error must be one of UNKNOWN_SERVER_ERROR"),
    ("fail-request:api=EndTxn,when=during", "when must be before or after"),
    ("duplicate-request:api=EndTxn", "api must be one of Produce"),
    ("duplicate-request:rate=2", "rate must be between 0 and 1"),
    ("delay-request:api=EndTxn,jitter=3", "unknown option"),
])
def test_bad_options_are_refused_in_one_line(spec, says):
    with pytest.raises(HarnessError, match=says):
        fault(spec)


class RouteHands:
    """A local cluster's hands whose proxies' upstreams are a dict."""

    def __init__(self, why=None, rerouted=()):
        self.why, self.routes = why, {n: f"127.0.0.1:{9000 + n}" for n in (1, 2, 3)}
        self.recorded = dict(self.routes)
        for n in rerouted:
            self.routes[n] = "127.0.0.1:1"

    def proxies(self):
        return self.why

    def node_ids(self):
        return [1, 2, 3]

    def _recorded_upstreams(self):
        return dict(self.recorded)

    def rerouted_nodes(self):
        return [n for n in self.routes if self.routes[n] != self.recorded[n]]

    def reroute(self, node, upstream):
        self.routes[node] = upstream or self.recorded[node]


def test_refused_where_it_cannot_work_and_a_killed_harnesss_route_is_put_back(monkeypatch):
    import harness.stack.brokers as brokers
    f = fault("delay-request:api=EndTxn")
    with pytest.raises(HarnessError, match="never touches an external cluster"):
        f.check_stack(SimpleNamespace(kind="external", brokers=3))
    with pytest.raises(HarnessError, match="runs on the local cluster only"):
        f.check_stack(SimpleNamespace(kind="compose", brokers=3))
    with pytest.raises(HarnessError, match="needs the 3-broker cluster, but this stack has 1 broker"):
        f.check_stack(SimpleNamespace(kind="local", brokers=1))
    monkeypatch.setattr(brokers, "for_stack", lambda stack, name, client=None: RouteHands("no proxies: `harness up"))
    with pytest.raises(HarnessError, match="needs a proxy in front of each node: no proxies"):
        f.check_stack(SimpleNamespace(kind="local", brokers=3))
    left = RouteHands(rerouted=(2,))
    monkeypatch.setattr(brokers, "for_stack", lambda stack, name, client=None: left)
    f.check_stack(SimpleNamespace(kind="local", brokers=3))
    assert left.routes == left.recorded


def test_a_run_routes_every_nodes_proxy_through_it_and_back_at_the_end(node, tmp_path):
    f = fault("delay-request:api=EndTxn,ms=10")
    f.hands = RouteHands()
    f.hands.recorded = {1: f"127.0.0.1:{node.port}"}
    f.hands.routes = dict(f.hands.recorded)
    f.setup(SimpleNamespace(run_dir=tmp_path))
    try:
        host, _, port = f.hands.routes[1].rpartition(":")
        with socket.create_connection((host, int(port)), timeout=10) as c:
            c.sendall(request("EndTxn", 1, 21))
            assert answer(c) == (21, 0)
    finally:
        f.finish(None)
        f.release()                                 # again, as the run's end does: nothing left to do
    assert f.hands.routes == f.hands.recorded and f.proxy is None
    (row,) = f.entries([], [])
    assert row["fault"] == "delay-request" and row["target"] == "EndTxn to node 1, correlation id 21"
    story = f.story([])
    assert story["touched"] == 1 and "held back 1 EndTxn request(s) 10 ms each" in f.sentence(story)
    assert story["after_client_gone"] == 0 and "0 of them reached the node after their client had closed" in \
        f.sentence(story)
    assert f.observed(story) == {"fault.delay-request.touched": 1} and f.shortfall([], story) == ""


def test_a_node_that_hangs_up_closes_the_clients_connection_too(tmp_path):
    hangs_up = socket.create_server(("127.0.0.1", 0))

    def serve():
        conn, _ = hangs_up.accept()
        conn.recv(100)
        conn.close()
    threading.Thread(target=serve, daemon=True).start()
    proxy = ProtocolProxy({1: ("127.0.0.1", hangs_up.getsockname()[1])}, Rule("delay", "EndTxn"), tmp_path / "t.jsonl")
    try:
        with socket.create_connection(("127.0.0.1", proxy.start()[1]), timeout=10) as c:
            c.sendall(request("ApiVersions", 0, 1))
            assert c.recv(10) == b""                    # closed, not left waiting for an answer that cannot come
    finally:
        proxy.stop()
        hangs_up.close()


def test_stopping_the_proxy_while_it_holds_a_request_prints_nothing(node, tmp_path, capfd):
    """The end of a run with a request still held (and a node that then hangs up): no traceback on the terminal."""
    import gc
    proxy, port = proxied(node, tmp_path, Rule("delay", "EndTxn", ms=60_000))
    with socket.create_connection(("127.0.0.1", port), timeout=10) as c:
        c.sendall(request("ApiVersions", 0, 1) + request("EndTxn", 1, 2))
        assert answer(c)[0] == 1
        node.close()
        proxy.stop()
    gc.collect()
    assert capfd.readouterr().err == ""
