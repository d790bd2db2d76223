"""The payment provider: an HTTP service outside Kafka and Postgres's transaction, with Stripe's idempotency keys.

The `provider` experiment's effect is a call to this service, which the run
starts as a process of its own (a role of the run: restarted when killed,
killed when the run stops). It is a small Flask app served by Werkzeug on
127.0.0.1, one request at a time, with its own ledger (the run's ledger table:
one row per charge) and its own key table (the run's dedupe table), as a real
provider keeps them on its side. `POST /v1/charges` with a JSON body
`{"payment_id", "amount"}` charges, in one transaction:

- without an `Idempotency-Key` header: a new charge every time;
- with one it has not seen: the charge, and the key with the request's
  fingerprint and the response, stored together;
- with a key it has seen with the same parameters: the stored response again
  (header `Idempotent-Replayed: true`), no new charge, one more hit on the key;
- with a key it has seen with other parameters: 422, nothing charged.

The key row is inserted first, so a second request with the same key waits
on the key's unique index until the first commits, then replays it. Between
charging and answering the provider has a kill point of its own: a planned
crash there SIGKILLs it with the charge committed and the answer never sent,
so its caller cannot tell whether the charge happened (it retries).
"""

from __future__ import annotations

import hashlib
import json

from ...runtime.evidence import KeyedRecord

KEY_HEADER = "Idempotency-Key"
REPLAYED_HEADER = "Idempotent-Replayed"


def fingerprint(params: dict) -> str:
    return hashlib.sha256(json.dumps(params, sort_keys=True).encode()).hexdigest()[:32]


def make_app(ctx, before_charge: str, after_charge: str, prefix: str = ""):
    """The Flask app, charging into the run's ledger and keeping keys in its dedupe table; `before_charge`
    and `after_charge` are its kill points (the request taken, nothing written / charged, not answered);
    `prefix` the path its charges live under (the run's)."""
    import os
    import psycopg
    from flask import Flask, jsonify, request
    from psycopg import sql
    from ...workload.sqlnames import table_identifier

    app = Flask("harness-provider")
    ledger, keys = table_identifier(ctx.args.ledger), table_identifier(ctx.args.dedupe)
    first = []

    @app.errorhandler(psycopg.OperationalError)
    def database_gone(e):
        # Its connection is broken for good: die, so the supervisor starts a provider with a new one (the
        # caller's cut call is an unknown outcome, asked again), rather than answer 500 to every call.
        from ...core.redaction import redact
        print(f"provider: the database connection failed: {redact(str(e).splitlines()[0] if str(e) else repr(e))}",
              flush=True)
        os._exit(1)

    @app.post(f"{prefix}/v1/charges")
    def charge():
        body = request.get_json(silent=True)
        if not isinstance(body, dict) or not isinstance(body.get("payment_id"), str) \
                or type(body.get("amount")) is not int or body["amount"] <= 0:
            return jsonify(error="a charge needs a payment_id (text) and an amount (a positive whole number)"), 400
        params = {"payment_id": body["payment_id"], "amount": body["amount"]}
        key = request.headers.get(KEY_HEADER)
        req = KeyedRecord(params["payment_id"], request.get_data())     # the request, as the kill switch sees it
        if not first:
            first.append(True)
            ctx.events.emit("first_message", message_id=req.message_id)    # a restart's end, for its timing
        ctx.deliver(req)
        ctx.kill.at(before_charge, req)
        with ctx.pg.transaction():
            if key is not None:
                fp = fingerprint(params)
                new = ctx.pg.execute(sql.SQL("insert into {} (message_id, fingerprint) values (%s, %s) "
                                             "on conflict (message_id) do nothing returning message_id")
                                     .format(keys), (key, fp)).fetchone()
                if new is None:
                    stored_fp, response = ctx.pg.execute(
                        sql.SQL("select fingerprint, response from {} where message_id = %s for update")
                        .format(keys), (key,)).fetchone()
                    if stored_fp != fp:
                        return _refused()             # nothing written: the transaction ends empty
                    ctx.pg.execute(sql.SQL("update {} set hits = hits + 1 where message_id = %s").format(keys), (key,))
                    return app.response_class(response, status=200, mimetype="application/json",
                                              headers={REPLAYED_HEADER: "true"})
            charge_id = ctx.pg.execute(sql.SQL("insert into {} (message_id, amount, worker, attempt) "
                                               "values (%s, %s, %s, %s) returning id").format(ledger),
                                       (params["payment_id"], params["amount"], ctx.worker, ctx.attempt)).fetchone()[0]
            response = json.dumps({"id": f"ch_{charge_id}", "payment_id": params["payment_id"],
                                   "amount": params["amount"], "status": "succeeded"})
            if key is not None:
                ctx.pg.execute(sql.SQL("update {} set response = %s where message_id = %s").format(keys),
                               (response, key))
        # Charged and committed; the answer is not sent yet.
        ctx.kill.at(after_charge, req, unacked=lambda: [req.message_id])
        return app.response_class(response, status=200, mimetype="application/json")

    def _refused():
        return jsonify(error="Keys for idempotent requests can only be used with the same parameters they "
                             "were first used with."), 422

    return app
