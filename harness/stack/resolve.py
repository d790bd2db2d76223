"""Choose the stack an experiment runs on: external addresses, compose, or local.

Precedence: addresses given by flag or environment (then the harness starts and
deletes nothing), then `--stack compose`, then the local stack, which is
reused when it is already up and started otherwise. Addresses that are the
running local stack's own (as `harness env` exports them) mean that stack: the
command then holds its lease like any other, so nothing stops it meanwhile.
"""

from ..clients import kafka_client
from ..core.errors import HarnessError
from . import broker_version, compose, health, kafka_versions, local, local_record
from .stack import Stack, redact
from .compose_brokers import cut_nodes, delayed_nodes

STACKS = ("local", "compose")
# The user waits for this at most: an unreachable external cluster fails in well under 15 s.
EXTERNAL_PROBE_S = 8.0


def external(bootstrap: str | None, dsn: str | None) -> Stack:
    if not bootstrap or not dsn:
        missing = "--postgres-dsn" if bootstrap else "--bootstrap-servers"
        raise HarnessError(f"an external stack needs both --bootstrap-servers and --postgres-dsn; {missing} is missing")
    err = health.postgres_dsn_error(dsn)   # a typo in the DSN is reported before any network wait
    if err:
        raise HarnessError(f"--postgres-dsn {redact(dsn)} is not a valid connection string: {err}")
    settings = kafka_client.resolve(bootstrap)
    err = health.kafka_probe(bootstrap, EXTERNAL_PROBE_S)
    if err:
        how = f" (client settings: {kafka_client.describe(settings)})" if settings else ""
        raise HarnessError(f"Kafka at {bootstrap} is unreachable or unusable{how}: {err}")
    err = health.postgres_probe(dsn, 4.0)
    if err:
        raise HarnessError(f"PostgreSQL at {redact(dsn)} is unreachable: {redact(err)}")
    return Stack(kind="external", bootstrap_servers=bootstrap, postgres_dsn=dsn, owned=False, healthy=True,
                 postgres_version=health.postgres_version(dsn), kafka_config=settings,
                 kafka_version=broker_version.describe(bootstrap))


def get_stack(kind: str = "local", bootstrap: str | None = None, dsn: str | None = None,
              log=print, hold: bool = False, command: str = "",
              brokers: int | None = None, auth: str | None = None,
              build_images: bool = False, node_networks: bool | None = None,
              proxies: bool | None = None) -> tuple[Stack, "local.Claim | None"]:
    """Return (stack, claim). `claim` is the lease on a local stack that the caller must release.

    With `hold` (`harness up`) a local stack is kept until `harness down` and there is no claim.
    `brokers` (1 or 3; None: what the state folder remembers, else 1) sizes a local or compose stack.
    External and compose stacks are never stopped by a command, so they come without a claim.
    """
    if (bootstrap or dsn) and not local.serves(bootstrap, dsn):
        if kafka_versions.requested():
            raise HarnessError("--kafka-version (or HARNESS_KAFKA_VERSION) chooses the Kafka the harness starts; "
                               "an existing cluster (--bootstrap-servers) runs the release it runs (the report "
                               "names it)")
        if brokers is not None:
            raise HarnessError("--brokers sizes a stack the harness starts; an existing cluster "
                               "(--bootstrap-servers) has the brokers it has")
        return external(bootstrap, dsn), None
    if kind not in STACKS:
        raise HarnessError(f"unknown --stack {kind!r}; choose one of: {', '.join(STACKS)}")
    if kind == "compose":
        cut = cut_nodes(brokers)
        if cut:             # it would never answer as a whole: say why at once instead of waiting it out
            raise HarnessError(f"Kafka node {', '.join(map(str, cut))} is cut off by network rules (a network "
                               f"fault under way, or one a killed harness left): `harness down` removes them")
        delayed = delayed_nodes()
        if delayed:         # every run on it would be slowed, and judged, without being told
            raise HarnessError(f"Kafka node {', '.join(map(str, delayed))} is delayed by Toxiproxy (a latency fault "
                               f"under way, or one a killed harness left): `harness down` removes it")
        variant = compose.variant_for(brokers)
        want_proxies = compose.proxies_for(variant, proxies)
        st = compose.status() if compose.engine_available() is None else None
        if st and st.healthy and (brokers is None or st.brokers == brokers) and not build_images and \
                compose.recorded_proxies() == want_proxies and kafka_versions.requested() in (None, st.kafka_version) \
                and auth in (None, compose.recorded_auth()):
            return st, None
        return compose.up(variant, log=log, build_images=build_images, proxies=want_proxies, auth=auth), None
    return local.up(log=log, hold=hold, command=command, brokers=brokers, auth=auth, node_networks=node_networks,
                    proxies=proxies)


def current(kind: str = "local", bootstrap: str | None = None, dsn: str | None = None,
            check: bool = True) -> Stack | None:
    """The stack in use, without starting anything: the addresses given (probed), else the compose
    or local stack of the state folder; None when no stack is up."""
    if (bootstrap or dsn) and not local.serves(bootstrap, dsn):
        return external(bootstrap, dsn)
    if kind == "compose" or (local_record.read_record() or {}).get("kind") == "compose":
        st = compose.status()
        cut = cut_nodes(st.brokers)
        if cut:
            st.notes.append(f"node {', '.join(map(str, cut))} is cut off by network rules (a network fault under "
                            f"way, or one a killed harness left: `harness down` removes them)")
        elif cut is None:
            st.notes.append("whether a broker container is cut off by network rules is unknown (its namespace "
                            "could not be looked into from here)")
        if compose.recorded_proxies() and st.brokers > 1:
            st.notes.append("Kafka clients go through Toxiproxy (a proxy per node, for the latency fault)")
            delayed = delayed_nodes()
            if delayed:
                st.notes.append(f"{', '.join(f'kafka-{n}' for n in delayed)} delayed by Toxiproxy (a latency fault "
                                f"under way, or one a killed harness left: `harness down` removes it)")
            elif delayed is None:
                st.notes.append("Toxiproxy's toxics could not be read (its container does not answer)")
        return st
    return local.status(check=check)
