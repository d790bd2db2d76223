"""`harness up/down/status` for the default stack: local Kafka + local Postgres.

The state folder remembers the ports (`stack.json`), so a second `up` finds a
running stack, checks that it still answers, and reuses it. Ports that are
taken by someone else are replaced by free ones and the choice is reported.
A failing start stops what it started and raises one clear line with the tail
of the failing service's log.
"""

import json
import shutil
import time
from pathlib import Path

from .. import versions
from ..errors import HarnessError
from ..paths import state_dir
from . import health, maven, ports
from .local_kafka import LocalKafka, START_TIMEOUT_S as KAFKA_START_TIMEOUT_S
from .local_postgres import LocalPostgres, find_bindir
from .model import Stack

PREFERRED = {"kafka": 19092, "controller": 19093, "postgres": 15432}


def _record_path(state: Path) -> Path:
    return state / "stack.json"


def read_record(state: Path | None = None) -> dict | None:
    try:
        return json.loads(_record_path(state or state_dir()).read_text())
    except (OSError, ValueError):
        return None


def _stack_from(rec: dict, kafka: LocalKafka, pg: LocalPostgres) -> Stack:
    return Stack(kind="local", bootstrap_servers=f"127.0.0.1:{rec['kafka_port']}",
                 postgres_dsn=pg.dsn(rec["postgres_port"]), owned=True,
                 kafka_version=versions.KAFKA_VERSION, pids={"kafka": kafka.pid(), "postgres": pg.pid()})


def status(check: bool = True) -> Stack | None:
    state = state_dir()
    rec = read_record(state)
    if not rec or rec.get("kind") != "local":
        return None
    kafka, pg = LocalKafka(state), LocalPostgres(state)
    stack = _stack_from(rec, kafka, pg)
    if check:
        alive = all(stack.pids.values())
        stack.healthy = alive and health.kafka_probe(stack.bootstrap_servers, 10) is None \
            and health.postgres_probe(stack.postgres_dsn, 5) is None
        stack.postgres_version = health.postgres_version(stack.postgres_dsn) if stack.healthy else None
    return stack


def up(log=print) -> tuple[Stack, bool]:
    """Start what is not running; return the stack and whether this call started anything."""
    state = state_dir()
    state.mkdir(parents=True, exist_ok=True)
    kafka, pg = LocalKafka(state), LocalPostgres(state)
    rec = read_record(state) or {}
    if rec.get("kind") not in (None, "local"):
        raise HarnessError(f"{state} holds a {rec.get('kind')} stack; run `harness down` first")

    bindir = find_bindir()          # fail early, before starting anything
    lib = maven.resolve_kafka(log)
    if shutil.which("java") is None:
        raise HarnessError("java not found on PATH: Kafka needs Java 17 or newer (Debian: apt-get install openjdk-17-jre-headless)")

    notes = []
    if not kafka.pid() or not pg.pid():
        taken: set[int] = set()
        for name in ("kafka", "controller", "postgres"):
            # Keep the recorded port when our own service still holds it.
            if name == "postgres" and pg.pid() and rec.get("postgres_port"):
                port = rec["postgres_port"]
            elif name in ("kafka", "controller") and kafka.pid() and rec.get(f"{name}_port"):
                port = rec[f"{name}_port"]
            else:
                port, note = ports.choose(rec.get(f"{name}_port") or PREFERRED[name], taken)
                if note:
                    notes.append(f"{name}: {note}")
            taken.add(port)
            rec[f"{name}_port"] = port
        rec["kind"] = "local"
        _record_path(state).write_text(json.dumps(rec, indent=2) + "\n")
    for n in notes:
        log(n)

    started = []
    try:
        if not pg.pid():
            log(f"Starting PostgreSQL on 127.0.0.1:{rec['postgres_port']} ...")
            pg.start(bindir, rec["postgres_port"], "command")
            started.append("postgres")
        if not kafka.pid():
            log(f"Starting Kafka {versions.KAFKA_VERSION} on 127.0.0.1:{rec['kafka_port']} ...")
            kafka.start(lib, rec["kafka_port"], rec["controller_port"], "command")
            started.append("kafka")
        stack = _stack_from(rec, kafka, pg)
        _wait_ready(stack, kafka, pg)
    except BaseException:
        if "kafka" in started:
            kafka.stop()
        if "postgres" in started:
            pg.stop()
        raise
    stack.pids = {"kafka": kafka.pid(), "postgres": pg.pid()}
    stack.healthy = True
    stack.postgres_version = health.postgres_version(stack.postgres_dsn)
    stack.notes = notes + ([] if started else ["reused the running stack"])
    return stack, bool(started)


def _wait_ready(stack: Stack, kafka: LocalKafka, pg: LocalPostgres) -> None:
    err = health.postgres_probe(stack.postgres_dsn, 30)
    if err:
        raise HarnessError(f"PostgreSQL did not accept a connection: {err}", pg.log_tail())
    deadline = time.monotonic() + KAFKA_START_TIMEOUT_S
    while time.monotonic() < deadline:
        if not kafka.pid():
            raise HarnessError("Kafka exited during start-up", kafka.log_tail())
        err = health.kafka_probe(stack.bootstrap_servers, min(10, deadline - time.monotonic()))
        if err is None:
            return
    raise HarnessError(f"Kafka did not become ready within {KAFKA_START_TIMEOUT_S} s: {err}", kafka.log_tail())


def down(purge: bool = False, log=print) -> None:
    """Stop the services whose pid records match; never signal a process that does not match."""
    state = state_dir()
    kafka, pg = LocalKafka(state), LocalPostgres(state)
    for svc in (kafka, pg):
        if svc.running():
            log(f"Stopping {svc.name} ...")
        ok, note = svc.stop()
        if note and not ok:
            log(note)
    if purge:
        for p in (kafka.home, pg.home, pg.password_file, _record_path(state)):
            if p.is_dir():
                shutil.rmtree(p, ignore_errors=True)
            else:
                p.unlink(missing_ok=True)
        log(f"Deleted Kafka and PostgreSQL data under {state}")
