"""The Toxiproxy side of the local stack (stack/toxiproxy.py and its callers), without a Kafka: its HTTP client
against hostile answers, a restarted node that keeps its proxied listener, the ports its pid records name, a
left toxic refused at start, and a purge that deletes only the harness's own files."""

import http.server
import json
import threading
from pathlib import Path

import pytest

from harness.core import versions
from harness.core.errors import HarnessError
from harness.stack import toxiproxy


@pytest.fixture
def server():
    """An HTTP server on 127.0.0.1 whose answer each test sets: (status, headers, body)."""
    answer = {"status": 200, "headers": {}, "body": b"{}"}

    class Handler(http.server.BaseHTTPRequestHandler):
        def _answer(self):
            self.send_response(answer["status"])
            for k, v in answer["headers"].items():
                self.send_header(k, v)
            self.end_headers()
            self.wfile.write(answer["body"])
        do_GET = do_POST = do_DELETE = _answer

        def log_message(self, *args):
            pass
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    yield srv.server_address[1], answer
    srv.shutdown()


def test_the_api_reads_the_toxics_of_each_proxy(server):
    port, answer = server
    answer["body"] = json.dumps({"kafka-1": {"toxics": []}, "kafka-2": {"toxics": [{"name": "harness-latency"}]},
                                 "kafka-3": "not a proxy"}).encode()
    assert toxiproxy.Api(port).toxics() == {"kafka-2": ["harness-latency"]}


def test_a_redirect_is_refused_never_followed(server):
    port, answer = server
    answer.update(status=302, headers={"Location": "http://192.0.2.1:80/proxies"}, body=b"")
    with pytest.raises(HarnessError, match="refused GET /proxies: HTTP 302"):
        toxiproxy.Api(port).proxies()


@pytest.mark.parametrize("body, says", [(b"[" * 100_000, "not its JSON"), (b"git", "not its JSON"),
                                        (b" " * (toxiproxy.MAX_ANSWER + 10), "larger than any")])
def test_an_answer_that_is_not_toxiprox_json_is_one_line(server, body, says):
    port, answer = server
    answer["body"] = body
    with pytest.raises(HarnessError, match=says):
        toxiproxy.Api(port).proxies()


def test_nothing_answering_is_one_line():
    import socket
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    with pytest.raises(HarnessError, match="does not answer"):
        toxiproxy.Api(port).toxics()
    with pytest.raises(HarnessError, match="does not answer"):
        toxiproxy.Api(port).proxies()


def test_a_node_names_its_ports_as_the_stack_does(tmp_path):
    from harness.stack.local_kafka import LocalKafka
    assert LocalKafka(tmp_path).port_names(1, 2) == {"kafka": 1, "controller": 2}
    assert LocalKafka(tmp_path, 3).port_names(1, 2, (3, 4)) == {"kafka-3": 1, "controller-3": 2, "proxied-3": 3}


def test_a_killed_node_of_a_proxied_cluster_is_restarted_with_its_proxied_listener(tmp_path, monkeypatch):
    from harness.stack import brokers, local_record, maven
    local_record.write_record(tmp_path, {"kind": "local", "brokers": 3, "proxies": True,
                                         **{f"{k}-{n}_port": 20000 + 10 * n + i for n in (1, 2, 3)
                                            for i, k in enumerate(("kafka", "controller", "proxied", "proxy"))}})
    hands = brokers.LocalBrokers(tmp_path)
    got = {}
    monkeypatch.setattr(maven, "resolve_kafka", lambda log, release: tmp_path if release == versions.KAFKA_VERSION else None)
    monkeypatch.setattr(hands.by_id[2], "running", lambda: None)
    monkeypatch.setattr(hands.by_id[2], "start", lambda *a, **kw: got.update(kw) or 4242)
    assert hands.start(2) == "pid 4242"
    assert got["proxied"] == (20022, 20023)
    rec = local_record.read_record(tmp_path)
    del rec["proxy-2_port"]
    local_record.write_record(tmp_path, rec)
    with pytest.raises(HarnessError, match="cannot restart Kafka node 2 behind its proxy"):
        brokers.LocalBrokers(tmp_path).start(2)


def test_a_delay_whose_request_failed_removes_what_may_have_been_added(tmp_path, monkeypatch):
    from harness.stack import brokers
    calls = []

    class Api:
        def add_latency(self, node, ms, jitter):
            calls.append("add")
            raise HarnessError("Toxiproxy on http://127.0.0.1:1 does not answer (timed out)")

        def remove_latency(self, node):
            calls.append("remove")
    hands = brokers.LocalBrokers(tmp_path)
    monkeypatch.setattr(hands, "_api", lambda: Api())
    with pytest.raises(HarnessError, match="timed out"):
        hands.delay(1, 200, 100)
    assert calls == ["add", "remove"]


def test_a_stack_with_a_node_left_delayed_is_refused_at_start(server, tmp_path):
    from types import SimpleNamespace
    port, answer = server
    answer["body"] = json.dumps({"kafka-1": {"toxics": []}, "kafka-3": {"toxics": [{"name": "x"}]}}).encode()
    assert toxiproxy.Api(port).delayed_nodes() == [3]
    proxy = toxiproxy.LocalToxiproxy(tmp_path)         # a folder of pytest's: mkdtemp() left one in /tmp
    assert proxy.api() is None                          # not running: no API to ask
    proxy.running = lambda: SimpleNamespace(ports={"toxiproxy": port})
    assert proxy.api().delayed_nodes() == [3]
    proxy.running = lambda: SimpleNamespace(ports={})
    assert proxy.api() is None


def test_purge_deletes_the_proxy_files_only_and_never_through_a_planted_link(tmp_path, monkeypatch):
    from harness.stack import local
    state = tmp_path / "state"
    monkeypatch.setenv("HARNESS_HOME", str(state))
    state.mkdir()
    from harness.stack import marker
    marker.mark(state, in_the_way=[])
    proxy = toxiproxy.LocalToxiproxy(state)
    proxy.home.mkdir()
    for f in proxy.files():
        f.write_text("ours")
    (proxy.home / "notes.txt").write_text("the user's")
    local.down(purge=True, log=lambda m: None)
    assert [p.name for p in proxy.home.iterdir()] == ["notes.txt"]
    (proxy.home / "notes.txt").unlink()
    proxy.home.rmdir()
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "proxies.json").write_text("not the harness's")
    proxy.home.symlink_to(elsewhere)
    local.down(purge=True, log=lambda m: None)
    assert (elsewhere / "proxies.json").read_text() == "not the harness's"


def test_a_release_names_toxiproxy():
    from harness.stack.claim import display
    assert display("toxiproxy") == "Toxiproxy" and display("kafka-2") == "Kafka node 2"
