"""`harness up/down/status` for the default stack: local Kafka + local Postgres.

The state folder remembers the ports (`stack.json`), so a second `up` finds a
running stack, checks that it still answers, and reuses it. Ports that are
taken by someone else are replaced by free ones and the choice is reported.
A failing start stops what it started and raises one clear line with the tail
of the failing service's log.

Who stops what (see `leases` and `pidrecord`): `harness up` holds the stack
until `harness down`; any other command takes a lease while it uses the
stack, and when it lets go it stops the services commands started only if
no other command holds a lease and `harness up` does not hold the stack.
Which processes run is decided by the verified pid records alone, so a
damaged `stack.json` costs nothing but a note.

`stack.json` also remembers the Kafka auth the stack was formatted with
(`harness up --auth scram`); later commands start and use it the same way,
with the client settings of `client_properties_file()`.
"""

import json
import os
import shutil
import time
from pathlib import Path

import psycopg.conninfo

from .. import versions
from ..errors import HarnessError
from ..paths import state_dir
from . import health, leases, local_kafka, maven, ports
from .claim import Claim
from .. import kafka_client
from .local_kafka import AUTHS, LocalKafka, START_TIMEOUT_S as KAFKA_START_TIMEOUT_S
from .local_postgres import DATABASE, USER, LocalPostgres, find_bindir
from .model import Stack

PREFERRED = {"kafka": 19092, "controller": 19093, "postgres": 15432}
PORT_NAMES = tuple(PREFERRED)


def _record_path(state: Path) -> Path:
    return state / "stack.json"


def read_record(state: Path | None = None) -> dict | None:
    """stack.json as a dict, or None when it is missing, not JSON or not an object."""
    try:
        rec = json.loads(_record_path(state or state_dir()).read_text())
    except (OSError, ValueError):
        return None
    return rec if isinstance(rec, dict) else None


def _damage(state: Path, services_run: bool) -> str | None:
    """Why stack.json cannot be used as it is (None when it is fine, or absent with nothing running)."""
    path = _record_path(state)
    if not path.exists():
        return f"{path} is missing" if services_run else None
    rec = read_record(state)
    if rec is None:
        return f"{path} is unreadable or not a JSON object"
    bad = [n for n in PORT_NAMES if not _is_port(rec.get(f"{n}_port"))]
    return f"{path} lacks {', '.join(f'{n}_port' for n in bad)}" if bad else None


def _is_port(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and 0 < v < 65536


def _write_record(state: Path, rec: dict) -> None:
    tmp = state / f"stack.json.tmp{os.getpid()}"
    tmp.write_text(json.dumps(rec, indent=2) + "\n")
    os.replace(tmp, _record_path(state))


def known_ports(state: Path, kafka: LocalKafka, pg: LocalPostgres) -> dict:
    """Ports of the running services from their pid records, else from stack.json (missing keys absent)."""
    rec = read_record(state) or {}
    out = {n: rec[f"{n}_port"] for n in PORT_NAMES if _is_port(rec.get(f"{n}_port"))}
    for svc in (kafka, pg):
        running = svc.running()
        if running:
            out.update({k: v for k, v in running.ports.items() if k in PORT_NAMES and _is_port(v)})
    return out


def _stack_from(port: dict, kafka: LocalKafka, pg: LocalPostgres, auth: str = "none") -> Stack:
    bootstrap = f"127.0.0.1:{port.get('kafka', '?')}"
    own = kafka.client_settings() if auth == "scram" else {}
    return Stack(kind="local", bootstrap_servers=bootstrap,
                 postgres_dsn=pg.dsn(port["postgres"]) if "postgres" in port else "",
                 owned=True, kafka_version=versions.KAFKA_VERSION,
                 pids={"kafka": kafka.pid(), "postgres": pg.pid()},
                 kafka_config=kafka_client.resolve(bootstrap, own))


def recorded_auth(state: Path | None = None) -> str:
    """The Kafka auth of the local stack in `state` ("none" or "scram"): as stack.json remembers it, else
    (a lost or damaged stack.json) as the broker's server.properties says."""
    state = state or state_dir()
    auth = (read_record(state) or {}).get("auth")
    return auth if auth in AUTHS else LocalKafka(state).configured_auth()


def client_properties_file(state: Path | None = None) -> Path | None:
    """The Kafka client settings file (librdkafka names, 0600) of the local stack in `state`.

    None when that stack needs no client settings (plaintext). `harness up --auth scram` writes it;
    `kcat -F FILE` and `--kafka-config-file FILE` read it.
    """
    state = state or state_dir()
    f = LocalKafka(state).client_file
    return f if recorded_auth(state) == "scram" and f.exists() else None


def stopped_with_data() -> bool:
    """Whether this state folder holds a local stack's data with none of its services running."""
    state = state_dir()
    kafka, pg = LocalKafka(state), LocalPostgres(state)
    return (kafka.data.is_dir() or pg.data.is_dir()) and not kafka.running() and not pg.running()


def serves(bootstrap: str | None, dsn: str | None) -> bool:
    """Whether these addresses are the running local stack's own (both services up on its ports)."""
    if not bootstrap or not dsn:
        return False
    try:
        d = psycopg.conninfo.conninfo_to_dict(dsn)
    except psycopg.ProgrammingError:
        return False
    state = state_dir()
    kafka, pg = LocalKafka(state), LocalPostgres(state)
    if (read_record(state) or {}).get("kind") not in (None, "local") or not (kafka.running() and pg.running()):
        return False
    port = known_ports(state, kafka, pg)
    return (bootstrap.strip() == f"127.0.0.1:{port.get('kafka')}"
            and d.get("host") in ("127.0.0.1", "localhost") and str(d.get("port")) == str(port.get("postgres"))
            and d.get("user", USER) == USER and d.get("dbname", DATABASE) == DATABASE)


def status(check: bool = True) -> Stack | None:
    """The local stack as the pid records show it, or None when nothing of it runs or is recorded."""
    state = state_dir()
    leases.check_readable(state)
    rec = read_record(state)
    if rec is not None and rec.get("kind") not in (None, "local"):
        return None
    kafka, pg = LocalKafka(state), LocalPostgres(state)
    running = {"kafka": kafka.running(), "postgres": pg.running()}
    strays = {svc.name: svc.strangers(mark) for svc, mark, r in
              ((kafka, str(kafka.props), running["kafka"]), (pg, str(pg.data), running["postgres"])) if r is None}
    if not any(running.values()) and not any(strays.values()):
        return None
    port = known_ports(state, kafka, pg)
    stack = _stack_from(port, kafka, pg, recorded_auth(state))
    damage = _damage(state, any(running.values()))
    if damage:
        stack.notes.append(f"{damage}; ports are taken from the running services' pid records")
    for name, pids in strays.items():
        stack.notes.append(f"{name} is not running" if not pids else
                           f"a {name} from this folder runs as pid {', '.join(map(str, pids))} but no valid pid "
                           f"record names it: the harness will not touch it")
    if check:
        stack.healthy = all(running.values()) and {"kafka", "postgres"} <= set(port) \
            and health.kafka_probe(stack.bootstrap_servers, 10) is None \
            and health.postgres_probe(stack.postgres_dsn, 5) is None
        stack.postgres_version = health.postgres_version(stack.postgres_dsn) if stack.healthy else None
    if leases.held(state):
        stack.notes.append("held by `harness up` until `harness down`")
    users = leases.live(state, drop_stale=False)
    if users:
        stack.notes.append("in use by " + ", ".join(f"pid {u.pid}" for u in users))
    return stack


def up(log=print, hold: bool = False, command: str = "", auth: str | None = None) -> tuple[Stack, Claim | None]:
    """Start what is not running and wait until both answer.

    With `hold` (harness up) the stack is kept until `harness down` and no lease is taken;
    otherwise the caller gets a Claim and must `release()` it. `auth` ("none", "scram") is how
    Kafka's clients authenticate; None keeps what the stack was formatted with.
    """
    state = state_dir()
    leases.prepare(state)
    rec = read_record(state) or {}
    if rec.get("kind") not in (None, "local"):
        raise HarnessError(f"{state} holds a {rec.get('kind')} stack; run `harness down` first")

    with leases.locked(state, log=log):
        claim = None if hold else Claim(state, leases.take(state, command))
        try:
            stack, started = _start_missing(state, "user" if hold else "command", log, auth)
        except BaseException:
            if claim is not None:
                leases.give_back(claim.lease)
            raise
        if hold:
            leases.hold(state)
            for svc in (LocalKafka(state), LocalPostgres(state)):
                svc.set_owner("user")
        else:
            claim.started = started
    return stack, claim


def _tools(log) -> tuple[Path, Path]:
    """Postgres binaries and Kafka jars, or one clear line about what is missing."""
    bindir = find_bindir()
    lib = maven.resolve_kafka(log)
    if shutil.which("java") is None:
        raise HarnessError("java not found on PATH: Kafka needs Java 17 or newer (Debian: apt-get install openjdk-17-jre-headless)")
    return bindir, lib


def _choose_auth(state: Path, kafka: LocalKafka, running, auth: str | None) -> str:
    """The auth to start with: the recorded one, or `auth` when nothing of the old one is left to clash."""
    had = recorded_auth(state)
    if auth is None or auth == had:
        return had
    if auth not in AUTHS:
        raise HarnessError(f"unknown --auth {auth!r}; choose one of: {', '.join(AUTHS)}")
    if running or kafka.formatted():
        raise HarnessError(f"the local Kafka under {state} was set up with --auth {had}; to use --auth {auth}, "
                           f"run `harness down --purge` first (it deletes its data)")
    return auth


def _start_missing(state: Path, owner: str, log, auth: str | None = None) -> tuple[Stack, list[str]]:
    """Under the lock: start the services that do not run, wait until all answer."""
    kafka, pg = LocalKafka(state), LocalPostgres(state)
    notes = []
    rec = read_record(state) or {}
    running = {"kafka": kafka.running(), "postgres": pg.running()}
    auth = _choose_auth(state, kafka, running["kafka"], auth)
    if not all(running.values()):
        bindir, lib = _tools(log)       # fail early, before starting anything
    damage = _damage(state, any(running.values()))
    if damage:
        what = "rebuilt it from the running services" if any(running.values()) else "starting fresh"
        notes.append(f"{damage}; {what}")
    for svc, mark in ((kafka, str(kafka.props)), (pg, str(pg.data))):
        if not svc.running() and (strays := svc.strangers(mark)):
            raise HarnessError(f"a {svc.name} from {state} runs as pid {', '.join(map(str, strays))} but its pid "
                               f"record is missing or wrong, so the harness will not touch it; stop it yourself")

    port = known_ports(state, kafka, pg)
    taken = set(port[n] for n in PORT_NAMES if n in port and _holder(n, running))
    for name in PORT_NAMES:
        if _holder(name, running):
            continue                 # our own service still holds its recorded port
        chosen, note = ports.choose(port.get(name) or PREFERRED[name], taken)
        if note:
            notes.append(f"{name}: {note}")
        taken.add(chosen)
        port[name] = chosen
    _write_record(state, {**{k: v for k, v in rec.items() if k not in ("kind",)}, "kind": "local", "auth": auth,
                          **{f"{n}_port": port[n] for n in PORT_NAMES}})
    for n in notes:
        log(n)

    started = []
    try:
        if not running["postgres"]:
            log(f"Starting PostgreSQL on 127.0.0.1:{port['postgres']} ...")
            started.append("postgres")
            pg.start(bindir, port["postgres"], owner)
        if not running["kafka"]:
            how = f" (SASL_PLAINTEXT {local_kafka.SCRAM_MECHANISM})" if auth == "scram" else ""
            log(f"Starting Kafka {versions.KAFKA_VERSION} on 127.0.0.1:{port['kafka']}{how} ...")
            started.append("kafka")
            kafka.start(lib, port["kafka"], port["controller"], owner, auth)
        stack = _stack_from(port, kafka, pg, auth)
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
    return stack, started


def _holder(port_name: str, running: dict) -> bool:
    service = "postgres" if port_name == "postgres" else "kafka"
    return running[service] is not None


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


def down(purge: bool = False, log=print) -> list[str]:
    """`harness down`: stop every service this state folder owns; return what was stopped."""
    state = state_dir()
    leases.check_readable(state)
    if not state.is_dir():
        return []
    kafka, pg = LocalKafka(state), LocalPostgres(state)
    stopped = []
    with leases.locked(state, log=log):
        users = leases.live(state)
        if users:
            log(f"warning: stopping a stack that {len(users)} running command(s) still use "
                f"(pid {', '.join(str(u.pid) for u in users)}); they will fail")
        for svc in (kafka, pg):
            if svc.running():
                log(f"Stopping {svc.name} ...")
            ok, note = svc.stop()
            if ok:
                stopped.append(note)
            elif note:
                log(note)
        leases.unhold(state)
        if purge:
            for p in (kafka.home, pg.home, pg.password_file, kafka.client_file, _record_path(state)):
                if p.is_dir():
                    shutil.rmtree(p, ignore_errors=True)
                else:
                    p.unlink(missing_ok=True)
            log(f"Deleted Kafka and PostgreSQL data under {state}")
    return stopped
