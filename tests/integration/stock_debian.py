"""The README's first command on a stock Debian 12, in a container: the base image is Debian bookworm as
`debootstrap --variant=minbase` makes it (`scripts/build-images.sh --only base`), the README's apt line is
the only thing added, and the checkout goes in as an archive of the files git sees (tracked and untracked, not
ignored: no .venv, no reports, no state). Used by test_compose_engine.py (its engine).

What the container gets beyond that, and why:
- host networking: apt, pip and mvn reach their registries (the private engine makes no bridge), and the
  harness's Kafka and PostgreSQL bind 127.0.0.1 (on free ports: the harness picks others when taken, and
  counts only a node with its own cluster id). Its state folder is the default `.harness` of the copy, in the
  container's own file system, so it shares nothing with a stack the host runs at the same time;
- the download caches of apt, pip and Maven, bind-mounted from a folder of this test's own in the
  harness's cache folder (`stock-debian/`): a later run downloads nothing again, whatever engine it has
  (CI's private engine is new each run, so nothing kept inside an engine survives);
- the host's own extra CA certificates (/usr/local/share/ca-certificates), read-only, when it has some: a
  machine whose traffic passes a TLS-inspecting proxy trusts it, and the container must too;
- dpkg's `force-unsafe-io` (no fsync while unpacking: the container is thrown away), for speed.
The checkout is /srv/harness: as root, the harness runs PostgreSQL as the `postgres` user, who cannot enter
/root (mode 0700; the harness says so in one line, and the getting-started page tells root to keep the
checkout elsewhere). It runs as the container's root with only the capabilities apt, dpkg, runuser and the harness use, and
no new privileges; the container is removed whatever happens.
"""

import os
import re
import secrets
import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

from harness.core.paths import cache_dir
from tests.conftest import ROOT

BASE_IMAGE = "harness-base:bookworm"
FIRST_COMMAND = "./scripts/setup.sh && .venv/bin/harness run offset-before"
APT_LINE = re.compile(r"^sudo apt-get update && sudo apt-get install -y --no-install-recommends [a-z0-9.+ -]+$")
CAPABILITIES = ("CHOWN", "DAC_OVERRIDE", "FOWNER", "FSETID", "KILL", "SETUID", "SETGID")
RUN_TIMEOUT_S = 1800
RM_TIMEOUT_S = 900
CA_FOLDER = Path("/usr/local/share/ca-certificates")


def readme_lines() -> tuple[str, str]:
    """(the apt line, the first command) of the README's first bash block, as written there."""
    text = (ROOT / "README.md").read_text()
    block = re.search(r"```bash\n(.*?)```", text, re.S)
    assert block, "the README has no bash block"
    lines = block.group(1).splitlines()
    apt = [line for line in lines if line.startswith("sudo apt-get")]
    assert len(apt) == 1 and APT_LINE.match(apt[0]), f"the README's first bash block has no apt line: {lines}"
    first = [line for line in lines if line.startswith("./scripts/setup.sh")]
    assert first and first[0].split("#")[0].strip() == FIRST_COMMAND, lines
    return apt[0], first[0]


def checkout_archive(dest: Path) -> Path:
    """A tar of the checkout's files as git sees them (tracked and untracked, not ignored; links kept as
    links), under srv/harness/: what a fresh clone holds plus the changes not committed yet. Nothing is
    written into the repository."""
    listed = subprocess.run(["git", "-C", str(ROOT), "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                            capture_output=True, check=True).stdout.decode().split("\0")
    tar = dest / "checkout.tar"
    with tarfile.open(tar, "w") as t:
        for rel in sorted(set(filter(None, listed))):
            if os.path.lexists(ROOT / rel):                 # not a tracked file deleted in the working tree
                t.add(ROOT / rel, arcname=f"srv/harness/{rel}", recursive=False)
    return tar


def script(apt_line: str, first_command: str) -> str:
    """What the container runs: the README's two lines, each timed on a line of its own. The apt line runs as
    root without `sudo` (a minbase system has none); the first command is the README's line byte for byte,
    its comment too, its exit status taken right after it."""
    return "\n".join([
        "set -eu",
        "echo force-unsafe-io > /etc/dpkg/dpkg.cfg.d/unsafe-io",
        "t=$(date +%s)",
        apt_line.replace("sudo ", ""),
        'echo "stock-debian: the apt line took $(( $(date +%s) - t )) s"',
        "cd /srv/harness",
        "t=$(date +%s)",
        "set +e",
        first_command,
        "status=$?",
        "set -e",
        'echo "stock-debian: the first command took $(( $(date +%s) - t )) s and exited $status"',
        "apt-get -qq autoclean || true",      # the cache keeps no package Debian no longer has
        "exit $status",
    ])


def run(env: dict, out: Path) -> tuple[subprocess.CompletedProcess, str]:
    """Run the README's lines in a new container of BASE_IMAGE: (what it printed and its exit status, the
    container's name; it is removed by then). Its reports folder is copied to `out`."""
    docker = ["docker"]
    apt_line, first_command = readme_lines()
    caches = cache_dir() / "stock-debian"
    mounts = []
    for name, inside in (("apt", "/var/cache/apt/archives"), ("pip", "/root/.cache/pip"), ("m2", "/root/.m2")):
        (caches / name).mkdir(parents=True, exist_ok=True)
        mounts += ["--mount", f"type=bind,source={caches / name},target={inside}"]
    trust = []
    if any(CA_FOLDER.glob("*.crt")):
        trust = ["--mount", f"type=bind,source={CA_FOLDER},target={CA_FOLDER},readonly",
                 "-e", "PIP_CERT=/etc/ssl/certs/ca-certificates.crt"]
    name = f"harness-stock-debian-{secrets.token_hex(4)}"
    caps = [arg for cap in CAPABILITIES for arg in ("--cap-add", cap)]
    with tempfile.TemporaryDirectory(prefix="harness-stock-debian-") as tmp:
        tar = checkout_archive(Path(tmp))
        try:
            subprocess.run([*docker, "create", "--name", name, "--network", "host", "--cap-drop", "ALL", *caps,
                            "--security-opt", "no-new-privileges", "-e", "DEBIAN_FRONTEND=noninteractive",
                            *mounts, *trust, BASE_IMAGE, "bash", "-c", script(apt_line, first_command)],
                           env=env, check=True, capture_output=True, text=True, timeout=120)
            with open(tar, "rb") as f:
                subprocess.run([*docker, "cp", "-", f"{name}:/"], stdin=f, env=env, check=True,
                               capture_output=True, timeout=300)
            proc = subprocess.run([*docker, "start", "--attach", name], env=env, capture_output=True, text=True,
                                  timeout=RUN_TIMEOUT_S)
            subprocess.run([*docker, "cp", f"{name}:/srv/harness/reports", str(out)], env=env,
                           capture_output=True, timeout=300)
            return proc, name
        finally:
            # Its layer holds a JDK, Maven, Chromium, PostgreSQL and a venv: removing it took over a minute on
            # 2 busy cores
            subprocess.run([*docker, "rm", "--force", name], env=env, capture_output=True, timeout=RM_TIMEOUT_S)


def build_base(env: dict) -> None:
    proc = subprocess.run(["bash", str(ROOT / "scripts" / "build-images.sh"), "--only", "base"],
                          env={**env, "HARNESS_PYTHON": sys.executable}, capture_output=True, text=True,
                          timeout=1800)
    assert proc.returncode == 0 and f"HARNESS_BASE_IMAGE={BASE_IMAGE}" in proc.stdout, proc.stderr[-2000:]
