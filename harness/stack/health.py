"""Readiness checks shared by every stack: does Kafka answer, does Postgres?

"Up" means usable, not merely listening: Kafka must return metadata and create
(then delete) a topic, Postgres must accept a connection and run a query. Each
check is bounded in time and returns an error string instead of raising.
"""

import time
import uuid

from ..clients import kafka_client
from ..core.errors import HarnessError, first_line
from ..core.redaction import scrub
from ..clients import pgconn

# librdkafka retries connections forever; every call below passes a timeout.
METADATA_TIMEOUT_S = 5.0


def kafka_probe(bootstrap: str, timeout: float, brokers: int = 1, cluster_id: str | None = None) -> str | None:
    """None when Kafka serves metadata listing at least `brokers` brokers and can create a topic, else the reason.

    With `cluster_id` (a stack that starts its own nodes), only that cluster counts: two stacks started at
    the same instant can pick the same free port, and the loser's node dies on the bind while the winner's
    answers there; without the check the loser's `up` said ready and its runs went to the other stack.

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
            if cluster_id and md.cluster_id != cluster_id:
                last = f"another Kafka answers on {bootstrap} (cluster id {md.cluster_id}, not this stack's {cluster_id})"
                time.sleep(0.3)
                continue
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


def api_versions_answer(host: str, port: int, timeout: float = 1.0) -> bool:
    """Whether the Kafka broker listening on host:port itself answers an ApiVersions request (v0) with no
    error: it processes requests, it does not merely accept connections (a restarted JVM binds its port
    before it serves). A raw request, because librdkafka sends each request to a broker of its choosing
    (a metadata request through node 2's address may be answered by node 1). A SASL listener answers
    ApiVersions before authentication, so this needs no credentials."""
    import socket
    import struct
    client = b"harness-probe"
    body = struct.pack(">hhih", 18, 0, 0x5A17, len(client)) + client      # api key 18 = ApiVersions, v0
    try:
        with socket.create_connection((host, port), timeout=timeout) as sock:
            sock.settimeout(timeout)
            sock.sendall(struct.pack(">i", len(body)) + body)
            head = b""
            while len(head) < 10:              # size, correlation id, error code
                chunk = sock.recv(10 - len(head))
                if not chunk:
                    return False
                head += chunk
    except OSError:
        return False
    _size, correlation, error = struct.unpack(">iih", head)
    return correlation == 0x5A17 and error == 0


def node_answers(host: str, port: int, node_id: int, bootstrap: str, timeout: float = 1.0) -> bool:
    """Whether Kafka node `node_id` is back: it answers requests on its own port (`api_versions_answer`)
    and the cluster's metadata lists it as a live broker (the controller has unfenced it)."""
    if not api_versions_answer(host, port, timeout):
        return False
    from confluent_kafka.admin import AdminClient
    admin = AdminClient(kafka_client.config(bootstrap, {
        "log_level": 0, "socket.connection.setup.timeout.ms": max(1000, int(timeout * 1000))}))
    try:
        return node_id in admin.list_topics(timeout=timeout).brokers
    except Exception:  # noqa: BLE001 - a probe reports, never raises
        return False


def partitions_short_of_replicas(bootstrap: str, timeout: float = 2.0) -> int | None:
    """How many partitions (internal ones included) have fewer in-sync replicas than replicas, or lead by no
    node: 0 when every partition is back in sync; None when the cluster could not be asked."""
    from confluent_kafka.admin import AdminClient
    admin = AdminClient(kafka_client.config(bootstrap, {"log_level": 0}))
    try:
        topics = admin.list_topics(timeout=timeout).topics
    except Exception:  # noqa: BLE001 - a probe reports, never raises
        return None
    return sum(1 for t in topics.values() for p in t.partitions.values()
               if p.leader < 0 or len(p.isrs) < len(p.replicas))


class PostgresRefused(HarnessError):
    """The server answered and refused for good (no such database, a password it does not take): waiting
    changes nothing, so the probe says it at once, in one line (exit 2)."""


def postgres_refusal(message: str, dsn: str) -> str | None:
    """One line for a refusal that no retry can mend, from libpq's message; None for anything else.
    Names quoted by the server are shown escaped (they come from the DSN, which the user may not have
    written)."""
    import re
    from psycopg.conninfo import conninfo_to_dict
    from ..core.escape import term
    try:
        info = conninfo_to_dict(dsn)
    except Exception:  # noqa: BLE001
        info = {}
    where = f"{term(str(info.get('host') or 'localhost'))}:{term(str(info.get('port') or 5432))}"
    m = re.search(r'database "([^"]*)" does not exist', message)
    if m:
        db = term(m.group(1))
        return (f'PostgreSQL at {where} has no database "{db}": create it first (as a role allowed to: '
                f'CREATE DATABASE "{db}" OWNER <user>; or createdb -h HOST -p PORT -U USER {db})')
    m = re.search(r'password authentication failed for user "([^"]*)"', message)
    if m:
        return f'PostgreSQL at {where} refused the password of user "{term(m.group(1))}"'
    return None


def postgres_probe(dsn: str, timeout: float) -> str | None:
    """None when PostgreSQL accepts a connection and a query within `timeout`, else why not. A refusal that
    no wait can mend (`postgres_refusal`) raises PostgresRefused at once."""

    deadline = time.monotonic() + timeout
    last = "no answer"
    while time.monotonic() < deadline:
        try:
            with pgconn.connect(dsn, connect_timeout=3) as conn:
                conn.execute("select 1")
            return None
        except Exception as e:  # noqa: BLE001
            # libpq's message may quote pieces of the DSN, password included: scrub before cutting.
            refused = postgres_refusal(str(e), dsn)
            if refused:
                raise PostgresRefused(refused) from None
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

    try:
        with pgconn.connect(dsn, connect_timeout=3) as conn:
            return conn.execute("show server_version").fetchone()[0]
    except Exception:  # noqa: BLE001
        return None

