"""increment and versioned: a balance changed by a blind increment, or by a conditional write.

Lesson 11's last common mistake: '"add 100" updates where "set to 600 if
version is 4" would be idempotent'. The payments go to a few accounts (a
seeded draw; every payment of an account on one partition, so each account's
payments keep their order), and each carries the account's version and balance
after it. Both experiments run offset-after's loop on the same seeded crashes;
the update and a ledger row (the payment's journal entry) commit in one
Postgres transaction:

- `increment`: `balance = balance + amount`. A redelivery adds again: each
  account ends over by the amounts of its redelivered payments.
- `versioned`: `balance = <its balance>, version = v where version = v - 1`.
  A redelivery finds version v already there and updates 0 rows; the worker
  counts those in the account's `stale_updates` (this experiment's dedupe
  hits) and writes no journal row. Balances stay exact.
"""

from __future__ import annotations

from ...checker.predictors import LedgerPredictor
from ..declaration import Experiment, Stores
from .balance_loops import INCREMENT_POINTS, VERSIONED_POINTS, increment_loop, versioned_loop
from .balance_predictors import BalancePredictor

ACCOUNTS = 5

INCREMENT = Experiment(
    name="increment",
    steps=("poll", "PG transaction {balance = balance + amount, journal row}", "commit offset"),
    kill_points=INCREMENT_POINTS,
    default_point=INCREMENT_POINTS[2].name,
    stores=Stores(ledger=True, accounts=ACCOUNTS),
    proves="Mistake: a blind increment (\"add 100\"); each redelivery adds again. Fix: a "
           "conditional write, \"set to 600 if version is 4\" (versioned).",
    expected="each account over by the amounts of its redelivered payments; duplicates = redeliveries, lost 0",
    predictors=(LedgerPredictor(), BalancePredictor(blind=True)),
    loop=increment_loop,
    lesson="Mistake: a blind increment (\"add 100\"), so each redelivery adds again. Fix: a conditional write, "
           "\"set to 600 if version is 4\" (versioned).",
    suite={"group": "mistakes", "weight": 2},
)

VERSIONED = Experiment(
    name="versioned",
    steps=("poll", "PG transaction {balance = X, version = v where version = v - 1; journal row if 1 row}",
           "commit offset"),
    kill_points=VERSIONED_POINTS,
    default_point=VERSIONED_POINTS[2].name,
    stores=Stores(ledger=True, accounts=ACCOUNTS),
    proves="The fix for blind increments: a conditional write on the account's version; a "
           "redelivery updates 0 rows and every balance stays exact.",
    expected="every balance exact, 0 duplicates, 0 lost; 0-row updates (dedupe hits) = redeliveries",
    predictors=(LedgerPredictor(dedupe=True), BalancePredictor(blind=False)),
    loop=versioned_loop,
    lesson="Mistake: a blind increment, applied again by each redelivery. Fix: a conditional write on the "
           "account's version; a redelivery updates 0 rows.",
    suite={"group": "mistakes", "weight": 2},
)
