"""Kafka users the harness makes on its own SCRAM stack, and the ACLs that say what each may do.

On a stack with SCRAM and an authorizer (the local stack's default) the harness logs in as `harness`,
a super user. Nobody else should: a run's consumers get a user of that run (run_kafka_user.py), the
shell of `harness env` a read-only one. This module holds what both need, through confluent_kafka's
AdminClient as the super user: make a user with a random password (alter_user_scram_credentials,
SCRAM-SHA-512: the broker keeps only a salted verifier), grant it ACLs (create_acls), wait until the
broker lets it in, and take all of it away again: its ACLs deleted by principal, and the user RETIRED.

A user the harness ends is never deleted, it is retired: its credential is overwritten (an upsert) with a
random password nobody holds, under RETIRED_ITERATIONS, a SCRAM iteration count no live user of ours has,
so that `users()` tells the two apart from the broker's own answer. Deleting a credential writes a
removal record into the metadata log, and a Kafka node (3.x to 4.4 at least) that starts and rebuilds its
users from a log holding one can lose every user (stack/kafka_auth.py says how). An overwrite cannot:
the harness writes no removal at all. Retired users stay until `harness down --purge` (a few hundred
bytes of metadata each), can never log in again, and are no live run's.

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
# The mark of a retired user (see above): Kafka keeps the iteration count beside the verifier and shows it
# to describe_user_scram_credentials; it takes 4096 to 16384 for SCRAM-SHA-512.
RETIRED_ITERATIONS = 4099
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


def retire(bootstrap: str, user: str) -> None:
    """Delete every ACL of `user`, then overwrite its SCRAM credential with a random password that is thrown
    away, marked RETIRED_ITERATIONS: it can never log in again, and no removal reaches the metadata log.
    Retiring a retired (or never made) user is fine. HarnessError on any failure."""
    from confluent_kafka.admin import (AclBindingFilter, AclOperation, AclPermissionType, ResourcePatternType,
                                       ResourceType, ScramCredentialInfo, ScramMechanism,
                                       UserScramCredentialUpsertion)
    admin = _admin(bootstrap)
    stack = kafka_client.settings_for(bootstrap)
    everything = AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY, f"User:{user}", None,
                                  AclOperation.ANY, AclPermissionType.ANY)
    _wait_all(admin.delete_acls([everything], request_timeout=ADMIN_TIMEOUT_S), stack,
              f"delete the ACLs of the Kafka user {user}")
    _wait_all(admin.alter_user_scram_credentials([UserScramCredentialUpsertion(
        user, ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, RETIRED_ITERATIONS),
        secrets.token_bytes(32))], request_timeout=ADMIN_TIMEOUT_S), stack, f"retire the Kafka user {user}")
    admin.poll(0)


def _described(bootstrap: str) -> dict:
    admin = _admin(bootstrap)
    try:
        return admin.describe_user_scram_credentials(request_timeout=ADMIN_TIMEOUT_S).result(timeout=ADMIN_TIMEOUT_S)
    except Exception as e:  # noqa: BLE001
        raise HarnessError(f"could not list the Kafka users: {(str(e).splitlines() or ['?'])[0]}") from None


def is_retired(description) -> bool:
    """Is this user's description (describe_user_scram_credentials) a retired one: every credential it has is
    SCRAM-SHA-512 with RETIRED_ITERATIONS?"""
    infos = list(getattr(description, "scram_credential_infos", None) or [])
    return bool(infos) and all(getattr(i, "iterations", None) == RETIRED_ITERATIONS for i in infos)


def users(bootstrap: str) -> list[str]:
    """Every SCRAM user the stack knows that can log in (names only): retired ones are left out."""
    return sorted(u for u, d in _described(bootstrap).items() if not is_retired(d))


def retired(bootstrap: str) -> list[str]:
    """Every user the harness retired (names only)."""
    return sorted(u for u, d in _described(bootstrap).items() if is_retired(d))


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
