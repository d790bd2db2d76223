"""The workload: seeded payments with unique ids, produced before workers start.

Each payment is keyed by its id (UTF-8) and carries a JSON value with `id`,
`amount` and `seq`. The producer is idempotent with acks=all, so the input
topic holds each payment exactly once: every duplicate or loss the checker
finds later happened downstream, in the consumers under test.

Experiments with accounts (balances) also give each payment an `account`,
drawn from the seed, the account's `version` after it (1, 2, ... per account)
and its `balance` after it. All payments of an account go to one partition
(chosen from the account's name), so each account's payments keep their order.
"""

import json
import random
import time
import zlib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from ..clients import kafka_client, kafka_logging
from ..core.errors import HarnessError
from . import signature

# A produce that cannot reach the broker fails within this, instead of retrying forever.
PRODUCE_TIMEOUT_S = 60
# Once the run's time limit has passed, what is in flight gets this long to be acknowledged; the rest is
# purged (never sent).
FLUSH_AFTER_LIMIT_S = 10.0


class TimeLimitReached(Exception):
    """The run's time limit passed while producing: `acked` of `sent` payments were acknowledged."""

    def __init__(self, acked: int, sent: int):
        super().__init__(f"{acked} of {sent} acknowledged")
        self.acked, self.sent = acked, sent


@dataclass(frozen=True)
class Payment:
    id: str
    amount: int
    seq: int
    pad: int = 0          # extra characters so the record is about `payload_bytes` long
    account: str | None = None   # with accounts: the account it pays into
    version: int | None = None   # the account's version after this payment (its n-th payment: n)
    balance: int | None = None   # the account's balance after this payment

    def value(self) -> bytes:
        body = {"id": self.id, "amount": self.amount, "seq": self.seq}
        if self.account is not None:
            body.update(account=self.account, version=self.version, balance=self.balance)
        if self.pad:
            body["memo"] = "x" * self.pad
        return json.dumps(body).encode()


def iter_payments(messages: int, amount: int, payload_bytes: int = 0, accounts: int = 0,
                  seed: int = 0) -> Iterator[Payment]:
    """The payments one at a time, so producing them never holds the whole workload in memory.

    Payment ids are positional (pay-000001...), so every mode and seed sees the same ids. With
    `accounts`, each payment's account is a seeded draw among acct-1..acct-N.
    """
    base = len(Payment("pay-000000", amount, 0).value()) + len(', "memo": ""')
    pad = max(0, payload_bytes - base) if payload_bytes else 0
    rng = random.Random(f"{seed}-accounts")
    versions: dict = {}
    balances: dict = {}
    for i in range(1, messages + 1):
        if not accounts:
            yield Payment(id=f"pay-{i:06d}", amount=amount, seq=i, pad=pad)
            continue
        acct = f"acct-{rng.randrange(accounts) + 1}"
        versions[acct] = versions.get(acct, 0) + 1
        balances[acct] = balances.get(acct, 0) + amount
        yield Payment(id=f"pay-{i:06d}", amount=amount, seq=i, pad=pad, account=acct, version=versions[acct],
                      balance=balances[acct])


def make_payments(messages: int, amount: int, payload_bytes: int = 0, accounts: int = 0,
                  seed: int = 0) -> list[Payment]:
    """All payments as a list, for callers that need their ids or total (see `iter_payments`)."""
    return list(iter_payments(messages, amount, payload_bytes, accounts, seed))


def account_partition(account: str, partitions: int) -> int:
    """The partition of every payment of an account: one per account, so its payments keep their order."""
    return zlib.crc32(account.encode()) % partitions


def create_topic(bootstrap: str, topic: str, partitions: int, config: dict | None = None) -> None:
    """`config`: the topic's own settings (a dead-letter topic's errors.deadletterqueue.group.enable)."""
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient(kafka_client.config(bootstrap, kafka_logging.client_config()))
    fut = admin.create_topics([NewTopic(topic, partitions, 1 if _single_node(admin) else 3, config=config or {})],
                              operation_timeout=30, request_timeout=30)[topic]
    try:
        fut.result(timeout=45)
    except Exception as e:  # noqa: BLE001
        raise HarnessError(f"could not create topic {topic}: {str(e).splitlines()[0]}")


def _single_node(admin) -> bool:
    try:
        return len(admin.list_topics(timeout=10).brokers) < 3
    except Exception:  # noqa: BLE001
        return True


def produce(bootstrap: str, topic: str, payments: Iterable[Payment], progress=None,
            positions: dict | None = None, partitions: int | None = None, deadline: float | None = None,
            secret: bytes | None = None, settings: dict | None = None) -> int:
    """Produce all payments (murmur2 partitioner, as Java clients do); return how many were acked.

    `payments` may be any iterable, `iter_payments(...)` included: it is read once, lazily.
    `positions`, when given, receives id -> (partition, offset) of each acknowledged payment: the audit
    tells lost payments from ones a stopped run never reached by comparing these with committed offsets.
    `partitions`, when given, sends a payment with an account to its account's partition.
    `deadline` (time.monotonic()): past it nothing more is produced, what is in flight gets
    FLUSH_AFTER_LIMIT_S to be acknowledged, the rest is purged, and TimeLimitReached says how many were.
    `secret`, when given, marks each record as the run's own (workload/signature.py).
    `settings`: producer settings the experiment needs over ours (the queues family: one record a batch).
    """
    acked = sent = 0
    errors: list[str] = []

    def on_delivery(err, msg):
        nonlocal acked
        if err is None:
            acked += 1
            if positions is not None:
                positions[msg.key().decode()] = (msg.partition(), msg.offset())
        else:
            errors.append(str(err))

    p = kafka_client.connected_producer(bootstrap, {"enable.idempotence": True, "acks": "all",
                                                 "partitioner": "murmur2_random", "linger.ms": 5,
                                                 "message.timeout.ms": PRODUCE_TIMEOUT_S * 1000,
                                                 **kafka_logging.client_config(), **(settings or {})}, topic)
    def late() -> bool:
        return deadline is not None and time.monotonic() >= deadline

    stopped = False
    for pay in payments:
        if stopped or late():
            stopped = True
            break
        while True:
            try:
                extra = ({"partition": account_partition(pay.account, partitions)}
                         if partitions and pay.account is not None else {})
                key, value = pay.id.encode(), pay.value()
                if secret is not None:
                    extra["headers"] = signature.headers(secret, key, value)
                p.produce(topic, key=key, value=value, on_delivery=on_delivery, **extra)
                sent += 1
                break
            except BufferError:
                p.poll(0.1)
                if late():
                    stopped = True
                    break
        p.poll(0)
    if stopped:
        p.flush(FLUSH_AFTER_LIMIT_S)
        p.purge()                  # what is still queued was never acknowledged: it does not count as sent
        p.flush(FLUSH_AFTER_LIMIT_S)
        raise TimeLimitReached(acked, sent)
    remaining = p.flush(PRODUCE_TIMEOUT_S)
    if remaining or errors:
        raise HarnessError(f"producing the workload failed: {acked} of {sent} acked"
                           + (f"; first error: {errors[0]}" if errors else ""))
    return acked
