"""The Docker Compose stack, for users who have a Docker engine.

`compose/docker-compose.yml` runs the same pinned Kafka (official
`apache/kafka` image) and PostgreSQL, ports bound to 127.0.0.1, with
healthchecks; `docker compose up --wait` returns when both are healthy. On a
machine without an engine we say so in one line instead of hanging.

The three-node cluster (`docker-compose.cluster.yml`) takes one override,
`docker-compose.proxies.yml` (`--proxies`): a Toxiproxy container in front of
each node, for the latency fault; clients then bootstrap through the proxies.
stack.json remembers the variant, the images and the proxies, so later
commands (run, status) use the same files; `down` adds the proxies' file
whenever the project has a Toxiproxy container. The Kafka release
(--kafka-version) chooses the image, and is remembered beside the volumes it
wrote (`compose.kafka_version`); so is the Kafka auth (`--auth`, SCRAM unless
asked otherwise: compose_auth.py), whose override file comes last.
"""

import json
import os
import secrets
import shutil
import subprocess
from pathlib import Path

from ..core import package_data, versions
from ..core.errors import HarnessError
from ..core.paths import state_dir
from . import compose_auth, health
from .compose_images import (COMPOSE_DIR, IMAGE_ENV, NEEDED, PROJECT, RELEASE_FILE, ensure_images, kafka_image,
                             recorded_release, release_for_up, reported_release)
from .stack import Stack

FILES = {"single": COMPOSE_DIR / "docker-compose.yml", "cluster": COMPOSE_DIR / "docker-compose.cluster.yml"}
# The cluster's override that puts Toxiproxy in front of each node (`harness up --stack compose --brokers 3
# --proxies`): clients then bootstrap through the proxies' ports, and Toxiproxy's API is on its own port.
PROXIES_FILE = COMPOSE_DIR / "docker-compose.proxies.yml"
# A private Docker engine for machines without one (scripts/docker-engine.sh), wherever the package is.
ENGINE_SCRIPT = package_data.path("scripts", "docker-engine.sh")
CLUSTER_PROXY_PORTS = (29192, 29193, 29194)
TOXIPROXY_API_PORT = 28474
PROXIED_PORT = 9094           # each node's PROXIED listener inside its container, where its proxy forwards
KAFKA_PORT = 29092
# The cluster variant's three nodes publish 29092, 29093 and 29094 (compose/docker-compose.cluster.yml).
CLUSTER_KAFKA_PORTS = (29092, 29093, 29094)
BROKERS = {"single": 1, "cluster": 3}
POSTGRES_PORT = 25432
# Pulling images on a first run can take minutes; healthchecks then settle in ~30 s.
UP_TIMEOUT_S = 600


def engine_available() -> str | None:
    """None when a Docker engine answers, else why not."""
    if shutil.which("docker") is None:
        return "the docker command is not installed"
    try:
        import docker
        docker.from_env(timeout=5).ping()
        return None
    except Exception as e:  # noqa: BLE001
        return f"no Docker engine answers ({str(e).splitlines()[0][:120]})"


def _password(state: Path) -> str:
    """The compose Postgres password: $HARNESS_PG_PASSWORD when set (CI), else one generated and kept."""
    if os.environ.get("HARNESS_PG_PASSWORD"):
        return os.environ["HARNESS_PG_PASSWORD"]
    f = state / "compose.password"
    if not f.exists():
        state.mkdir(parents=True, exist_ok=True)
        fd = os.open(f, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as fh:
            fh.write(secrets.token_urlsafe(18) + "\n")
    return f.read_text().strip()


def _env(state: Path, release: str | None = None, auth: str = "none") -> dict:
    """The environment of every `docker compose` call: the passwords (the Kafka ones for `up` with SCRAM), the
    Kafka release (for the image builder), and the images this state folder's stack was started with (so a
    later call neither pulls nor builds again) unless the user names others."""
    recorded = _recorded(state).get("images")
    images = {k: v for k, v in recorded.items() if k in IMAGE_ENV and isinstance(v, str)} \
        if isinstance(recorded, dict) else {}
    return {**images, **os.environ, "HARNESS_PG_PASSWORD": _password(state),
            "HARNESS_KAFKA_VERSION": release or recorded_release(state) or versions.KAFKA_VERSION,
            **compose_auth.secrets_env(state, auth)}


def recorded_auth(state: Path | None = None) -> str:
    """The Kafka auth of this state folder's compose stack: as stack.json says, else as its volumes were made."""
    state = state or state_dir()
    auth = _recorded(state).get("auth")
    return auth if auth in compose_auth.AUTHS else compose_auth.recorded(state) or "none"


def _recorded(state: Path) -> dict:
    from .local_record import read_record   # stack.json, whichever kind of stack wrote it
    return read_record(state) or {}


def variant_for(brokers: int | None) -> str:
    """The compose file for a cluster size: single (1 broker) or cluster (3)."""
    if brokers is None:
        return _recorded_variant(state_dir())
    for variant, n in BROKERS.items():
        if n == brokers:
            return variant
    raise HarnessError(f"--brokers must be one of {', '.join(map(str, BROKERS.values()))}, got {brokers}")


def _recorded_variant(state: Path) -> str:
    v = _recorded(state).get("variant")
    return v if v in FILES else "single"


def recorded_proxies(state: Path | None = None) -> bool:
    """Whether this state folder's compose cluster was started with its proxies (a local stack's record,
    or a compose record of the single node, says nothing about them)."""
    rec = _recorded(state or state_dir())
    return rec.get("kind") == "compose" and rec.get("variant") == "cluster" and rec.get("proxies") is True


def _project_services(stopped_too: bool) -> set[str] | None:
    """The compose services the project has containers of (running ones, or all); None: the engine cannot say."""
    try:
        import docker
        found = docker.from_env(timeout=10).containers.list(
            all=stopped_too, filters={"label": f"com.docker.compose.project={PROJECT}"})
    except Exception:  # noqa: BLE001 - unknown
        return None
    return {s for c in found if (s := c.labels.get("com.docker.compose.service"))}


def proxy_container() -> bool:
    """Whether the project has a Toxiproxy container, running or not (True when the engine cannot say: then
    the proxies' file goes to `down` too, so a container there is removed with the rest)."""
    services = _project_services(stopped_too=True)
    return services is None or "toxiproxy" in services


def proxies_for(variant: str, proxies: bool | None) -> bool:
    """Whether the stack to start has proxies: as asked, else as the state folder's stack had them; only
    the cluster has them."""
    if proxies is None:
        proxies = recorded_proxies() and _recorded_variant(state_dir()) == variant
    if proxies and variant != "cluster":
        raise HarnessError("--proxies puts Toxiproxy in front of the compose cluster's nodes: add --brokers 3")
    return bool(proxies)


SERVICES = {"single": {"kafka", "postgres"}, "cluster": {"kafka-1", "kafka-2", "kafka-3", "postgres", "toxiproxy"}}


def _refuse_other_variant(variant: str) -> None:
    """One line when the project runs containers of the other variant (its ports would clash, or its nodes
    be left behind): `harness down` first, which keeps the data."""
    running = _project_services(stopped_too=False)
    if running is None:             # unknown: compose itself says what clashes
        return
    other = sorted(running - SERVICES[variant])
    if other:
        raise HarnessError(f"the compose project {PROJECT} runs {', '.join(other)} (the other variant): `harness down` "
                           f"first (it keeps the data), then `harness up --stack compose --brokers {BROKERS[variant]}`")


def _files(variant: str, proxies: bool, auth: str = "none") -> list[str]:
    return ["-f", str(FILES[variant]), *(["-f", str(PROXIES_FILE)] if proxies else []),
            *compose_auth.override(variant, auth)]


def _stack(state: Path, variant: str = "single", proxies: bool = False) -> Stack:
    from ..clients import kafka_client
    ports = CLUSTER_PROXY_PORTS if proxies else CLUSTER_KAFKA_PORTS if variant == "cluster" else (KAFKA_PORT,)
    bootstrap = ",".join(f"127.0.0.1:{p}" for p in ports)
    own = compose_auth.client_settings(state, recorded_auth(state))
    settings = kafka_client.resolve(bootstrap, own) if own else kafka_client.resolve(bootstrap)
    if proxies:     # a broker fault asks the nodes themselves, past their proxies, whether one is back
        kafka_client.use(",".join(f"127.0.0.1:{p}" for p in CLUSTER_KAFKA_PORTS), settings)
    return Stack(kind="compose", bootstrap_servers=bootstrap,
                 postgres_dsn=f"postgresql://harness:{_password(state)}@127.0.0.1:{POSTGRES_PORT}/harness",
                 owned=True, kafka_version=reported_release(state, _recorded(state).get("images")),
                 brokers=BROKERS[variant], kafka_config=settings)


def up(variant: str = "single", log=print, build_images: bool = False, proxies: bool | None = None,
       auth: str | None = None) -> Stack:
    """Start the compose stack (`auth`: "none" or "scram"; None keeps what its volumes were made with)."""
    why = engine_available()
    if why:
        raise HarnessError(f"--stack compose needs a Docker engine, but {why}; start one with "
                           f"`bash {ENGINE_SCRIPT} start`, or use the default local stack (no Docker "
                           f"needed) or --bootstrap-servers/--postgres-dsn")
    state = state_dir()
    proxies = proxies_for(variant, proxies)
    _refuse_other_variant(variant)
    release, existing = release_for_up(state, variant)
    auth = compose_auth.choose(state, auth, existing)
    env = _env(state, release, auth)
    kafka_image(env, release)
    env.update(ensure_images(env, build=build_images, log=log, services=(*NEEDED, *(["toxiproxy"] if proxies else [])),
                             release=release, recorded={v for v in IMAGE_ENV if env.get(v) and not os.environ.get(v)}))
    if variant == "cluster" and not proxies and proxy_container():
        # the Toxiproxy of an earlier start with --proxies: only that service's container, of this project
        subprocess.run(["docker", "compose", "-p", PROJECT, *_files(variant, True, auth), "rm", "-s", "-f", "toxiproxy"],
                       env=env, capture_output=True, text=True, timeout=120)
    cmd = ["docker", "compose", "-p", PROJECT, *_files(variant, proxies, auth), "up", "-d", "--wait"]
    log("Starting the compose stack: " + " ".join(cmd[2:]))
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=UP_TIMEOUT_S)
    from ..core.safefile import PRIVATE, write_text
    if proc.returncode == 0 or not existing:
        write_text(state / RELEASE_FILE, release + "\n", PRIVATE)     # new volumes, or these: that release's data now
        compose_auth.record(state, auth)                              # and that auth's users
    if proc.returncode != 0:
        raise HarnessError("docker compose up failed", (proc.stdout + proc.stderr)[-2000:])
    images = {var: env[var] for var in IMAGE_ENV if env.get(var)}
    write_text(state / "stack.json", json.dumps({"kind": "compose", "variant": variant, "images": images,
                                                 "proxies": proxies, "auth": auth}) + "\n", PRIVATE)
    stack = _stack(state, variant, proxies)
    err = _postgres_probe(stack, 30)
    if err:
        raise HarnessError(f"the compose PostgreSQL does not accept connections: {err}")
    if proxies and (err := health.kafka_probe(stack.bootstrap_servers, 60, brokers=stack.brokers)):
        raise HarnessError(f"the compose cluster does not answer through its proxies: {err}")
    stack.healthy = True
    stack.postgres_version = health.postgres_version(stack.postgres_dsn)
    return stack


POSTGRES_VOLUME = f"{PROJECT}_postgres-data"


def _postgres_probe(stack: Stack, timeout: float) -> str | None:
    """The probe, with what a refused password means here: the container's data volume was initialised
    with another password (POSTGRES_PASSWORD counts only on an empty volume), by another state folder or
    by hand, and keeps it."""
    try:
        return health.postgres_probe(stack.postgres_dsn, timeout)
    except health.PostgresRefused as e:
        if "refused the password" not in str(e):
            raise
        raise health.PostgresRefused(
            f"{e}: the Docker volume {POSTGRES_VOLUME} was initialised with another password (its first "
            f"start's; this state folder's is in {state_dir() / 'compose.password'}); if its data is not needed, "
            f"remove it (docker compose -p {PROJECT} down -v, or docker volume rm {POSTGRES_VOLUME}), "
            f"else set HARNESS_PG_PASSWORD to its password") from None


def status() -> Stack:
    state = state_dir()
    variant = _recorded_variant(state)
    stack = _stack(state, variant, recorded_proxies(state) and variant == "cluster")
    stack.healthy = health.kafka_probe(stack.bootstrap_servers, 5, brokers=stack.brokers) is None and \
        _postgres_probe(stack, 5) is None
    stack.postgres_version = health.postgres_version(stack.postgres_dsn) if stack.healthy else None
    return stack


def down(purge: bool = False, variant: str | None = None, log=print) -> bool:
    """Stop the compose stack; False when no Docker engine answers (then nothing was stopped)."""
    if engine_available():
        return False
    variant = variant or _recorded_variant(state_dir())
    log("Stopping the compose stack ...")
    proc = subprocess.run(_down_command(variant, purge), env=_env(state_dir()), capture_output=True, text=True,
                          timeout=300)
    if proc.returncode != 0:        # the record stays: the stack may still run
        raise HarnessError("docker compose down failed", (proc.stdout + proc.stderr)[-2000:])
    if purge:
        # The other variant's volumes too (a single-node stack's kafka-data after a cluster, say): both
        # files belong to this project, and `down -v` removes only the volumes its own file declares.
        for other in FILES:
            if other != variant:
                subprocess.run(_down_command(other, True), env=_env(state_dir()), capture_output=True,
                               text=True, timeout=300)
    (state_dir() / "stack.json").unlink(missing_ok=True)
    if purge:
        (state_dir() / "compose.password").unlink(missing_ok=True)     # its volume is gone: so is its password
        from .shellenv import PGPASS_NAME
        (state_dir() / PGPASS_NAME).unlink(missing_ok=True)            # and `harness env`'s copy of it
        (state_dir() / RELEASE_FILE).unlink(missing_ok=True)           # and the release that wrote its data
        for f in compose_auth.purged_files(state_dir()):               # and its Kafka users' auth and passwords
            f.unlink(missing_ok=True)
    return True


def left_volumes() -> bool:
    """Whether this state folder started a compose stack that `down` stopped without --purge: no record
    of a running stack, and the password file of its PostgreSQL volume is still there."""
    state = state_dir()
    return _recorded(state).get("kind") is None and (state / "compose.password").is_file()


def _down_command(variant: str, purge: bool) -> list[str]:
    """The cluster's with its proxies' file when it has or may have them: their container goes too. Never the
    SCRAM override: `down` removes the containers of the services the files name, and needs no password."""
    proxies = variant == "cluster" and (recorded_proxies() or proxy_container())
    return ["docker", "compose", "-p", PROJECT, *_files(variant, proxies), "down"] + (["-v"] if purge else [])


# -- a rolling upgrade (harness/faults/upgrade.py): one broker container at a time on another release's image ----
RECREATE_TIMEOUT_S = 180


def upgrade_image(frm: str, to: str) -> str:
    """The image of release `to` of the same kind as the one the cluster runs `frm` on: the official
    apache/kafka, or the local build (harness-kafka, scripts/build-images.sh). One line when the cluster
    runs an image of no known release (one the user named)."""
    recorded = _recorded(state_dir()).get("images")
    image = recorded.get("HARNESS_KAFKA_IMAGE") if isinstance(recorded, dict) else None
    if not image:
        return f"apache/kafka:{to}"
    name, _, tag = str(image).rpartition(":")
    if tag != frm or not name:
        raise HarnessError(f"the compose cluster runs the image {str(image)[:100]}, not one tagged with Kafka {frm}: "
                           f"the rolling upgrade cannot tell which image holds Kafka {to}")
    return f"{name}:{to}"


def recreate(service: str, image: str, release: str) -> str:
    """Recreate one broker service's container on `image` (Kafka `release`), with the same named volume,
    settings and network as `up` gave it (`up -d --no-deps --force-recreate SERVICE`: no other container is
    touched); its container, stopped first by the caller. From then on this state folder's volumes hold
    `release`'s data and stack.json names that image, so a later `up` starts every node on it."""
    from ..core.safefile import PRIVATE, write_text
    state = state_dir()
    rec = _recorded(state)
    variant = rec.get("variant") if rec.get("variant") in FILES else "single"
    auth = recorded_auth(state)
    proxies = recorded_proxies(state)
    env = {**_env(state, release, auth), "HARNESS_KAFKA_IMAGE": image}
    cmd = ["docker", "compose", "-p", PROJECT, *_files(variant, proxies, auth), "up", "-d", "--no-deps",
           "--force-recreate", service]
    try:
        proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=RECREATE_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        raise HarnessError(f"docker compose did not recreate {service} within {RECREATE_TIMEOUT_S} s") from None
    if proc.returncode != 0:
        raise HarnessError(f"docker compose could not recreate {service} on {image}", (proc.stdout + proc.stderr)[-2000:])
    write_text(state / RELEASE_FILE, release + "\n", PRIVATE)
    images = rec.get("images") if isinstance(rec.get("images"), dict) else {}
    write_text(state / "stack.json", json.dumps({**rec, "images": {**images, "HARNESS_KAFKA_IMAGE": image}}) + "\n",
               PRIVATE)
    return f"container of {service} recreated on {image}"
