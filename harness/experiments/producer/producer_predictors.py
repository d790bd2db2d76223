"""producer's predictor: what the producer's settings promise under the faults that struck (see the package's docstring).
"""

from __future__ import annotations

from dataclasses import dataclass

from ...checker.predict import Expectation
from .producer_settings import RETRIES, settings


@dataclass(frozen=True)
class ProducerPredictor:
    """What the producer's settings promise under the faults that struck (see the module's docstring)."""

    def add(self, p, facts, exp) -> None:
        params = facts.params
        conf = settings(params)
        most = params.messages
        restarted = facts.undescribed > 0      # a restarted worker produces again what it had not committed
        broker_faults = facts.loosened
        if conf["enable.idempotence"] and not restarted:
            p.expectations.append(Expectation("kafka.read_committed.duplicates", 0))
        else:
            p.expectations.append(Expectation("kafka.read_committed.duplicates", RETRIES * most, "<="))
        if conf["acks"] == "all" or not broker_faults:
            p.expectations.append(Expectation("kafka.read_committed.lost", 0))
        else:
            p.expectations.append(Expectation("kafka.read_committed.lost", most, "<="))
        ordered = conf["enable.idempotence"] or conf["max.in.flight.requests.per.connection"] == 1
        p.expectations.append(Expectation("producer.reordered", 0) if ordered and not restarted
                              else Expectation("producer.reordered", most, "<="))
        why = []
        if not conf["enable.idempotence"]:
            why.append(f"without idempotence each retry may write a record again (at most {RETRIES} retries)")
        if conf["acks"] == "1" and broker_faults:
            why.append("with acks=1 a leader killed before its followers fetched loses what it acknowledged")
        if conf["acks"] == "0" and broker_faults:
            why.append("with acks=0 nothing is acknowledged: a record sent to a broker that is down or paused is "
                       "lost without a word")
        if why:
            p.note = "; ".join(why) + ": these numbers are possible, bounded, not predicted" + \
                (f"; {p.note}" if p.note else "")
