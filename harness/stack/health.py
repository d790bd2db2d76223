"""Readiness checks shared by every stack: does Kafka answer, does Postgres?

"Up" means usable, not merely listening: Kafka must return metadata and create
(then delete) a topic, Postgres must accept a connection and run a query. Each
check is bounded in time and returns an error string instead of raising.
"""

import time
import uuid

# librdkafka retries connections forever; every call below passes a timeout.
METADATA_TIMEOUT_S = 5.0


def kafka_probe(bootstrap: str, timeout: float) -> str | None:
    """None when Kafka serves metadata and can create a topic, else the reason."""
    from confluent_kafka.admin import AdminClient, NewTopic

    deadline = time.monotonic() + timeout
    admin = AdminClient({"bootstrap.servers": bootstrap, "socket.connection.setup.timeout.ms": 3000, "log_level": 0})
    last = "no answer"
    while time.monotonic() < deadline:
        try:
            md = admin.list_topics(timeout=min(METADATA_TIMEOUT_S, max(0.5, deadline - time.monotonic())))
            if not md.brokers:
                last = "metadata has no brokers yet"
                time.sleep(0.3)
                continue
            name = f"harness-ready-{uuid.uuid4().hex[:8]}"
            futs = admin.create_topics([NewTopic(name, 1, 1)], operation_timeout=10, request_timeout=10)
            futs[name].result(timeout=max(1.0, deadline - time.monotonic()))
            admin.delete_topics([name], operation_timeout=10)[name].result(timeout=10)
            return None
        except Exception as e:  # noqa: BLE001 - a probe reports, never raises
            last = str(e).splitlines()[0][:200]
            time.sleep(0.3)
    return last


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
            last = str(e).strip().splitlines()[0][:200] if str(e).strip() else type(e).__name__
            time.sleep(0.2)
    return last


def postgres_version(dsn: str) -> str | None:
    import psycopg

    try:
        with psycopg.connect(dsn, connect_timeout=3) as conn:
            return conn.execute("show server_version").fetchone()[0]
    except Exception:  # noqa: BLE001
        return None

