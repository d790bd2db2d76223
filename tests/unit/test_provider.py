"""The provider experiment's pure parts: which failed calls were never sent, the request's fingerprint, and
its predictions with and without the key, on hand-made crash records."""

import socket
import struct
import threading

import requests
from urllib3.exceptions import MaxRetryError, NewConnectionError, ProtocolError

from harness.checker.predict import predict
from harness.experiments import get
from harness.experiments.provider.provider_loops import _never_sent
from harness.experiments.provider.provider_app import fingerprint
from harness.runtime.evidence import KeyedRecord
from harness.run.params import RunParams
from harness.reporting.build import outside_calls


def expectations(p):
    return {e.metric: (e.op, e.value) for e in p.expectations}


def crash(msg, point, unacked):
    return {"point": point, "message_id": msg, "unacked": list(unacked), "acked_unapplied": [], "produced": [],
            "time": 1.0, "worker": "consumer-0", "attempt": 1}


def test_a_refused_connection_was_never_sent_and_a_cut_one_may_have_charged():
    refused = requests.ConnectionError(MaxRetryError(None, "/v1/charges", NewConnectionError(None, "refused")))
    cut = requests.ConnectionError(ProtocolError("Connection aborted.", ConnectionResetError()))
    assert _never_sent(refused) and not _never_sent(cut) and _never_sent(requests.ConnectTimeout("no accept"))
    assert not _never_sent(requests.ReadTimeout("read timed out")) and not _never_sent(requests.ConnectionError())


def _error_of(url: str):
    s = requests.Session()
    s.trust_env = False
    try:
        s.post(url, json={}, timeout=(5, 5))
    except requests.RequestException as e:
        return e
    raise AssertionError("the call was answered")


def test_real_sockets_a_closed_port_refuses_and_a_server_that_reads_then_dies_leaves_the_outcome_unknown():
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]            # bound, never listening: the connection is refused
        assert _never_sent(_error_of(f"http://127.0.0.1:{port}/v1/charges"))
    with socket.socket() as srv:
        srv.bind(("127.0.0.1", 0))
        srv.listen(1)

        def take_and_die():
            conn, _ = srv.accept()
            conn.recv(65536)                      # the request arrived: it may have been acted on
            conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            conn.close()                          # a reset, as a SIGKILLed provider's kernel sends
        t = threading.Thread(target=take_and_die)
        t.start()
        e = _error_of(f"http://127.0.0.1:{srv.getsockname()[1]}/v1/charges")
        t.join(timeout=10)
        assert not _never_sent(e)


def test_the_report_counts_calls_and_attempts_from_one_event_per_call():
    events = [{"event": "call_unanswered", "message_id": "a", "not_sent": 4, "unknown": 1},
              {"event": "call_unanswered", "message_id": "b", "not_sent": 3, "unknown": 0},
              {"event": "started"}]
    assert outside_calls(events) == {"calls_retried": 2, "calls_with_unknown_outcome": 1, "attempts_not_sent": 7,
                                     "attempts_unknown": 1}
    assert outside_calls([{"event": "started"}]) is None


def test_the_fingerprint_is_the_requests_parameters():
    assert fingerprint({"payment_id": "a", "amount": 1}) == fingerprint({"amount": 1, "payment_id": "a"})
    assert fingerprint({"payment_id": "a", "amount": 1}) != fingerprint({"payment_id": "a", "amount": 2})
    r = KeyedRecord("pay-000001", b"{}")
    assert (r.key(), r.value(), r.partition(), r.offset()) == (b"pay-000001", b"{}", None, None)


def test_without_a_key_each_call_made_again_is_a_duplicate_and_with_one_a_hit():
    crashes = [crash("a", "after-call-before-commit", ["a"]),
               crash("b", "provider-after-charge-before-response", ["b"])]
    off = predict(get("provider").resolve(RunParams(experiment="provider", idempotency_key="off")), crashes)
    assert expectations(off) == {"ledger.duplicates": ("==", 2), "ledger.lost": ("==", 0),
                                 "ledger.dedupe_hits": ("==", 0)}
    on = predict(get("provider").resolve(RunParams(experiment="provider", idempotency_key="on")), crashes)
    assert expectations(on) == {"ledger.duplicates": ("==", 0), "ledger.dedupe_hits": ("==", 2),
                                "ledger.lost": ("==", 0)}
    assert on.hit_counts == {"a": 1, "b": 1} and not on.inconsistent and not off.inconsistent


def test_a_provider_killed_before_it_charged_costs_nothing_and_says_so():
    p = predict(get("provider"), [crash("a", "provider-after-request-before-charge", [])])
    assert expectations(p)["ledger.duplicates"] == ("==", 0) and not p.inconsistent
    # A record that claimed a charge there contradicts the kill point's declared damage.
    p = predict(get("provider"), [crash("a", "provider-after-request-before-charge", ["a"])])
    assert p.inconsistent
