"""`harness up`: start Kafka and PostgreSQL (or reuse them) and wait until all answer.
"""

import click

from ...core.errors import HarnessError
from .stack_options import kafka_version_option, say, stack_options


# What a plaintext stack gives up, said at each `up` (issue 53: another local user wrote into a run's topic).
NO_AUTH = ("Kafka has no authentication (--auth none): any local user can read and write every topic and change "
           "the cluster's settings; `harness down --purge` then `harness up --auth scram` (a new stack's default) closes that")


def no_auth(kind: str) -> str:
    """NO_AUTH, with the command that closes it on this kind of stack."""
    return NO_AUTH if kind == "local" else NO_AUTH.replace("harness up --auth scram",
                                                           f"harness up --stack {kind} --auth scram")


@click.command()
@click.option("--brokers", type=int, default=None, metavar="N",
              help="Kafka nodes: 1, or 3 for a KRaft cluster (replication factor 3, min.insync.replicas 2) "
                   "that broker faults need. The state folder remembers it for run, status and down.  [default: 1]")
@click.option("--auth", type=click.Choice(["none", "scram"]), default=None,
              help="Local or compose stack: how Kafka clients authenticate. scram (the default for a new stack): the only "
                   "client listener is SASL_PLAINTEXT with SCRAM-SHA-512, the controller listener takes a "
                   "SASL/PLAIN login, and an authorizer allows each user only what an ACL grants: the harness "
                   "logs in as `harness` ($HARNESS_HOME/client.properties, 0600), each run's consumers as a user "
                   "of that run (its own topics and group, retired with the run), `harness env`'s shell as a "
                   "read-only user. none gives all that up: any local user may read and write every topic "
                   "(a run's input too, falsifying its verdict) and change the cluster's settings. "
                   "[default: what the stack was set up with, else scram]")
@click.option("--build-images", is_flag=True,
              help="Compose stack: build the Kafka and PostgreSQL images here from Debian's packages and Kafka's "
                   "jars (scripts/build-images.sh) instead of the official images. Without it they are built only "
                   "when an official image can be neither found on the engine nor pulled.")
@click.option("--node-networks/--no-node-networks", default=None,
              help="Local stack: each Kafka node in a network namespace of its own (its address in "
                   "198.18.0.0/15, reached only from this machine), so network faults (partition, client-cut) "
                   "can cut one node's traffic; needs root (ip netns, iptables). The state folder remembers it. "
                   "[default: what the stack was set up with, else off]")
@click.option("--proxies/--no-proxies", default=None,
              help="3-broker stack: Kafka clients reach each node through a Toxiproxy proxy on 127.0.0.1 "
                   "(the nodes talk to each other directly), so the latency fault can delay one node's replies and the "
                   "protocol faults (delay-request, fail-request, duplicate-request) can put their proxy there. "
                   "Local: needs toxiproxy-server (bash .ci/install-toxiproxy.sh); compose: a Toxiproxy container "
                   "(the official image, or one scripts/build-images.sh builds). The state folder remembers it. "
                   "[default: what the stack was set up with, else off]")
@kafka_version_option
@stack_options
def up(brokers, auth, build_images, node_networks, proxies, stack_kind, bootstrap_servers, postgres_dsn):
    """Start Kafka and PostgreSQL (or reuse them), and wait until all answer.

    The local stack runs as processes under the state folder ($HARNESS_HOME,
    default .harness/): Kafka resolved from Maven Central with mvn on first
    use, PostgreSQL from Debian's server binaries. With --brokers 3 Kafka is
    three processes from the same jars, each a broker and a KRaft controller
    with its own folder and ports on 127.0.0.1; with --node-networks each node
    instead listens on its own address, in a network namespace of its own, so
    that network faults can cut it.

    \b
    Examples:
      harness up && harness status
      harness up --brokers 3        # then: harness run eos --fault broker-kill
      harness up --brokers 3 --node-networks   # then: --fault partition
      harness up --brokers 3 --proxies         # then: --fault latency, --fault delay-request:api=EndTxn
      harness up --auth none        # plaintext Kafka: any local user may write any topic
      harness up --stack compose    # Docker Compose (an engine: bash scripts/docker-engine.sh start)
      harness up --stack compose --auth none   # plaintext compose Kafka
      harness up --stack compose --brokers 3 --proxies   # then: --fault latency
    """
    from ...stack.resolve import get_stack
    if auth and (bootstrap_servers or postgres_dsn):
        raise HarnessError("--auth sets up the stack the harness starts; an existing cluster takes --kafka-config "
                           "instead")
    if build_images and stack_kind != "compose":
        raise HarnessError("--build-images builds the compose stack's images; add --stack compose")
    if node_networks is not None and (bootstrap_servers or postgres_dsn or stack_kind != "local"):
        raise HarnessError("--node-networks sets up the local stack's Kafka nodes")
    if proxies is not None and (bootstrap_servers or postgres_dsn):
        raise HarnessError("--proxies sets up the Kafka nodes the harness starts (local or compose)")
    said = []                 # what the start already said as it went: its notes are not said twice

    def log(line: str) -> None:
        said.append(line)
        say(line)
    stack, _ = get_stack(stack_kind, bootstrap_servers, postgres_dsn, log=log, hold=True, brokers=brokers,
                         auth=auth, build_images=build_images, node_networks=node_networks, proxies=proxies)
    for note in stack.notes:
        if note not in said:
            say(note)
    click.echo(f"{stack.kind} stack ready: kafka {stack.bootstrap_servers} ({stack.kafka_auth}), postgres "
               f"{stack.public()['postgres_dsn']}")
    if stack.owned:
        from ...stack.local_record import client_properties_file
        props = client_properties_file()
        if props:
            say(f"Kafka client settings (0600): {props}")
        else:
            say(no_auth(stack.kind))
    if stack.kind == "local":
        say("kept running until `harness down`")
