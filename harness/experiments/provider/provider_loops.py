"""The worker side of provider: the consumer that calls the payment provider, the provider's own loop, their kill points.
"""

from __future__ import annotations

import os
import time
from urllib.parse import urlsplit

from ...checker.damage import DEDUPED, DUPLICATED
from ..declaration import KillPoint
from ..offsets.offset_loops import at_least_once_loop

URL_ENV = "HARNESS_PROVIDER_URL"

# A connection the provider does not accept in this long was never sent. Once sent, a call waits for its
# answer without a limit: only the provider's death cuts it (a timeout would leave a charge nobody
# described), and a provider that never comes back is the supervisor's to give up on, and the run's limit.
CONNECT_TIMEOUT_S = 5.0
RETRY_S = 0.02           # the first wait before asking again, doubled up to RETRY_MAX_S
RETRY_MAX_S = 0.5
FINISHED_EVERY_S = 0.2   # how often the provider asks whether every consumer is done

PC_POLL = KillPoint("after-poll-before-call", "poll", "call the provider", frozenset({DUPLICATED, DEDUPED}),
                    "the calls since the last commit (none with --commit-every 1) are made again")
PC_CALL = KillPoint("after-call-before-commit", "call the provider (charged)", "commit offset",
                    frozenset({DUPLICATED, DEDUPED}),
                    "this payment and every call since the last commit are made again: charged again without a key, "
                    "replayed with one")
PC_COMMIT = KillPoint("after-commit", "commit offset", None, frozenset({DUPLICATED, DEDUPED}),
                      "nothing when the commit covered this payment; otherwise the uncommitted calls are made again")
PV_TAKEN = KillPoint("provider-after-request-before-charge", "provider: take the request", "provider: charge",
                     frozenset(), "nothing was charged: the caller's retry charges once")
PV_CHARGED = KillPoint("provider-after-charge-before-response", "provider: charge (committed)",
                       "provider: answer", frozenset({DUPLICATED, DEDUPED}),
                       "charged, never answered: the caller cannot know and asks again, charged again without a "
                       "key, replayed with one")

_session = None


def call_provider(ctx, msg) -> None:
    """POST the charge and wait for the provider's answer. An attempt that gets none either was never sent
    (the connection refused: nothing charged) or was cut once sent (charged or not: unknown); either way it
    is made again, with the same key when there is one, and the call's one `call_unanswered` event says
    how many of each it took."""
    import requests
    from ...runtime.context import amount_of
    from .provider_app import KEY_HEADER
    global _session
    if _session is None:
        _session = requests.Session()
        _session.trust_env = False          # 127.0.0.1 directly: never through a proxy from the environment
    payment_id = msg.key().decode()
    headers = {KEY_HEADER: payment_id} if ctx.option("idempotency_key") == "on" else {}
    outcomes = {"not sent": 0, "unknown": 0}
    wait = RETRY_S
    while True:
        try:
            r = _session.post(os.environ[URL_ENV] + "/v1/charges", timeout=(CONNECT_TIMEOUT_S, None),
                              headers=headers, json={"payment_id": payment_id, "amount": amount_of(msg)})
        except requests.RequestException as e:
            outcomes["not sent" if _never_sent(e) else "unknown"] += 1
            time.sleep(wait)
            wait = min(RETRY_MAX_S, wait * 2)
            continue
        if any(outcomes.values()):
            ctx.events.emit("call_unanswered", message_id=payment_id, not_sent=outcomes["not sent"],
                            unknown=outcomes["unknown"])
        if r.status_code != 200:
            raise RuntimeError(f"the provider at {os.environ[URL_ENV]} refused {payment_id}: {r.status_code} "
                               f"{r.text[:200]}")
        return


def _never_sent(e) -> bool:
    """A connection the provider refused, or did not accept in time: the request was never sent."""
    import requests
    from urllib3.exceptions import MaxRetryError, NewConnectionError
    if isinstance(e, requests.ConnectTimeout):
        return True
    inner = e.args[0] if e.args else None
    return isinstance(inner, NewConnectionError) or (isinstance(inner, MaxRetryError)
                                                      and isinstance(inner.reason, NewConnectionError))


def consumer_loop(ctx) -> None:
    at_least_once_loop(ctx, lambda msg: call_provider(ctx, msg), (PC_POLL.name, None, PC_CALL.name, PC_COMMIT.name))


def provider_loop(ctx) -> None:
    """Serve charges on 127.0.0.1, one request at a time, until every consumer is done."""
    import logging
    from werkzeug.serving import WSGIRequestHandler, make_server
    from .provider_app import make_app

    class Handler(WSGIRequestHandler):
        timeout = 5            # a connection that sends nothing does not hold the only thread for ever

    logging.getLogger("werkzeug").setLevel(logging.ERROR)        # no access log line per charge
    url = urlsplit(os.environ[URL_ENV])
    app = make_app(ctx, PV_TAKEN.name, PV_CHARGED.name, prefix=url.path)
    server = make_server("127.0.0.1", url.port, app, threaded=False, request_handler=Handler)
    server.timeout = 0.05
    ctx.events.emit("started", partitions=[])
    asked = 0.0
    try:
        while True:
            if time.monotonic() - asked > FINISHED_EVERY_S:       # the events file is read whole: not per request
                asked = time.monotonic()
                if ctx.finished(ctx.args.after):
                    return
            server.handle_request()
    finally:
        server.server_close()
