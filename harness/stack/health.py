"""Readiness checks shared by every stack: does Kafka answer, does Postgres?

"Up" means usable, not merely listening: Kafka must return metadata and create
(then delete) a topic, Postgres must accept a connection and run a query. Each
check is bounded in time and returns an error string instead of raising.
"""

import time
import uuid

from .. import kafka_client
from ..errors import first_line
from .redaction import scrub

# librdkafka retries connections forever; every call below passes a timeout.
METADATA_TIMEOUT_S = 5.0


def kafka_probe(bootstrap: str, timeout: float, brokers: int = 1) -> str | None:
    """None when Kafka serves metadata listing at least `brokers` brokers and can create a topic, else the reason.

    Bad client settings are not a reason to wait: credentials the broker refuses (librdkafka
    would retry them forever) raise HarnessError at the first refusal, without any secret.
    """
    from confluent_kafka.admin import AdminClient, NewTopic

    deadline = time.monotonic() + timeout
    refused: list[str] = []

    def on_error(err):
        msg = kafka_client.auth_error(err)
        if msg:
            refused.append(msg)

    admin = AdminClient(kafka_client.config(bootstrap, {"socket.connection.setup.timeout.ms": 3000, "log_level": 0,
                                                        "error_cb": on_error}))
    last = "no answer"
    while time.monotonic() < deadline:
        try:
            md = admin.list_topics(timeout=min(METADATA_TIMEOUT_S, max(0.5, deadline - time.monotonic())))
            if len(md.brokers) < brokers:
                last = f"metadata lists {len(md.brokers)} of {brokers} brokers"
                time.sleep(0.3)
                continue
            name = f"harness-ready-{uuid.uuid4().hex[:8]}"
            futs = admin.create_topics([NewTopic(name, 1, 1)], operation_timeout=10, request_timeout=10)
            futs[name].result(timeout=max(1.0, deadline - time.monotonic()))
            admin.delete_topics([name], operation_timeout=10)[name].result(timeout=10)
            return None
        except Exception as e:  # noqa: BLE001 - a probe reports, never raises
            last = first_line(e)
            admin.poll(0)        # serve error_cb
            if refused:
                break
            time.sleep(0.3)
    admin.poll(0)
    if refused:
        raise kafka_client.refused(bootstrap, refused[0])
    return kafka_client.scrub(last, kafka_client.settings_for(bootstrap))


def postgres_probe(dsn: str, timeout: float) -> str | None:
    import psycopg

    deadline = time.monotonic() + timeout
    last = "no answer"
    while time.monotonic() < deadline:
        try:
            with psycopg.connect(dsn, connect_timeout=3) as conn:
                conn.execute("select 1")
            return None
        except Exception as e:  # noqa: BLE001
            # libpq's message may quote pieces of the DSN, password included: scrub before cutting.
            last = scrub(str(e).strip(), dsn).splitlines()[0][:200] if str(e).strip() else type(e).__name__
            time.sleep(0.2)
    return last


def postgres_dsn_error(dsn: str) -> str | None:
    """None when libpq can parse `dsn` (no connection is made), else why not, without the password."""
    from psycopg.conninfo import conninfo_to_dict

    try:
        conninfo_to_dict(dsn)
    except Exception as e:  # noqa: BLE001 - a check reports, never raises
        text = scrub(str(e).strip(), dsn)
        return text.splitlines()[0][:200] if text else type(e).__name__
    return None


def postgres_version(dsn: str) -> str | None:
    import psycopg

    try:
        with psycopg.connect(dsn, connect_timeout=3) as conn:
            return conn.execute("show server_version").fetchone()[0]
    except Exception:  # noqa: BLE001
        return None

