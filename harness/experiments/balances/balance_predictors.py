"""The balances' predictor (this family, experiments/balances/): each account's balance, from the crash log.

An account's expected balance is the sum of the payments produced to it. A
blind increment adds a redelivered payment again, so the account ends over by
the amounts of its payments in the crash records' `unacked` lists; a
conditional write leaves it exact. Crashes the worker did not describe make
the blind increment's balances upper bounds (at most `inflight_max` payments
of the largest amount per crash). It lives in the family's folder beside its
declarations and loops: a pure function of the crash log, with the checker's types.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from ...checker.predict import CrashFacts, Expectation, Prediction


@dataclass(frozen=True)
class BalancePredictor:
    blind: bool                     # True: balance = balance + amount; False: a conditional write (version)

    def add(self, p: Prediction, facts: CrashFacts, exp) -> None:
        expected: Counter = Counter()
        for i, amount in facts.amounts.items():
            if i in facts.accounts:
                expected[facts.accounts[i]] += amount
        over: Counter = Counter()
        if self.blind:
            for i in facts.ids("unacked"):
                if i in facts.accounts:
                    over[facts.accounts[i]] += facts.amounts.get(i, 0)
            # A blind increment never finds a newer version: it counts no 0-row update.
            p.expectations.append(Expectation("ledger.dedupe_hits", 0))
        slack = facts.slack() * max(facts.amounts.values(), default=0)
        for account in sorted(expected):
            value = expected[account] + over[account]
            if facts.exact or not self.blind:
                p.expectations.append(Expectation(f"accounts.{account}.balance", value))
            else:
                p.expectations.append(Expectation(f"accounts.{account}.balance", value + slack, "<="))
