"""provider: the effect is a call to a payment provider, outside Kafka and outside Postgres's transaction.

The reference page (../shared/seeds, 004): "writes to an external system that
is not part of the transaction (an email, a payment provider) need that
system's own idempotency mechanism". The lab's reading is Stripe's
`Idempotency-Key`. The run starts a provider of its own (provider_app.py: an
HTTP service with its own ledger and key table) and consumers that, per
payment, call it and then commit the offset:

- `--idempotency-key off` (the mistake, the default): no key. A consumer
  killed between the call and its offset commit gets the payment again and
  charges it again: duplicates = those crashes.
- `--idempotency-key on` (the fix): the payment id as the key. The redelivery
  gets the stored response and charges nothing (a hit on the provider's key):
  the provider's ledger is exact.

The provider has kill points of its own (`--kill-point
provider-after-charge-before-response`): it dies with the charge committed and
its answer never sent. The consumer cannot tell whether it was charged (its
call failed: the outcome is unknown, and it logs that), so it asks again until
the restarted provider answers: without a key that charges again, with one it
replays the first charge.
"""

from __future__ import annotations

import socket
from dataclasses import dataclass

from ...checker.predictors import LedgerPredictor
from ...core.options import Option
from ..declaration import Experiment, Role, Stores
from ..keys.key_predictors import NoHitsPredictor
from ..launch import RoleWorkers
from .provider_loops import (
    PC_CALL, PC_COMMIT, PC_POLL, PV_CHARGED, PV_TAKEN, URL_ENV, consumer_loop, provider_loop)

IDEMPOTENCY_KEY = Option("idempotency_key", str, "provider: send the payment id as the provider's Idempotency-Key "
                         "(on), or call without one (off: a redelivery charges again).", default="off",
                         choices=("off", "on"), worker=True, applies_to="the provider experiment")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class ProviderWorkers(RoleWorkers):
    """The roles' workers, told where the run's provider listens: a free port on 127.0.0.1, kept across its
    restarts (the server reuses the address), under a path named after the run, so that a consumer never
    charges through another run's provider that took the port (it answers 404 there)."""

    def prepare(self, run):
        from ...workload.naming import slug
        launch = super().prepare(run)
        launch.env = {**launch.env, URL_ENV: f"http://127.0.0.1:{_free_port()}/{slug(run.names.run_id)}"}
        return launch


PROVIDER = Experiment(
    name="provider",
    steps=("poll", "call the payment provider (an HTTP charge)", "commit offset"),
    kill_points=(PC_POLL, PC_CALL, PC_COMMIT, PV_TAKEN, PV_CHARGED),
    default_point=PC_CALL.name,
    stores=Stores(ledger=True, dedupe=True),
    proves="Mistake: a call to a system outside the transaction (a payment provider) made "
           "again by each redelivery. Fix: that system's own idempotency key (--idempotency-key on).",
    expected="duplicates = crashes between the call and the offset commit (or the provider's own, between charge "
             "and answer), 0 with --idempotency-key on (dedupe hits instead)",
    predictors=(LedgerPredictor(), NoHitsPredictor()),
    roles=(Role("provider", provider_loop, consumes=None, after=("consumer",)), Role("consumer", consumer_loop)),
    launcher=ProviderWorkers(),
    options=(IDEMPOTENCY_KEY,),
    variants={"idempotency_key=on": {
        "predictors": (LedgerPredictor(dedupe=True),),
        "expected": "0 duplicates, dedupe hits (the provider's replays) = calls made again"}},
    lesson="Mistake: calling a payment provider without its idempotency key, so a redelivery (or a retry after "
           "an unanswered call) charges again. Fix: the payment id as the provider's Idempotency-Key.",
    suite={"group": "mistakes", "weight": 3},
)
