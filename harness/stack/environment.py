"""Facts about where a run happened, recorded in every report.

Comparisons warn when two reports come from different Kafka, librdkafka or
Postgres versions, so these are recorded exactly: the Kafka release the
harness started (or, for an existing cluster, what it says) and the
cluster's finalized metadata.version, as the broker itself answers. Command lines are masked
(see secret_args): a DSN given on the command line loses its password, a
secret Kafka client setting its value.
"""

import os
import platform
import subprocess
import sys
from pathlib import Path

from .. import __version__
from ..clients.secret_args import command_line
from .stack import Stack


def git_sha(here: Path | None = None) -> str | None:
    """The commit of the checkout the harness runs from; None for an installed package (its folder,
    site-packages, is no checkout: a virtual environment inside the user's repository must not lend
    the harness that repository's commit)."""
    here = here or Path(__file__).resolve().parents[2]
    if not (here / ".git").exists():        # a folder in a clone, or a file in a worktree
        return None
    try:
        out = subprocess.run(["git", "-C", str(here), "rev-parse", "--short", "HEAD"],
                             capture_output=True, text=True, timeout=5)
        return out.stdout.strip() or None
    except (OSError, subprocess.TimeoutExpired):
        return None


def _first(v) -> str:
    """confluent-kafka returns (string, int) tuples from some versions and a plain string from others."""
    return v[0] if isinstance(v, tuple) else str(v)


def describe(stack: Stack) -> dict:
    import confluent_kafka
    from . import broker_version
    found = broker_version.features(stack.bootstrap_servers) if stack.bootstrap_servers else None
    return {
        "kafka_version": stack.kafka_version or "unknown",
        # what the broker itself says (its finalized features), beside the release the harness started
        "kafka_metadata_version": broker_version.metadata_version(found) or "unknown",
        "kafka_transaction_version": broker_version.transaction_version(found),
        "librdkafka_version": _first(confluent_kafka.libversion()),
        "confluent_kafka_version": _first(confluent_kafka.version()),
        "postgres_version": stack.postgres_version or "unknown",
        "harness_version": __version__,
        "git_sha": git_sha(),
        "python_version": platform.python_version(),
        "platform": f"{platform.system()} {platform.machine()}",
        "cpus": os.cpu_count(),
        "command_line": command_line(sys.argv[1:]),
    }
