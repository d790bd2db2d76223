"""The provider experiment's pure parts: which failed calls were never sent, the request's fingerprint, and
its predictions with and without the key, on hand-made crash records."""

import requests
from urllib3.exceptions import MaxRetryError, NewConnectionError, ProtocolError

from harness.checker.predict import predict
from harness.experiments import get
from harness.experiments.provider import _never_sent
from harness.experiments.provider_app import fingerprint
from harness.runtime.evidence import KeyedRecord
from harness.params import RunParams


def expectations(p):
    return {e.metric: (e.op, e.value) for e in p.expectations}


def crash(msg, point, unacked):
    return {"point": point, "message_id": msg, "unacked": list(unacked), "acked_unapplied": [], "produced": [],
            "time": 1.0, "worker": "consumer-0", "attempt": 1}


def test_a_refused_connection_was_never_sent_and_a_cut_one_may_have_charged():
    refused = requests.ConnectionError(MaxRetryError(None, "/v1/charges", NewConnectionError(None, "refused")))
    cut = requests.ConnectionError(ProtocolError("Connection aborted.", ConnectionResetError()))
    assert _never_sent(refused) and not _never_sent(cut)
    assert not _never_sent(requests.ReadTimeout("read timed out")) and not _never_sent(requests.ConnectionError())


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


def test_a_provider_killed_before_it_charged_costs_nothing():
    p = predict(get("provider"), [crash("a", "provider-after-request-before-charge", [])])
    assert expectations(p)["ledger.duplicates"] == ("==", 0) and not p.inconsistent
