"""The local Kafka's authentication and authorization settings (the default; `--auth none` has none), apart
from the node's process handling (local_kafka.py) because they are the stack's security promise in one place.

Clients, and the broker talking to itself (transaction markers), use one SASL_PLAINTEXT listener with
SCRAM-SHA-512 as the user `harness`, whose credentials are written into the metadata at format time.

The KRaft controller listener is authenticated too, but with SASL/PLAIN, not SCRAM: SCRAM credentials
live in the metadata log that the controllers themselves replicate, so a controller cannot check a
SCRAM login before it has that log (Kafka's SCRAM docs for KRaft; the controller-listener example in its
listener docs uses PLAIN with `sasl.mechanism.controller.protocol`). The only PLAIN user is
`controller`, with a random password kept in `<state>/kafka-controller.properties` (0600) and in the
nodes' server.properties (0600) as a JAAS setting, never on a command line. Without it nobody reaches the
controllers: before, any local user could change a cluster-wide setting through `bootstrap.controllers`.

Every request is checked by Kafka's StandardAuthorizer (KRaft's, ACLs kept in the metadata log):
`harness` and `controller` are super users, and any other principal may do only what an ACL grants it
(`allow.everyone.if.no.acl.found=false`). Each run gets a user of its own (workload/run_kafka_user.py),
made at its start and retired at its end (see below); `harness env`'s shell gets `harness_shell`.

Kafka (3.x to 4.4 at least) has a flaw in ScramDelta.apply, the step that folds a batch of changed SCRAM
users into a node's image of them. It walks the changed users in HashMap order into the mechanism's map
of users, and a deleted user's removal that leaves that map empty drops the map itself; every user the
walk puts after it goes into the dropped map. On a running node the map still holds `harness`, so no
removal empties it; but a node that starts rebuilds its users from its metadata log into an empty image,
and when the first changed user it meets is a deleted one, it ends up knowing no SCRAM user at all and
refuses every login, the other nodes' included ("invalid credentials"). A deleted run user did that after
a broker fault's restart, and at the `up` after a run that started the stack alone and stopped it
seconds after its user went.

So the harness never deletes a SCRAM user on its stacks: a user it ends is retired
(workload/kafka_users.retire: its ACLs go, its credential is overwritten with a random password nobody
keeps). An overwrite is a put in that walk, never a removal, so the log holds nothing that can empty the
map. As a second safeguard a node writes a snapshot of its metadata every few seconds
(`SNAPSHOT_SETTINGS`): from a snapshot it starts with the users that exist (`harness` among them), so a
user someone deletes by hand with the harness's login can no longer empty the map once a snapshot
follows, and a stack an older harness made (whose log holds deletions) is covered once it has run a few
seconds with this setting.
"""

import re
import secrets
from pathlib import Path

from ..core import safefile
from ..core.errors import HarnessError

SCRAM_MECHANISM = "SCRAM-SHA-512"
SCRAM_USER = "harness"
CONTROLLER_MECHANISM = "PLAIN"
CONTROLLER_USER = "controller"
CONTROLLER_FILE = "kafka-controller.properties"
CLIENT_FILE = "client.properties"        # the harness's own login (librdkafka names), in the state folder
AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
SUPER_USERS = (SCRAM_USER, CONTROLLER_USER)       # the harness itself, and every node towards the controllers
# A metadata snapshot within seconds of any change (Kafka's default: an hour, or 20 MB of records), so that a
# node that starts rarely rebuilds its SCRAM users from a log that deleted one (the second safeguard above);
# old snapshots and log segments go after ten minutes (the newest snapshot is always kept).
SNAPSHOT_SETTINGS = {"metadata.log.max.snapshot.interval.ms": "5000", "metadata.max.retention.ms": "600000"}
# What secrets.token_urlsafe draws: anything else read back from a file is refused, as it could break out
# of the JAAS string it goes into.
PASSWORD = re.compile(r"[A-Za-z0-9_-]{16,200}")


def new_password() -> str:
    return secrets.token_urlsafe(18)


def checked(password: str, where: Path) -> str:
    """`password` as read from `where`, if it has the shape the harness writes; else one clear error."""
    if not PASSWORD.fullmatch(password):
        raise HarnessError(f"{where} holds a Kafka password the harness did not write (unexpected characters "
                           f"or length); run `harness down --purge` to start the stack afresh")
    return password


def _kept_password(f: Path, key: str, text_of) -> str:
    """The password under `key` in the properties file `f`, checked; a new one written there (0600, as
    `text_of(password)`) when the file or the key is missing."""
    from ..clients.kafka_client import load_file
    if f.exists():
        pw = load_file(f).get(key)
        if pw:
            return checked(pw, f)
    pw = new_password()
    write_private(f, text_of(pw))
    return pw


def controller_password(state: Path) -> str:
    """The controller user's password from `<state>/kafka-controller.properties`, written (0600) if missing."""
    return _kept_password(state / CONTROLLER_FILE, "password",
                          lambda pw: "# The KRaft controller listener's SASL/PLAIN user of this harness stack.\n"
                                     f"username={CONTROLLER_USER}\npassword={pw}\n")


def client_password(state: Path) -> str:
    """The SCRAM user `harness`'s password from `<state>/client.properties`, written (0600) with a new one if
    missing: the local nodes and the compose containers format their metadata with it."""
    return _kept_password(state / CLIENT_FILE, "sasl.password", client_properties)


def scram_settings(port: int, controller_port: int, password: str, controller_pw: str, host: str) -> dict:
    """Broker settings: one SASL_PLAINTEXT SCRAM-SHA-512 listener (clients and inter-broker traffic), the
    controller listener SASL_PLAINTEXT with PLAIN, and the authorizer."""
    scram = (f'org.apache.kafka.common.security.scram.ScramLoginModule required username="{SCRAM_USER}" '
             f'password="{password}";')
    # The same entry logs this node in to the controllers (username/password) and lets the controller
    # user in on its own controller listener (user_<name>).
    plain = (f'org.apache.kafka.common.security.plain.PlainLoginModule required username="{CONTROLLER_USER}" '
             f'password="{controller_pw}" user_{CONTROLLER_USER}="{controller_pw}";')
    return {
        "listeners": f"SASL_PLAINTEXT://{host}:{port},CONTROLLER://{host}:{controller_port}",
        "advertised.listeners": f"SASL_PLAINTEXT://{host}:{port}",
        "listener.security.protocol.map": "CONTROLLER:SASL_PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT",
        "inter.broker.listener.name": "SASL_PLAINTEXT",
        "sasl.enabled.mechanisms": SCRAM_MECHANISM,
        "sasl.mechanism.inter.broker.protocol": SCRAM_MECHANISM,
        f"listener.name.sasl_plaintext.{SCRAM_MECHANISM.lower()}.sasl.jaas.config": scram,
        "listener.name.controller.sasl.enabled.mechanisms": CONTROLLER_MECHANISM,
        "sasl.mechanism.controller.protocol": CONTROLLER_MECHANISM,
        f"listener.name.controller.{CONTROLLER_MECHANISM.lower()}.sasl.jaas.config": plain,
        "authorizer.class.name": AUTHORIZER,
        "super.users": ";".join(f"User:{u}" for u in SUPER_USERS),
        "allow.everyone.if.no.acl.found": "false",
        **SNAPSHOT_SETTINGS,
    }


def client_properties(password: str) -> str:
    """client.properties of a SCRAM stack, in librdkafka's names (kcat -F reads it too)."""
    return ("# Kafka client settings of this harness stack (harness up --auth scram); librdkafka names.\n"
            "security.protocol=SASL_PLAINTEXT\n"
            f"sasl.mechanism={SCRAM_MECHANISM}\n"
            f"sasl.username={SCRAM_USER}\n"
            f"sasl.password={password}\n")


def write_private(path: Path, text: str) -> None:
    """Write `text` to `path`, readable by its owner only from the first byte on."""
    safefile.make_folder(path.parent, safefile.PRIVATE_FOLDER)
    safefile.write_text(path, text, safefile.PRIVATE)
