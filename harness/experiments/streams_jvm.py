"""Build and launch the Kafka Streams worker of `eos-streams` (streams-worker).

The module's sources (pom.xml and src/) are the package's data files; they are
copied into the user's cache folder (`<cache>/streams-worker/<hash of the
sources>/`, never site-packages) and built there with `mvn package` the first
time (offline first, then online to fill ~/.m2), so later runs start at once and
an edited or upgraded source tree gets a folder of its own. Build folders of
other sources unused for BUILD_KEEP_S are removed. The worker gets the Postgres
password through HARNESS_PG_PASSWORD, never on its command line.

Every planned crash is a new JVM, so a JVM start is most of the experiment's
cost. Next to the jar lives a class-data archive (CDS, `eos-streams.jsa`): the
classes a worker loads, already parsed and verified, which each worker maps
instead of loading them from the jar (about half of a start's CPU time). It is
trained without a broker (the jar's `Training` class) when missing or older
than the jar, and checked with `-Xshare:on` (which refuses an archive of
another jar or JDK) and its checksums before a run uses it. Without a usable archive the workers
start without one: slower, never different. The check matters: a damaged
archive crashes a JVM at start even under the default `-Xshare:auto`.
"""

import hashlib
import json
import os
import re
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import psycopg.conninfo

from ..core import package_data
from ..core.errors import HarnessError
from ..core.paths import cache_dir
from ..core.procs import dying_with_this_process
from ..stack import pgpass

SOURCES = package_data.path("streams-worker")     # pom.xml and src/ (the repository's streams-worker/)
JAR_NAME = "eos-streams.jar"
# JVM options of every worker: short-lived processes (C1 only, the serial collector, no
# hsperfdata file: jps and jcmd do not list the workers). C1 compiling was the largest share of a
# Streams worker's CPU (about 0.23 of 0.66 CPU-s, async-profiler's samples of a whole clean run), so
# methods compile after 5 times as many calls and loops as by default: side by side on 2 cores
# (eos-streams --messages 300 --seed 25, one run each way in turn, 3 pairs) each crashed JVM used
# 0.55-0.56 CPU-s against 0.61-0.64 and restarted in 0.39-0.41 s against 0.40-0.42 s. The scaling
# with -XX:-Inline added used more than the scaling alone (0.57-0.59); no compiler at all (-Xint)
# 0.88 against 0.65. Measured with the Streams worker; the transactional worker shares the options.
JVM_OPTIONS = ["-XX:TieredStopAtLevel=1", "-XX:CompileThresholdScaling=5", "-XX:+UseSerialGC", "-Xmx512m",
               "-XX:-UsePerfData"]
TRAINING_MAIN = "harness.eosstreams.Training"
TRAINING_TIMEOUT_S = 120
PROBE_TIMEOUT_S = 30
WORK_PREFIX = "cds-work-"       # the probes' and trainings' working folders, beside the jar
STALE_WORK_S = 2 * (TRAINING_TIMEOUT_S + PROBE_TIMEOUT_S)
# The first build downloads Kafka Streams and its dependencies (~120 MB); later builds are offline.
BUILD_TIMEOUT_S = 900
# A build folder of other sources (an older install, an edit since) is removed once unused for this long.
BUILD_KEEP_S = 7 * 24 * 3600
FIRST_RECORD = re.compile(r"eos-streams FIRST-RECORD worker=(\S+) attempt=(\d+) .*time=([0-9.]+)")


def _source_files() -> list[Path]:
    files = [*SOURCES.glob("*pom.xml"), *(SOURCES / "src").glob("**/*")]
    return sorted(p for p in files if p.is_file())


def build_folder() -> Path:
    """Where these sources are built: `<cache>/streams-worker/<hash of their names and contents>`."""
    digest = hashlib.sha256()
    for p in _source_files():
        digest.update(str(p.relative_to(SOURCES)).encode() + b"\0" + p.read_bytes() + b"\0")
    return cache_dir() / "streams-worker" / digest.hexdigest()[:16]


def _stage(folder: Path) -> None:
    """The sources copied into `folder` (once: a copy is made beside it and renamed into place)."""
    if (folder / "pom.xml").is_file():
        return
    folder.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f"{folder.name}.part-", dir=folder.parent))
    try:
        for p in _source_files():
            dest = tmp / p.relative_to(SOURCES)
            dest.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(p, dest)
        os.replace(tmp, folder)
    except OSError:
        if not (folder / "pom.xml").is_file():      # not another run's copy that won the rename
            raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _prune(keep: Path) -> None:
    """Build folders of other sources, unused for BUILD_KEEP_S (each run touches its own)."""
    for entry in keep.parent.iterdir():
        try:
            if entry != keep and entry.is_dir() and not entry.is_symlink() and \
                    time.time() - entry.stat().st_mtime > BUILD_KEEP_S:
                shutil.rmtree(entry, ignore_errors=True)
        except OSError:
            continue


def build(log=print, pom: str = "pom.xml", jar_path: str = f"target/{JAR_NAME}") -> Path:
    """The jar `jar_path` that `pom` (a build file of the module) makes, built once per version of the sources."""
    if not (SOURCES / pom).is_file():
        raise HarnessError(f"the Kafka Streams module is missing from this installation: {SOURCES}")
    try:
        folder = build_folder()
        _stage(folder)
        os.utime(folder)
    except OSError as e:
        raise HarnessError(f"cannot copy the Kafka Streams module into the cache folder: {e}") from None
    jar = folder / jar_path
    _prune(folder)
    if jar.exists():
        return jar
    if shutil.which("mvn") is None:
        raise HarnessError("mvn not found on PATH: eos-streams builds its Kafka Streams module with Maven")
    log(f"Building {jar.name} (the Java workers' module) with mvn in {folder} ...")
    for offline in (True, False):
        cmd = ["mvn", "-B", "-q", *(["-o"] if offline else []), "-f", str(folder / pom), "package",
               "-DskipTests"]
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=BUILD_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            raise HarnessError(f"building the Kafka Streams module took longer than {BUILD_TIMEOUT_S} s")
        if proc.returncode == 0 and jar.exists():
            return jar
    raise HarnessError("building the Kafka Streams module failed", (proc.stdout + proc.stderr)[-3000:])


def archive_stale(archive: Path, jar: Path) -> bool:
    """A class-data archive must be retrained when it is missing or older than its jar."""
    try:
        return archive.stat().st_mtime < jar.stat().st_mtime
    except FileNotFoundError:
        return True


def _probe(archive: Path, jar: Path, kind: "CacheKind | None" = None) -> bool:
    """Can a JVM map this archive for this jar? `-Xshare:on` (`-XX:AOTMode=on` for an AOT cache) turns a
    refusal (another jar, another JDK, a damaged file) into an error instead of a silent fallback (or a
    crash, for a truncated file). `-XX:+VerifySharedSpaces` checks every region's checksum: `-version`
    loads none of the worker's classes, so bytes damaged inside an archive of the right size would pass
    unseen, and crash each worker JVM once it loads them."""
    kind = kind or CDS
    # Its working folder is where a crashing probe writes hs_err: beside the jar, not in /tmp, so a harness
    # SIGKILLed meanwhile leaves nothing outside the build folder (and the next one clears it: `_clear_stale`).
    try:
        with tempfile.TemporaryDirectory(prefix=f"{WORK_PREFIX}probe-", dir=jar.parent) as cwd:
            proc = subprocess.run(dying_with_this_process(
                [kind.java, *JVM_OPTIONS, *kind.probe(archive), "-XX:+VerifySharedSpaces",
                 "-XX:-CreateCoredumpOnCrash", "-cp", str(jar), "-version"]),
                cwd=cwd, capture_output=True, timeout=PROBE_TIMEOUT_S)
    except (OSError, subprocess.TimeoutExpired):      # a build folder it cannot write in, too
        return False
    return proc.returncode == 0


def _clear_stale(folder: Path) -> None:
    """Working folders of probes and trainings that ended long ago without removing theirs (a SIGKILLed
    harness): older than any probe or training can run."""
    try:
        entries = list(folder.iterdir())
    except OSError:
        return
    for entry in entries:
        try:
            old = time.time() - entry.lstat().st_mtime > STALE_WORK_S
            if entry.name.startswith(WORK_PREFIX) and entry.is_dir() and not entry.is_symlink() and old:
                shutil.rmtree(entry, ignore_errors=True)
            elif ".part" in entry.name and entry.name.startswith(Path(JAR_NAME).stem + ".") and old and \
                    entry.is_file() and not entry.is_symlink():
                entry.unlink()      # an archive an older harness was writing beside the jar when it died
        except OSError:
            continue


def _train(jar: Path, archive: Path, log, kind: "CacheKind | None" = None) -> bool:
    """Writes the archive: the training runs in a working folder beside the jar (every file it makes, the
    new archive included, stays there), whose archive replaces the old one only once it has passed the
    probe (so concurrent runs only ever see a checked archive). Each JVM of the training dies with the
    harness; a folder a SIGKILLed harness left is cleared later (`_clear_stale`)."""
    kind = kind or CDS
    log(f"Training the Kafka Streams worker's {kind.what} (once per jar) ...")
    try:
        with tempfile.TemporaryDirectory(prefix=f"{WORK_PREFIX}training-", dir=jar.parent) as cwd:
            tmp = Path(cwd) / ("new" + archive.suffix)
            for step in kind.train_steps(tmp, Path(cwd), jar):
                proc = subprocess.run(dying_with_this_process([kind.java, *JVM_OPTIONS, *step]),
                                      cwd=cwd, capture_output=True, text=True, timeout=TRAINING_TIMEOUT_S)
                if proc.returncode != 0:
                    break
            if proc.returncode == 0 and tmp.exists() and _probe(tmp, jar, kind):
                os.replace(tmp, archive)
                return True
            why = f"exit {proc.returncode}" + ("" if tmp.exists() else f", no {kind.what} written")
            last = (proc.stdout + proc.stderr).strip().splitlines()[-1:] or [""]
        log(f"the {kind.what} could not be made ({why}: {last[0][:200]}); workers start without one")
        return False
    except (OSError, subprocess.TimeoutExpired) as e:
        log(f"the {kind.what} could not be made ({e}); workers start without one")
        return False


def class_archive(jar: Path, log=print, kind: "CacheKind | None" = None) -> Path | None:
    """The jar's class-data archive (or AOT cache), (re)trained if it is stale or does not pass the probe;
    None if there is none that works (the workers then start without one)."""
    kind = kind or CDS
    archive = jar.with_suffix(kind.suffix)
    _clear_stale(jar.parent)
    if not archive_stale(archive, jar) and _probe(archive, jar, kind):
        return archive
    return archive if _train(jar, archive, log, kind) else None


@dataclass(frozen=True)
class CacheKind:
    """How a worker JVM starts from a cache of its classes: the class-data archive of any JDK (CDS), or a
    JDK 25's ahead-of-time cache (JEP 483: classes loaded and linked before the run; JEP 515's method
    profiles ride along but feed only C2, which the workers turn off)."""
    name: str
    what: str
    java: str
    suffix: str
    probe_flags: tuple
    run_flag: str

    def train_steps(self, out: Path, work: Path, jar: Path) -> list[list[str]]:
        """The JVMs that make the cache at `out`, each started by itself (so each dies with the harness: a
        JVM that forks another, as JEP 514's one-step -XX:AOTCacheOutput does, would leave that one behind)."""
        if self.name == "aot":
            conf = work / "training.aotconf"
            return [["-XX:AOTMode=record", f"-XX:AOTConfiguration={conf}", "-cp", str(jar), TRAINING_MAIN],
                    ["-XX:AOTMode=create", f"-XX:AOTConfiguration={conf}", f"-XX:AOTCache={out}", "-cp", str(jar)]]
        return [[f"-XX:ArchiveClassesAtExit={out}", "-cp", str(jar), TRAINING_MAIN]]

    def probe(self, path: Path) -> list[str]:
        return [*self.probe_flags, f"{self.run_flag}={path}"]

    def run(self, path: Path) -> list[str]:
        return [f"{self.run_flag}={path}"]


CDS = CacheKind("cds", "class-data archive", "java", ".jsa", ("-Xshare:on",), "-XX:SharedArchiveFile")
AOT_RELEASE = 25
JDK_HOMES = Path("/usr/lib/jvm")


def aot_kind(java: str) -> CacheKind:
    return CacheKind("aot", "AOT cache", java, ".aot", ("-XX:AOTMode=on",), "-XX:AOTCache")


def aot_java(homes: Path = JDK_HOMES) -> str | None:
    """The `java` of the newest installed JDK of release AOT_RELEASE or later (its `release` file says
    which), JAVA_HOME's among them; None when there is none."""
    found = []
    for home in [*([Path(os.environ["JAVA_HOME"])] if os.environ.get("JAVA_HOME") else []), *sorted(homes.glob("*"))]:
        try:
            text = (home / "release").read_text(errors="replace")
        except OSError:
            continue
        m = re.search(r'^JAVA_VERSION="(\d+)', text, re.M)
        java = home / "bin" / "java"
        if m and int(m[1]) >= AOT_RELEASE and os.access(java, os.X_OK) and not java.is_symlink():
            found.append((int(m[1]), str(java)))
    return max(found)[1] if found else None


def java_release(java: str) -> str | None:
    """The release `java -version` names (e.g. 17.0.13), None when it cannot be read."""
    try:
        proc = subprocess.run([java, "-version"], capture_output=True, text=True, timeout=PROBE_TIMEOUT_S)
    except (OSError, subprocess.TimeoutExpired):
        return None
    m = re.search(r'version "([0-9][0-9._+a-z-]{0,40})"', proc.stderr or "")
    return m[1] if m else None


@dataclass(frozen=True)
class WorkerStart:
    """How each worker JVM of a run starts: which java, with which cache (None: none), and in words."""
    java: str
    kind: CacheKind | None
    cache: Path | None
    said: str

    def flags(self) -> list[str]:
        return self.kind.run(self.cache) if self.kind and self.cache else []


def worker_start(jar: Path, choice: str, log=print) -> WorkerStart:
    """The start each worker gets (--streams-jvm): `cds` the class-data archive (the default: `harness bench
    streams` measured a JDK 25's AOT cache no faster per restart), `aot` a JDK 25's AOT cache (refused in
    one line without one), `plain` neither."""
    if choice == "plain":
        return WorkerStart("java", None, None, "java without a class cache")
    if choice == "aot":
        java25 = aot_java()
        if java25 is None:
            raise HarnessError(f"--streams-jvm aot needs a JDK {AOT_RELEASE} or later (none under {JDK_HOMES} "
                               f"nor JAVA_HOME); use --streams-jvm cds")
        kind = aot_kind(java25)
        cache = class_archive(jar, log, kind)
        if cache is None:
            raise HarnessError(f"--streams-jvm aot: the AOT cache of {java25} could not be made (see above)")
        return WorkerStart(java25, kind, cache, f"{java25} with its AOT cache {cache.name}")
    cache = class_archive(jar, log, CDS)
    return WorkerStart("java", CDS if cache else None, cache,
                       f"java with the class-data archive {cache.name}" if cache else "java without a class cache")


# libpq TLS settings the JDBC driver takes under the same names (a certificate check the DSN asks for must not
# be dropped on the way to the Java workers); the driver reads sslrootcert as a PEM file, as libpq does.
JDBC_TLS = ("sslmode", "sslrootcert")


def jdbc(dsn: str) -> tuple[str, str, str]:
    """(jdbc url, user, password) from a libpq DSN or URL; without a password in it, from the
    libpq password file (PGPASSFILE, as `harness env` sets it), which the JDBC driver does not read."""
    from urllib.parse import quote, urlencode
    d = psycopg.conninfo.conninfo_to_dict(dsn)
    host, port, db, user = d.get("host", "127.0.0.1"), d.get("port", 5432), d.get("dbname", "postgres"), d.get("user", "")
    password = d.get("password") or pgpass.lookup(host, port, db, user) or ""
    tls = {k: d[k] for k in JDBC_TLS if d.get(k)}
    return (f"jdbc:postgresql://{host}:{port}/{quote(str(db), safe='')}" + (f"?{urlencode(tls)}" if tls else ""),
            user, password)


def command(jar: Path, slot, *, bootstrap: str, input_topic: str, output_topic: str, application_id: str,
            state_dir: Path, crash_plan: Path, crash_log: Path, commit_interval_ms: int | None,
            ledger_table: str | None, dsn: str, start: WorkerStart | None = None,
            group_protocol: str | None = None) -> list[str]:
    start = start or WorkerStart("java", None, None, "java without a class cache")
    cmd = [start.java, *JVM_OPTIONS, *start.flags(), "-Dharness.worker=true", "-jar", str(jar),
           "--bootstrap", bootstrap, "--input", input_topic, "--output", output_topic,
           "--application-id", application_id, "--state-dir", str(state_dir / slot.name),
           "--crash-plan", str(crash_plan), "--crash-log", str(crash_log),
           "--worker", slot.name, "--attempt", str(slot.attempt)]
    if commit_interval_ms:
        cmd += ["--commit-interval-ms", str(commit_interval_ms)]
    if group_protocol:
        cmd += ["--group-protocol", group_protocol]
    if ledger_table:
        url, user, _pw = jdbc(dsn)
        cmd += ["--ledger-table", ledger_table, "--jdbc-url", url, "--jdbc-user", user]
    return cmd


PROCESS_FILE = "kafka-streams-process-metadata"   # Streams' own record of its process id (ProcessIdAnchor.java)
PROCESS_FILE_MAX = 4096
STREAM_THREADS = 1                                 # num.stream.threads of Main.java
UUID_TEXT = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


def transactional_ids(state_dir: Path, application_id: str) -> list[str]:
    """The EOS transactional.ids of the Streams instance that kept its process id in `state_dir`: Kafka
    Streams names its thread producers `<application.id>-<process id>-<thread index>` (thread indexes from 1).
    The file is the worker's, read as untrusted: capped, and the id must be a UUID (HarnessError if not)."""
    path = state_dir / application_id / PROCESS_FILE
    try:
        with open(path, "rb") as f:
            raw = f.read(PROCESS_FILE_MAX + 1)
        pid = json.loads(raw).get("processId") if len(raw) <= PROCESS_FILE_MAX else None
    except (OSError, ValueError, AttributeError):
        pid = None
    if not (isinstance(pid, str) and UUID_TEXT.fullmatch(pid)):
        raise HarnessError("no process id readable in its state directory")
    return [f"{application_id}-{pid}-{t}" for t in range(1, STREAM_THREADS + 1)]


def first_record_events(log_dir: Path) -> list[dict]:
    """The worker logs' FIRST-RECORD lines, as the `first_message` events Python workers emit."""
    out = []
    for f in sorted(log_dir.glob("*.log")):
        for m in FIRST_RECORD.finditer(f.read_text(errors="replace")):
            out.append({"event": "first_message", "worker": m[1], "attempt": int(m[2]), "t": float(m[3])})
    return sorted(out, key=lambda e: e["t"])
