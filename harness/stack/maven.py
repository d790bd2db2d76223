"""Resolve the Kafka broker's class path from Maven Central with `mvn`, once per release.

The jars land in the cache (`<cache>/kafka-<version>/lib`), a marker file says
the resolution finished, and later calls return at once. Kafka's command-line
tools (kafka-tools: `TransactionsCommand`, what `kafka-transactions.sh` runs)
get a class path of their own (`<cache>/kafka-tools-<version>/lib`), so that
adding them never rewrites the jars a running broker loads from. We check that a log4j2
backend is on the class path: without an SLF4J binding Kafka starts silently
and a failing broker leaves no log to read.
"""

import shutil
import subprocess
from importlib import resources
from pathlib import Path

from ..core import safefile, versions
from ..core.errors import HarnessError
from ..core.paths import cache_dir

REQUIRED_JARS = ("kafka_", "kafka-clients-", "log4j-core-", "log4j-slf4j2-impl-", "slf4j-api-2")
# First resolution downloads ~60 MB of jars; allow a slow mirror but never hang forever.
MVN_TIMEOUT_S = 900


def kafka_home(version: str = versions.KAFKA_VERSION) -> Path:
    return cache_dir() / f"kafka-{version}"


def pom_text(version: str = versions.KAFKA_VERSION) -> str:
    text = resources.files("harness.stack").joinpath("kafka-pom.xml").read_text()
    for key in ("SCALA_VERSION", "LOG4J_VERSION", "SLF4J_VERSION"):
        text = text.replace(f"@{key}@", getattr(versions, key))
    return text.replace("@KAFKA_VERSION@", version)


def check_classpath(lib: Path, extra: tuple = ()) -> None:
    names = [p.name for p in lib.glob("*.jar")]
    missing = [want for want in REQUIRED_JARS + tuple(extra) if not any(n.startswith(want) for n in names)]
    if missing:
        raise HarnessError(f"Kafka class path in {lib} lacks {', '.join(missing)}*.jar; "
                           f"delete {lib.parent} and run `harness up` again")
    bindings = [n for n in names if n.startswith(("slf4j-reload4j", "slf4j-log4j12", "logback-classic"))]
    if bindings:
        raise HarnessError(f"Kafka class path has a second SLF4J binding besides log4j2: {', '.join(bindings)}")


def tools_home(version: str = versions.KAFKA_VERSION) -> Path:
    return cache_dir() / f"kafka-tools-{version}"


TOOLS_DEPENDENCY = ("    <dependency>\n      <groupId>org.apache.kafka</groupId>\n"
                    "      <artifactId>kafka-tools</artifactId>\n"
                    "      <version>@KAFKA_VERSION@</version>\n    </dependency>\n  </dependencies>")


def resolved_tools() -> Path | None:
    """The tools' class path when it has been resolved here: ours (`harness up` resolves it for a local
    stack), else the compose image's (scripts/build-images.sh resolves the broker and the tools together
    there); None when neither is."""
    for home in (tools_home(), cache_dir() / f"kafka-image-{versions.KAFKA_VERSION}"):
        lib = home / "lib"
        if (home / "resolved.ok").exists() and any(p.name.startswith("kafka-tools-") for p in lib.glob("*.jar")):
            return lib
    return None


def resolve_tools(log=print) -> Path:
    """Return the folder of jars for Kafka's command-line tools, resolving it on first use. They are the
    pinned release's whatever release the broker runs (--kafka-version): the admin requests they make
    (DescribeProducers, DescribeTransactions) are answered alike by every release from 3.0 on."""
    tools = TOOLS_DEPENDENCY.replace("@KAFKA_VERSION@", versions.KAFKA_VERSION)
    return _resolve(tools_home(), pom_text().replace("  </dependencies>", tools, 1), "Kafka's command-line tools", log,
                    extra=("kafka-tools-",))


def resolve_kafka(log=print, version: str = versions.KAFKA_VERSION) -> Path:
    """Return the folder of jars for this Kafka release (the pinned one by default), resolving it on first
    use. Each release has a folder of its own."""
    return _resolve(kafka_home(version), pom_text(version), f"Kafka {version} and its runtime dependencies", log,
                    version=version)


def _resolve(home: Path, pom: str, what: str, log, extra: tuple = (), version: str = versions.KAFKA_VERSION) -> Path:
    lib = home / "lib"
    marker = home / "resolved.ok"
    if marker.exists():
        check_classpath(lib, extra)
        return lib
    if shutil.which("java") is None:
        raise HarnessError("java not found on PATH: Kafka needs Java 17 or newer (Debian: apt-get install openjdk-17-jre-headless)")
    if shutil.which("mvn") is None:
        raise HarnessError("mvn not found on PATH: the harness resolves Kafka's jars with Maven (Debian: apt-get install maven)")
    home.mkdir(parents=True, exist_ok=True)
    safefile.write_text(home / "pom.xml", pom)
    log(f"Resolving {what} with mvn (first time only)...")
    if lib.exists():
        shutil.rmtree(lib)
    cmd = ["mvn", "-B", "-q", "-f", str(home / "pom.xml"), "dependency:copy-dependencies",
           f"-DoutputDirectory={lib}", "-DincludeScope=runtime"]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=MVN_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        raise HarnessError(f"mvn did not resolve Kafka within {MVN_TIMEOUT_S} s; is the Maven repository reachable?")
    if proc.returncode != 0:
        tail = "\n".join((proc.stdout + proc.stderr).strip().splitlines()[-15:])
        raise HarnessError(f"mvn failed to resolve org.apache.kafka:kafka_{versions.SCALA_VERSION}:{version} (is it a "
                           f"Kafka release Maven Central has?)", tail)
    check_classpath(lib, extra)
    safefile.write_text(marker, version + "\n")
    return lib
