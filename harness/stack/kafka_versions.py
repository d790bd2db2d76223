"""Which Kafka release a stack the harness starts runs: `--kafka-version`, checked, asked for, remembered.

The default is `versions.KAFKA_VERSION`, the release the whole suite and the
tests run on. A user who runs another release in production asks for it with
`--kafka-version V` on `up`, `run`, `suite` or `bench`: the local stack then
resolves that release's jars with mvn (cached per release, stack/maven.py),
the compose stack uses that release's image. The state folder remembers the
release its Kafka was formatted with (stack.json `kafka_version`); another
one on the same data is refused in one line (a newer release would leave the
cluster at the old metadata.version, an older one cannot read it at all).

From 3.9 on: combined KRaft nodes with a static quorum, `StorageTool format
--ignore-formatted` and SCRAM users at format time, as stack/local_kafka.py
starts them, and the Docker image's entry point that compose/images/kafka
uses, all exist there. Older releases are refused rather than half-working.

The option reaches the stack like the Kafka client settings do
(commands/stack_options.py): asked for once per command, read where a stack
is started.
"""

from __future__ import annotations

import re

from ..core import versions
from ..core.errors import HarnessError

RELEASE = re.compile(r"(\d{1,2})\.(\d{1,2})\.(\d{1,3})")     # whole strings only: fullmatch
OLDEST = (3, 9)

_requested: str | None = None


def check(release: str) -> str:
    """`release` when it names a Kafka release the harness can start, else one line saying why not."""
    m = RELEASE.fullmatch(release or "")
    if not m:
        raise HarnessError(f"--kafka-version takes a Kafka release such as {versions.KAFKA_VERSION} "
                           f"(major.minor.patch), not {str(release)[:40]!r}")
    if (int(m[1]), int(m[2])) < OLDEST:
        raise HarnessError(f"--kafka-version {release}: the harness starts Kafka {OLDEST[0]}.{OLDEST[1]}.0 or newer "
                           f"(KRaft nodes as it runs them)")
    return release


def request(release: str | None) -> None:
    """What this command asked for (None: whatever the state folder's stack has, else the default)."""
    global _requested
    _requested = check(release) if release else None


def requested() -> str | None:
    return _requested


def chosen(recorded: str | None, formatted: bool, where: str) -> str:
    """The release to start: the one asked for, else the recorded one, else the default. Asking for
    another release than the one that `formatted` the data under `where` is refused in one line."""
    have = recorded if isinstance(recorded, str) and RELEASE.fullmatch(recorded) else None
    want = _requested or have or versions.KAFKA_VERSION
    if formatted and want != (have or versions.KAFKA_VERSION):
        raise HarnessError(f"the Kafka data under {where} was written by Kafka {have or versions.KAFKA_VERSION}; to "
                           f"run Kafka {want}, run `harness down --purge` first (it deletes that data)")
    return want
