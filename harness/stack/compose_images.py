"""The compose stack's images and the Kafka release its volumes hold.

Which image each service runs: the official one (apache/kafka of the chosen
release, postgres, Toxiproxy's) unless the user names another in
HARNESS_*_IMAGE, or one built here by scripts/build-images.sh when an
official image can be neither found on the engine nor pulled (only those, and
never one the user named). Which release the compose volumes were written by
(`compose.kafka_version` beside the state folder's password, gone with the
volumes at `down --purge`), so another release on the same data is refused in
one line; whether such volumes exist is asked of the engine, never assumed.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from ..core import package_data, versions
from ..core.errors import HarnessError, first_line

COMPOSE_DIR = package_data.path("compose")      # the repository's compose/
PROJECT = "harness"


# The Kafka release that formatted this state folder's compose volumes: kept beside them (`down` keeps
# both, `down --purge` removes both), so another release on the same data is refused in one line.
RELEASE_FILE = "compose.kafka_version"


# The Kafka data volumes of each compose file (compose/docker-compose*.yml), as the engine names them.
KAFKA_VOLUMES = {"single": {f"{PROJECT}_kafka-data"},
                 "cluster": {f"{PROJECT}_kafka-{n}-data" for n in (1, 2, 3)}}


def kafka_volumes(variant: str) -> bool | None:
    """Whether this variant's Kafka data volumes exist on the engine (whoever made them); None: unknown."""
    try:
        import docker
        found = docker.from_env(timeout=10).volumes.list(filters={"label": f"com.docker.compose.project={PROJECT}"})
    except Exception:  # noqa: BLE001 - unknown
        return None
    return any(v.name in KAFKA_VOLUMES[variant] for v in found)


def release_for_up(state: Path, variant: str) -> tuple[str, bool]:
    """(the release to start, whether its volumes exist already): as asked, else as recorded, else the
    pinned one; another release than the one that wrote existing volumes is refused in one line (volumes
    without a record were written by a harness that ran only the pinned release). When the engine cannot
    say whether they exist, a release other than the recorded one is refused too: never a guess."""
    from . import kafka_versions
    have = kafka_volumes(variant)
    existing = bool(have) if have is not None else True
    return kafka_versions.chosen(recorded_release(state) if existing else None, existing,
                                 f"the compose volumes of project {PROJECT}"), existing


def reported_release(state: Path, recorded_images: dict) -> str:
    """What a report may say the compose Kafka runs: the recorded release when its image is that release's
    (the official or the local build, tagged with it), else unknown: an image the user named may be anything."""
    release = recorded_release(state) or versions.KAFKA_VERSION
    image = recorded_images.get("HARNESS_KAFKA_IMAGE") if isinstance(recorded_images, dict) else None
    if image and not str(image).endswith(f":{release}"):
        return f"unknown (image {str(image)[:100]})"
    return release


def recorded_release(state: Path) -> str | None:
    from ..core.safefile import read_tail
    from .kafka_versions import RELEASE
    got = read_tail(state / RELEASE_FILE, 64).strip()       # never blocks on a FIFO, never follows a link
    return got if RELEASE.fullmatch(got) else None


def kafka_image(env: dict, release: str) -> None:
    """The Kafka image for `release`: the official one of that release unless the user names one; a
    named image whose tag is another release is refused in one line."""
    from .kafka_versions import RELEASE
    named = os.environ.get("HARNESS_KAFKA_IMAGE")
    tag = named.rpartition(":")[2] if named else ""
    if named and RELEASE.fullmatch(tag) and tag != release:
        raise HarnessError(f"HARNESS_KAFKA_IMAGE names {named}, an image of Kafka {tag}, but this stack runs Kafka "
                           f"{release}: unset it (the harness then uses apache/kafka:{release}, or builds it) or "
                           f"name a Kafka {release} image")
    if not named and release != versions.KAFKA_VERSION and \
            not str(env.get("HARNESS_KAFKA_IMAGE", "")).endswith(f":{release}"):
        env.pop("HARNESS_KAFKA_IMAGE", None)        # a recorded image of another release


# The compose files read their images from these variables; unset, they are the official images.
IMAGE_VARS = {"kafka": ("HARNESS_KAFKA_IMAGE", f"apache/kafka:{versions.KAFKA_VERSION}"),
              "postgres": ("HARNESS_POSTGRES_IMAGE", "postgres:15"),
              "toxiproxy": ("HARNESS_TOXIPROXY_IMAGE", versions.TOXIPROXY_IMAGE)}
NEEDED = ("kafka", "postgres")      # the images every compose stack needs (Toxiproxy's: only with --proxies)
IMAGE_ENV = {var for var, _ in IMAGE_VARS.values()}
BUILD_SCRIPT = package_data.path("scripts", "build-images.sh")
BUILD_TIMEOUT_S = 1800


def chosen_images(env: dict, services=NEEDED, release: str = versions.KAFKA_VERSION) -> dict:
    """{service: image} the compose files will use with this environment, for this Kafka release."""
    defaults = {**{svc: default for svc, (_, default) in IMAGE_VARS.items()}, "kafka": f"apache/kafka:{release}"}
    return {svc: env.get(var) or defaults[svc] for svc, (var, _) in IMAGE_VARS.items() if svc in services}


def _missing_image(client, image: str) -> str | None:
    """None when the engine has `image` or can pull it; else why not (one line)."""
    try:
        client.images.get(image)
        return None
    except Exception:  # noqa: BLE001 - not here: try to pull it
        pass
    try:
        client.images.pull(image)
        return None
    except Exception as e:  # noqa: BLE001
        return first_line(e)


def ensure_images(env: dict, build: bool = False, log=print, client=None, services=NEEDED,
                  release: str = versions.KAFKA_VERSION, recorded=frozenset()) -> dict:
    """The images for `docker compose up`, as environment variables to add.

    The official images unless the user named others; built locally (the project's scripts/build-images.sh:
    Debian's packages, Kafka's jars, Toxiproxy with go install) when asked (`build`), or when an official
    image is neither on the engine nor pullable (no registry here), saying so: only those images, never one
    the user named. An image the user named that cannot be had is one line: it is never silently replaced.
    `recorded`: the variables that came from stack.json, not from the user (`--build-images` rebuilds them)."""
    if client is None:
        import docker
        client = docker.from_env(timeout=120)
    images = chosen_images(env, services, release)
    if not build:
        missing = {img: why for img in images.values() if (why := _missing_image(client, img))}
        named = [(var, images[svc]) for svc, (var, _) in IMAGE_VARS.items()
                 if svc in images and env.get(var) and var not in recorded and images[svc] in missing]
        if named:
            var, img = named[0]
            raise HarnessError(f"the image {img} (set in {var}) is not on the Docker engine and cannot be pulled: "
                               f"{missing[img]}")
        if not missing:
            log("images: " + ", ".join(f"{svc} {img}" for svc, img in images.items()))
            # the compose files' own default is the pinned release's image: another release is named
            return {} if release == versions.KAFKA_VERSION or env.get("HARNESS_KAFKA_IMAGE") else \
                {"HARNESS_KAFKA_IMAGE": images["kafka"]}
        first, why = next(iter(missing.items()))
        todo = [svc for svc in images if images[svc] in missing]
        log(f"cannot pull {first} ({why}); building {', '.join(todo)} here instead ({BUILD_SCRIPT.name}, a few "
            f"minutes the first time)")
    else:
        todo = [svc for svc in images if not env.get(IMAGE_VARS[svc][0]) or IMAGE_VARS[svc][0] in recorded]
        log(f"building local images ({BUILD_SCRIPT.name}) ...")
    built = build_images(env, only=todo) if todo else {}
    log("images: " + ", ".join(f"{svc} {built.get(IMAGE_VARS[svc][0], images[svc])}" for svc in images) +
        (f" ({', '.join(todo)} built here)" if todo else ""))
    return {IMAGE_VARS[svc][0]: built[IMAGE_VARS[svc][0]] for svc in todo}


def build_images(env: dict, only=NEEDED) -> dict:
    """Run the project's image build for these services; the variables it prints for the compose files."""
    import shlex
    if not BUILD_SCRIPT.is_file():
        raise HarnessError(f"cannot build the compose images: {BUILD_SCRIPT} is missing (a source checkout has it)")
    try:
        proc = subprocess.run(["bash", str(BUILD_SCRIPT), "--only", ",".join(only)],
                              env={**env, "HARNESS_PYTHON": sys.executable}, capture_output=True,
                              text=True, timeout=BUILD_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        raise HarnessError(f"building the compose images took longer than {BUILD_TIMEOUT_S} s") from None
    if proc.returncode != 0:
        raise HarnessError("building the compose images failed", (proc.stdout + proc.stderr)[-2000:])
    found = {}
    for line in proc.stdout.splitlines():
        if line.startswith("export "):
            found.update(w.split("=", 1) for w in shlex.split(line)[1:] if "=" in w)
    absent = [svc for svc in only if IMAGE_VARS[svc][0] not in found]
    if absent:
        lines = proc.stderr.strip().splitlines()
        said = next((line for line in reversed(lines) if absent[0] in line.lower() and "done in" not in line),
                    "it said nothing about it")
        raise HarnessError(f"{BUILD_SCRIPT.name} built no {absent[0]} image ({said.removeprefix('build-images: ')})")
    return {k: v for k, v in found.items() if k in IMAGE_ENV}
