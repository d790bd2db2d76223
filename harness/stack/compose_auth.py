"""The compose stack's Kafka auth (`harness up --stack compose --auth scram`): which one a stack runs, and
what `docker compose` needs for it. Apart from compose.py, which starts and stops containers, because it is
the compose stack's security promise in one place, as kafka_auth.py is the local stack's.

With SCRAM the compose files take an override (compose/docker-compose.scram.yml, or
docker-compose.cluster.scram.yml for the three nodes) with the same listeners, users and authorizer as the
local stack's `--auth scram`. Its container entry point, compose/kafka-scram.sh, reads the two passwords
from compose secrets, which `docker compose` takes from its own environment (`HARNESS_KAFKA_PASSWORD`,
`HARNESS_KAFKA_CONTROLLER_PASSWORD`); the harness puts them there from the state folder's 0600 files,
client.properties (the harness's login, which its clients then use) and kafka-controller.properties. No
password is in a compose file, a command line, the containers' environment or a log. The images are the
plaintext stack's: an image built by any harness runs either way.

The auth is a property of the Kafka volumes: the SCRAM user `harness` is written into the metadata when
a container formats its empty volume. So it is kept beside them (`compose.auth`, like the release that
wrote them, compose_images.RELEASE_FILE): `harness down` keeps it, `harness down --purge` removes it with
the passwords. Another auth on existing volumes is refused in one line, as on the local stack; volumes an
older harness wrote, without the file, are plaintext.
"""

from __future__ import annotations

from pathlib import Path

from ..core import safefile
from ..core.errors import HarnessError
from . import kafka_auth
from .compose_images import COMPOSE_DIR

AUTHS = ("none", "scram")
# A new compose stack's auth (`--auth none` asks for plaintext; a stack keeps what its volumes were made with).
DEFAULT_AUTH = "scram"
AUTH_FILE = "compose.auth"
OVERRIDES = {"single": COMPOSE_DIR / "docker-compose.scram.yml",
             "cluster": COMPOSE_DIR / "docker-compose.cluster.scram.yml"}
START_SCRIPT = COMPOSE_DIR / "kafka-scram.sh"       # the Kafka containers' entry point in both (their `configs`)
PASSWORD_ENV = "HARNESS_KAFKA_PASSWORD"
CONTROLLER_PASSWORD_ENV = "HARNESS_KAFKA_CONTROLLER_PASSWORD"


def recorded(state: Path) -> str | None:
    """The auth the state folder's compose volumes were made with; None when it never recorded one."""
    got = safefile.read_tail(state / AUTH_FILE, 64).strip()     # never blocks on a FIFO, never follows a link
    return got if got in AUTHS else None


def choose(state: Path, asked: str | None, volumes: bool) -> str:
    """The auth to start with: as asked, else as the volumes were made (`volumes`: whether they exist), else
    the default. Another auth than the existing volumes' is refused, and so are SCRAM volumes whose
    password file is gone (the harness could never log in to them again)."""
    if asked is not None and asked not in AUTHS:
        raise HarnessError(f"unknown --auth {asked!r}; choose one of: {', '.join(AUTHS)}")
    had = (recorded(state) or "none") if volumes else None
    if had and asked and asked != had:
        raise HarnessError(f"the compose stack's Kafka volumes were set up with --auth {had}; to use --auth {asked}, "
                           f"run `harness down --purge` first (it deletes their data)")
    auth = asked or had or DEFAULT_AUTH
    if volumes and auth == "scram" and not (state / kafka_auth.CLIENT_FILE).is_file():
        raise HarnessError(f"the compose stack's Kafka volumes hold SCRAM users, but the password of the harness's "
                           f"own ({state / kafka_auth.CLIENT_FILE}) is gone: `harness down --purge` deletes "
                           f"their data, then `harness up --stack compose` starts afresh")
    return auth


def record(state: Path, auth: str) -> None:
    safefile.write_text(state / AUTH_FILE, auth + "\n", safefile.PRIVATE)


def override(variant: str, auth: str) -> list[str]:
    """The `-f` options the auth adds after the variant's own compose files."""
    return ["-f", str(OVERRIDES[variant])] if auth == "scram" else []


def secrets_env(state: Path, auth: str) -> dict:
    """The passwords `docker compose` hands to the containers as secrets ({} for plaintext); made (0600)
    when missing, so that a new stack formats its volumes with them."""
    if auth != "scram":
        return {}
    return {PASSWORD_ENV: kafka_auth.client_password(state),
            CONTROLLER_PASSWORD_ENV: kafka_auth.controller_password(state)}


def client_settings(state: Path, auth: str) -> dict:
    """The harness's own Kafka client settings on this stack ({} for plaintext)."""
    from ..clients.kafka_client import load_file
    f = state / kafka_auth.CLIENT_FILE
    return load_file(f) if auth == "scram" and f.is_file() else {}


def purged_files(state: Path) -> list[Path]:
    """What goes with the volumes at `down --purge`: the record and every password of their users, unless a
    local stack's Kafka data in the same state folder (stopped, kept) was made with those same files."""
    from .local_kafka import every_node
    from .shell_user import FILE as SHELL_FILE      # `harness env`'s read-only login
    if any(k.formatted() for k in every_node(state)):
        return [state / AUTH_FILE]
    return [state / AUTH_FILE, state / kafka_auth.CLIENT_FILE, state / kafka_auth.CONTROLLER_FILE, state / SHELL_FILE]
