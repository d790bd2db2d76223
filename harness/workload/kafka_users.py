"""Kafka users the harness makes on its own SCRAM stack, and the ACLs that say what each may do.

On a stack with SCRAM and an authorizer (the local stack's default) the harness logs in as `harness`,
a super user. Nobody else should: a run's consumers get a user of that run (run_kafka_user.py), the
shell of `harness env` a read-only one. This module holds what both need, through confluent_kafka's
AdminClient as the super user: make a user with a random password (alter_user_scram_credentials,
SCRAM-SHA-512: the broker keeps only a salted verifier), grant it ACLs (create_acls), wait until the
broker lets it in, and take all of it away again (delete_acls by principal, then the credential).

A password lives only in the client settings handed to the user's processes (their environment) or a
0600 file; it never reaches argv, a log or a report, and any error message is scrubbed of it.
"""

from __future__ import annotations

import secrets
import time
from dataclasses import dataclass

from ..clients import kafka_client, kafka_logging
from ..core.errors import HarnessError

MECHANISM = "SCRAM-SHA-512"
ITERATIONS = 4096
ADMIN_TIMEOUT_S = 30.0
# A new user and its ACLs reach the broker through the metadata log: within well under a second on an
# idle stack; more than this is an error.
USABLE_WITHIN_S = 30.0


@dataclass(frozen=True)
class Allow:
    """One ALLOW ACL: `operation` on the resource (`kind`, `name`; `prefixed`: every name starting so)."""
    kind: str            # TOPIC, GROUP, TRANSACTIONAL_ID, BROKER (librdkafka's name for the cluster)
    name: str
    operation: str       # READ, WRITE, DESCRIBE, CREATE, ALL, IDEMPOTENT_WRITE, ...
    prefixed: bool = False


def is_scram(settings: dict) -> bool:
    """Do these client settings log in with SCRAM over SASL (so that users can be made for others)?"""
    mech = str(settings.get("sasl.mechanism") or settings.get("sasl.mechanisms") or "").upper()
    return "SASL" in str(settings.get("security.protocol", "")).upper() and mech.startswith("SCRAM-")


def login(settings: dict, user: str, password: str) -> dict:
    """The stack's client settings, logged in as `user` instead."""
    out = {k: v for k, v in settings.items() if not k.startswith("sasl.")}
    return {**out, "sasl.mechanism": MECHANISM, "sasl.username": user, "sasl.password": password}


def new_password() -> str:
    return secrets.token_urlsafe(24)


def _admin(bootstrap: str):
    from confluent_kafka.admin import AdminClient
    return AdminClient(kafka_client.config(bootstrap, kafka_logging.client_config()))


def _binding(user: str, a: Allow):
    from confluent_kafka.admin import AclBinding, AclOperation, AclPermissionType, ResourcePatternType, ResourceType
    return AclBinding(getattr(ResourceType, a.kind), a.name,
                      ResourcePatternType.PREFIXED if a.prefixed else ResourcePatternType.LITERAL,
                      f"User:{user}", "*", getattr(AclOperation, a.operation), AclPermissionType.ALLOW)


def _wait_all(futures: dict, settings: dict, what: str) -> None:
    for fut in futures.values():
        try:
            fut.result(timeout=ADMIN_TIMEOUT_S)
        except Exception as e:  # noqa: BLE001 - one clear line, without any secret
            first = (str(e).splitlines() or [type(e).__name__])[0]
            raise HarnessError(f"could not {what}: {kafka_client.scrub(first, settings)}") from None


def make(bootstrap: str, user: str, password: str, allows: list[Allow], probe_topic: str | None = None) -> None:
    """Grant `user` the ACLs `allows`, then set its SCRAM credential (last: once the broker lets the user in,
    it knows the ACLs written before it), and wait until a client logged in as it reaches the broker (and
    sees `probe_topic`, when given). HarnessError when any step fails."""
    from confluent_kafka.admin import ScramCredentialInfo, ScramMechanism, UserScramCredentialUpsertion
    admin = _admin(bootstrap)
    stack = kafka_client.settings_for(bootstrap)
    if allows:
        _wait_all(admin.create_acls([_binding(user, a) for a in allows], request_timeout=ADMIN_TIMEOUT_S),
                  stack, f"grant the Kafka user {user} its ACLs")
    _wait_all(admin.alter_user_scram_credentials([UserScramCredentialUpsertion(
        user, ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, ITERATIONS), password.encode())],
        request_timeout=ADMIN_TIMEOUT_S), stack, f"make the Kafka user {user}")
    admin.poll(0)
    wait_usable(bootstrap, login(stack, user, password), probe_topic)


def wait_usable(bootstrap: str, settings: dict, topic: str | None) -> None:
    """Wait until a client with `settings` authenticates (and, with `topic`, is allowed to describe it)."""
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AdminClient
    deadline = time.monotonic() + USABLE_WITHIN_S
    last = "no answer"
    client = AdminClient({**settings, "bootstrap.servers": bootstrap, **kafka_logging.client_config()})
    while time.monotonic() < deadline:
        try:
            md = client.list_topics(topic, timeout=5)
            err = md.topics[topic].error if topic else None
            if err is None:
                return
            last = err.str()
        except KafkaException as e:
            last = (str(e.args[0].str() if e.args else e).splitlines() or ["?"])[0]
        time.sleep(0.2)
    raise HarnessError(f"the new Kafka user {settings.get('sasl.username')} could not use the broker within "
                       f"{USABLE_WITHIN_S:.0f} s: {kafka_client.scrub(last, settings)}")


def remove(bootstrap: str, user: str) -> None:
    """Delete every ACL of `user` and its SCRAM credential; one already gone is fine. Raises on other errors."""
    from confluent_kafka.admin import (AclBindingFilter, AclOperation, AclPermissionType, ResourcePatternType,
                                       ResourceType, ScramMechanism, UserScramCredentialDeletion)
    admin = _admin(bootstrap)
    stack = kafka_client.settings_for(bootstrap)
    everything = AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY, f"User:{user}", None,
                                  AclOperation.ANY, AclPermissionType.ANY)
    _wait_all(admin.delete_acls([everything], request_timeout=ADMIN_TIMEOUT_S), stack,
              f"delete the ACLs of the Kafka user {user}")
    fut = admin.alter_user_scram_credentials([UserScramCredentialDeletion(user, ScramMechanism.SCRAM_SHA_512)],
                                             request_timeout=ADMIN_TIMEOUT_S)[user]
    try:
        fut.result(timeout=ADMIN_TIMEOUT_S)
    except Exception as e:  # noqa: BLE001
        if "RESOURCE_NOT_FOUND" not in str(e) and "does not exist" not in str(e).lower() \
                and "not found" not in str(e).lower():
            first = (str(e).splitlines() or [type(e).__name__])[0]
            raise HarnessError(f"could not delete the Kafka user {user}: {kafka_client.scrub(first, stack)}") from None
    admin.poll(0)


def users(bootstrap: str) -> list[str]:
    """Every SCRAM user the stack knows (names only)."""
    admin = _admin(bootstrap)
    try:
        got = admin.describe_user_scram_credentials(request_timeout=ADMIN_TIMEOUT_S).result(timeout=ADMIN_TIMEOUT_S)
    except Exception as e:  # noqa: BLE001
        raise HarnessError(f"could not list the Kafka users: {(str(e).splitlines() or ['?'])[0]}") from None
    return sorted(got)


def prefixed_topic_acls(bootstrap: str, user: str) -> list[str]:
    """The names of the PREFIXED topic ACLs that allow `user` something (a run's user has one: its own prefix)."""
    from confluent_kafka.admin import (AclBindingFilter, AclOperation, AclPermissionType, ResourcePatternType,
                                       ResourceType)
    admin = _admin(bootstrap)
    mine = AclBindingFilter(ResourceType.TOPIC, None, ResourcePatternType.PREFIXED, f"User:{user}", None,
                            AclOperation.ANY, AclPermissionType.ALLOW)
    try:
        got = admin.describe_acls(mine, request_timeout=ADMIN_TIMEOUT_S).result(timeout=ADMIN_TIMEOUT_S)
    except Exception as e:  # noqa: BLE001
        raise HarnessError(f"could not list the ACLs of the Kafka user {user}: "
                           f"{(str(e).splitlines() or ['?'])[0]}") from None
    return sorted({b.name for b in got})
