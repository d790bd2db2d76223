"""Build and launch the Kafka Streams worker of `eos-streams` (experiments/eos-streams).

The jar is built with `mvn package` the first time (online, to fill ~/.m2) and
rebuilt offline (`mvn -o`) only when a source file is newer than the jar, so
later runs start at once. The worker gets the Postgres password through
HARNESS_PG_PASSWORD, never on its command line.
"""

import re
import shutil
import subprocess
from pathlib import Path

import psycopg.conninfo

from ..errors import HarnessError
from ..stack import pgpass

MODULE = Path(__file__).resolve().parents[2] / "experiments" / "eos-streams"
JAR = MODULE / "target" / "eos-streams.jar"
# The first build downloads Kafka Streams and its dependencies (~120 MB); later builds are offline.
BUILD_TIMEOUT_S = 900
FIRST_RECORD = re.compile(r"eos-streams FIRST-RECORD worker=(\S+) attempt=(\d+) .*time=([0-9.]+)")


def _stale() -> bool:
    if not JAR.exists():
        return True
    built = JAR.stat().st_mtime
    sources = [MODULE / "pom.xml", *MODULE.glob("src/**/*")]
    return any(p.is_file() and p.stat().st_mtime > built for p in sources)


def build(log=print) -> Path:
    if not MODULE.exists():
        raise HarnessError(f"the Kafka Streams module is missing: {MODULE}")
    if not _stale():
        return JAR
    if shutil.which("mvn") is None:
        raise HarnessError("mvn not found on PATH: eos-streams builds its Kafka Streams module with Maven")
    log("Building the Kafka Streams worker (experiments/eos-streams) with mvn ...")
    for offline in (True, False):
        cmd = ["mvn", "-B", "-q", *(["-o"] if offline else []), "-f", str(MODULE / "pom.xml"), "package",
               "-DskipTests"]
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=BUILD_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            raise HarnessError(f"building the Kafka Streams module took longer than {BUILD_TIMEOUT_S} s")
        if proc.returncode == 0 and JAR.exists():
            return JAR
    raise HarnessError("building the Kafka Streams module failed", (proc.stdout + proc.stderr)[-3000:])


def jdbc(dsn: str) -> tuple[str, str, str]:
    """(jdbc url, user, password) from a libpq DSN or URL; without a password in it, from the
    libpq password file (PGPASSFILE, as `harness env` sets it), which the JDBC driver does not read."""
    d = psycopg.conninfo.conninfo_to_dict(dsn)
    host, port, db, user = d.get("host", "127.0.0.1"), d.get("port", 5432), d.get("dbname", "postgres"), d.get("user", "")
    password = d.get("password") or pgpass.lookup(host, port, db, user) or ""
    return f"jdbc:postgresql://{host}:{port}/{db}", user, password


def command(jar: Path, slot, *, bootstrap: str, input_topic: str, output_topic: str, application_id: str,
            state_dir: Path, crash_plan: Path, crash_log: Path, commit_interval_ms: int | None,
            ledger_table: str | None, dsn: str) -> list[str]:
    cmd = ["java", "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC", "-Xmx512m", "-Dharness.worker=true",
           "-jar", str(jar), "--bootstrap", bootstrap, "--input", input_topic, "--output", output_topic,
           "--application-id", application_id, "--state-dir", str(state_dir / slot.name),
           "--crash-plan", str(crash_plan), "--crash-log", str(crash_log),
           "--worker", slot.name, "--attempt", str(slot.attempt)]
    if commit_interval_ms:
        cmd += ["--commit-interval-ms", str(commit_interval_ms)]
    if ledger_table:
        url, user, _pw = jdbc(dsn)
        cmd += ["--ledger-table", ledger_table, "--jdbc-url", url, "--jdbc-user", user]
    return cmd


def first_record_events(log_dir: Path) -> list[dict]:
    """The worker logs' FIRST-RECORD lines, as the `first_message` events Python workers emit."""
    out = []
    for f in sorted(log_dir.glob("*.log")):
        for m in FIRST_RECORD.finditer(f.read_text(errors="replace")):
            out.append({"event": "first_message", "worker": m[1], "attempt": int(m[2]), "t": float(m[3])})
    return sorted(out, key=lambda e: e["t"])
