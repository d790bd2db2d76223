"""`harness up/down/status` for the default stack: local Kafka (one node or three) + local Postgres.

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

The cluster size (`harness up --brokers 3`) is remembered in `stack.json`
(`brokers`), so `run`, `status` and `down` know it without being told; a
state folder holds one size until `harness down --purge` (a one-node
folder's topics have one replica, and three nodes need one cluster id).

`stack.json` also remembers the Kafka auth the stack was formatted with
(`harness up --auth scram`); later commands start and use it the same way,
with the client settings of `client_properties_file()`. SCRAM is offered for
the one-node stack only: `--auth scram` with `--brokers 3` is refused.

`stack.json` itself is read and written by local_record.py.
"""

import os
import shutil
import time
from pathlib import Path

import psycopg.conninfo

from .. import versions
from ..errors import HarnessError
from ..paths import state_dir
from . import health, interrupts, leases, local_kafka, marker, maven, ports
from .claim import Claim
from .. import kafka_client
from .local_kafka import AUTHS, CLUSTER_SIZES, START_TIMEOUT_S as KAFKA_START_TIMEOUT_S
from .local_kafka import every_node, nodes as kafka_nodes, voters as quorum_voters
from .local_postgres import DATABASE, USER, LocalPostgres, find_bindir
from .local_record import (bootstrap_of, is_port, known_ports, port_names, preferred, read_record, record_damage,
                           record_path, recorded_auth, service_of, size, write_record)
from .model import Stack
# Re-exported for cli.py only (its home is local_record.py).
from .local_record import client_properties_file  # noqa: F401


def _stack_from(port: dict, kafka: list, pg: LocalPostgres, auth: str = "none") -> Stack:
    bootstrap = bootstrap_of(port, len(kafka))
    own = kafka[0].client_settings() if auth == "scram" else {}
    return Stack(kind="local", bootstrap_servers=bootstrap,
                 postgres_dsn=pg.dsn(port["postgres"]) if "postgres" in port else "",
                 audit_dsn=pg.audit_dsn(port["postgres"]) if "postgres" in port else "",
                 owned=True, kafka_version=versions.KAFKA_VERSION, brokers=len(kafka),
                 pids={**{k.key: k.pid() for k in kafka}, "postgres": pg.pid()},
                 kafka_config=kafka_client.resolve(bootstrap, own))


def services(state: Path, brokers: int | None = None) -> dict:
    """The stack's services by key (kafka or kafka-1..N, postgres), in start order reversed."""
    nodes = kafka_nodes(state, brokers or size(state))
    return {**{k.key: k for k in nodes}, "postgres": LocalPostgres(state)}


def stopped_with_data() -> bool:
    """Whether this state folder holds a local stack's data with none of its services running."""
    state = state_dir()
    kafka, pg = every_node(state), LocalPostgres(state)
    return (any(k.data.is_dir() for k in kafka) or pg.data.is_dir()) \
        and not any(k.running() for k in kafka) and not pg.running()


def serves(bootstrap: str | None, dsn: str | None) -> bool:
    """Whether these addresses are the running local stack's own (both services up on its ports)."""
    if not bootstrap or not dsn:
        return False
    try:
        d = psycopg.conninfo.conninfo_to_dict(dsn)
    except psycopg.ProgrammingError:
        return False
    state = state_dir()
    kafka, pg = kafka_nodes(state, size(state)), LocalPostgres(state)
    if (read_record(state) or {}).get("kind") not in (None, "local") or not (kafka[0].running() and pg.running()):
        return False
    port = known_ports(state, kafka, pg)
    return (bootstrap.strip() == bootstrap_of(port, len(kafka))
            and d.get("host") in ("127.0.0.1", "localhost") and str(d.get("port")) == str(port.get("postgres"))
            and d.get("user", USER) == USER and d.get("dbname", DATABASE) == DATABASE)


def status(check: bool = True) -> Stack | None:
    """The local stack as the pid records show it, or None when nothing of it runs or is recorded."""
    state = state_dir()
    leases.check_readable(state)
    rec = read_record(state)
    if rec is not None and rec.get("kind") not in (None, "local"):
        return None
    kafka, pg = kafka_nodes(state, size(state)), LocalPostgres(state)
    svcs = [*kafka, pg]
    running = {s.key if s is not pg else "postgres": s.running() for s in svcs}
    strays = {svc.name: svc.strangers(_mark(svc, pg)) for svc in svcs if running[_key(svc, pg)] is None}
    if not any(running.values()) and not any(strays.values()):
        return None
    port = known_ports(state, kafka, pg)
    stack = _stack_from(port, kafka, pg, recorded_auth(state))
    damage = record_damage(state, any(running.values()))
    if damage:
        stack.notes.append(f"{damage}; ports are taken from the running services' pid records")
    for name, pids in strays.items():
        stack.notes.append(f"{name} is not running" if not pids else
                           f"a {name} from this folder runs as pid {', '.join(map(str, pids))} but no valid pid "
                           f"record names it: the harness will not touch it")
    if check:
        stack.healthy = all(running.values()) and set(port_names(len(kafka))) <= set(port) \
            and health.kafka_probe(stack.bootstrap_servers, 10, brokers=len(kafka)) is None \
            and health.postgres_probe(stack.postgres_dsn, 5) is None
        stack.postgres_version = health.postgres_version(stack.postgres_dsn) if stack.healthy else None
    if leases.held(state):
        stack.notes.append("held by `harness up` until `harness down`")
    users = leases.live(state, drop_stale=False)
    if users:
        stack.notes.append("in use by " + ", ".join(f"pid {u.pid}" for u in users))
    return stack


def _mark(svc, pg) -> str:
    return str(pg.data) if svc is pg else str(svc.props)


def _key(svc, pg) -> str:
    return "postgres" if svc is pg else svc.key


def check_size(state: Path, brokers: int | None) -> int:
    """The cluster size to use: the one asked for, which must match the one this folder already holds."""
    if brokers is not None and brokers not in CLUSTER_SIZES:
        raise HarnessError(f"--brokers must be one of {', '.join(map(str, CLUSTER_SIZES))}, got {brokers}")
    have = size(state)
    held = any(k.data.is_dir() for k in kafka_nodes(state, have)) or any(k.running() for k in every_node(state))
    if brokers is not None and brokers != have and held:
        raise HarnessError(f"{state} holds a {have}-broker stack; to start {brokers} broker(s) there, "
                           f"first run `harness down --purge` (it deletes that stack's data)")
    return brokers or have


def check_auth_size(auth: str | None, brokers: int | None) -> None:
    """SCRAM is set up for the one-node stack only (one SASL listener, one formatted metadata log):
    refuse it with a cluster rather than start three nodes that were never tested that way."""
    if auth == "scram" and brokers is not None and brokers > 1:
        raise HarnessError(f"--auth scram runs on the one-broker stack only; --brokers {brokers} is plaintext "
                           f"(give one of them)")


def up(log=print, hold: bool = False, command: str = "", brokers: int | None = None,
       auth: str | None = None) -> tuple[Stack, Claim | None]:
    """Start what is not running and wait until all answer.

    With `hold` (harness up) the stack is kept until `harness down` and no lease is taken;
    otherwise the caller gets a Claim and must `release()` it. `brokers` (1 or 3) is the cluster
    size; None keeps the size this state folder remembers (1 for a new one). `auth` ("none",
    "scram") is how Kafka's clients authenticate; None keeps what the stack was formatted with.
    """
    state = state_dir()
    leases.prepare(state)
    # what `down --purge` looks for before it deletes anything; refused in a folder that already holds
    # names purge would delete (a project's own kafka/ or postgres/), so purge deletes only ours
    marker.mark(state, in_the_way=[p for p in purged_paths(state) if os.path.lexists(p)])
    rec = read_record(state) or {}
    if rec.get("kind") not in (None, "local"):
        raise HarnessError(f"{state} holds a {rec.get('kind')} stack; run `harness down` first")

    check_auth_size(auth, brokers)
    # Ctrl-C, SIGTERM or SIGHUP: what was started is stopped, unless the hold is written (see interrupts).
    with leases.locked(state, log=log), interrupts.handled():
        n = check_size(state, brokers)
        claim = None if hold else Claim(state, leases.take(state, command))
        started = []
        try:
            stack, started = _start_with_free_ports(state, "user" if hold else "command", log, n, auth)
            if hold:
                with interrupts.step(final=True):
                    leases.hold(state)
                    for svc in services(state, n).values():
                        svc.set_owner("user")
        except BaseException:
            if claim is not None:
                leases.give_back(claim.lease)
            if hold and started and not leases.held(state):     # interrupted between the start and the hold
                _stop_all([svc for key, svc in services(state, n).items() if key in started])
            raise
        if not hold:
            claim.started = started
    return stack, claim


# A port is chosen free, then bound by the service a second later: another stack starting at the same
# instant (a suite beside a test run, two CI jobs) can take it in between, and the service dies at
# start-up. After a failed start has stopped what it started, a port of ours that is still bound is
# someone else's: choose again. Three tries: each loser of a race picks a port the kernel has just said
# is free, so a second clash is already unlikely.
PORT_RACE_TRIES = 3


def _start_with_free_ports(state: Path, owner: str, log, brokers: int, auth: str | None) -> tuple[Stack, list[str]]:
    """`_start_missing`, again with newly chosen ports when a service lost its port to another process
    between the choice and the bind."""
    for attempt in range(1, PORT_RACE_TRIES + 1):
        try:
            return _start_missing(state, owner, log, brokers, auth)
        except HarnessError as e:
            rec = read_record(state) or {}
            lost = sorted(v for k, v in rec.items() if k.endswith("_port") and is_port(v) and not ports.is_free(v)
                          and not _runs(state, brokers, k[:-len("_port")]))
            if attempt == PORT_RACE_TRIES or not lost:
                raise
            log(f"port {', '.join(map(str, lost))} was taken by another process while the stack started "
                f"({e}); choosing ports again")
    raise AssertionError("unreachable")


def _runs(state: Path, brokers: int, name: str) -> bool:
    """Whether our own service that binds port `name` (postgres, kafka, controller, kafka-N...) runs."""
    svc = services(state, brokers).get(service_of(name))
    return bool(svc and svc.running())


def _tools(log) -> tuple[Path, Path]:
    """Postgres binaries and Kafka jars, or one clear line about what is missing."""
    bindir = find_bindir()
    lib = maven.resolve_kafka(log)
    if shutil.which("java") is None:
        raise HarnessError("java not found on PATH: Kafka needs Java 17 or newer (Debian: apt-get install openjdk-17-jre-headless)")
    return bindir, lib


def _choose_auth(state: Path, kafka: list, running: bool, auth: str | None) -> str:
    """The auth to start with: the recorded one, or `auth` when nothing of the old one is left to clash."""
    had = recorded_auth(state)
    if auth is None or auth == had:
        return had
    if auth not in AUTHS:
        raise HarnessError(f"unknown --auth {auth!r}; choose one of: {', '.join(AUTHS)}")
    if running or any(k.formatted() for k in kafka):
        raise HarnessError(f"the local Kafka under {state} was set up with --auth {had}; to use --auth {auth}, "
                           f"run `harness down --purge` first (it deletes its data)")
    return auth


def _start_missing(state: Path, owner: str, log, brokers: int = 1,
                   auth: str | None = None) -> tuple[Stack, list[str]]:
    """Under the lock: start the services that do not run, wait until all answer."""
    kafka, pg = kafka_nodes(state, brokers), LocalPostgres(state)
    svcs = [*kafka, pg]
    names = port_names(brokers)
    notes = []
    rec = read_record(state) or {}
    had = size(state)
    rec["brokers"] = brokers
    running = {_key(s, pg): s.running() for s in svcs}
    auth = _choose_auth(state, kafka, any(running[k.key] for k in kafka), auth)
    check_auth_size(auth, brokers)
    if not all(running.values()):
        bindir, lib = _tools(log)       # fail early, before starting anything
    damage = record_damage(state, any(running.values())) if had == brokers else None
    if damage:
        what = "rebuilt it from the running services" if any(running.values()) else "starting fresh"
        notes.append(f"{damage}; {what}")
    for svc in svcs:
        if not svc.running() and (strays := svc.strangers(_mark(svc, pg))):
            raise HarnessError(f"a {svc.name} from {state} runs as pid {', '.join(map(str, strays))} but its pid "
                               f"record is missing or wrong, so the harness will not touch it; stop it yourself")

    port = known_ports(state, kafka, pg) if had == brokers else \
        {n: rec[f"{n}_port"] for n in names if is_port(rec.get(f"{n}_port"))}
    taken = set(port[n] for n in names if n in port and running[service_of(n)])
    for name in names:
        if running[service_of(name)]:
            continue                 # our own service still holds its recorded port
        chosen, note = ports.choose(port.get(name) or preferred(name), taken)
        if note:
            notes.append(f"{name}: {note}")
        taken.add(chosen)
        port[name] = chosen
    write_record(state, {**{k: v for k, v in rec.items() if k not in ("kind",)}, "kind": "local", "auth": auth,
                          **{f"{n}_port": port[n] for n in names}})
    for n in notes:
        log(n)

    started = []
    try:
        if not running["postgres"]:
            log(f"Starting PostgreSQL on 127.0.0.1:{port['postgres']} ...")
            started.append("postgres")
            with interrupts.step():          # a signal waits for the pid record: without it nothing could stop it
                pg.start(bindir, port["postgres"], owner)
        for n in pg.ensure_roles(port["postgres"]):     # set up, or put right in a folder of an older harness
            log(n)
            notes.append(n)
        if brokers == 1 and not running["kafka"]:
            how = f" (SASL_PLAINTEXT {local_kafka.SCRAM_MECHANISM})" if auth == "scram" else ""
            log(f"Starting Kafka {versions.KAFKA_VERSION} on 127.0.0.1:{port['kafka']}{how} ...")
            started.append("kafka")
            with interrupts.step():
                kafka[0].start(lib, port["kafka"], port["controller"], owner, auth=auth)
        elif brokers > 1:
            quorum = quorum_voters([port[f"controller-{i}"] for i in range(1, brokers + 1)])
            cluster_id = next((c for k in kafka if (c := k.cluster_id())), None) or _new_cluster_id()
            for k in kafka:
                if not running[k.key]:
                    log(f"Starting Kafka {versions.KAFKA_VERSION} node {k.node_id} of {brokers} on "
                        f"127.0.0.1:{port[k.key]} ...")
                    started.append(k.key)
                    with interrupts.step():
                        k.start(lib, port[k.key], port[f"controller-{k.node_id}"], owner, voters=quorum,
                                cluster_id=cluster_id)
        stack = _stack_from(port, kafka, pg, auth)
        _wait_ready(stack, kafka, pg)
    except BaseException:
        _stop_all([s for s in svcs if _key(s, pg) in started])
        raise
    stack.pids = {**{k.key: k.pid() for k in kafka}, "postgres": pg.pid()}
    stack.healthy = True
    stack.postgres_version = health.postgres_version(stack.postgres_dsn)
    stack.notes = notes + ([] if started else ["reused the running stack"])
    return stack, started


def _new_cluster_id() -> str:
    from .local_kafka import _cluster_id
    return _cluster_id()


def _stop_all(svcs: list) -> list:
    """Stop services at once (each Kafka node may take its TERM grace): the results, in order."""
    from concurrent.futures import ThreadPoolExecutor
    if not svcs:
        return []
    with ThreadPoolExecutor(max_workers=len(svcs)) as ex:
        return list(ex.map(lambda s: s.stop(), svcs))


def _wait_ready(stack: Stack, kafka: list, pg: LocalPostgres) -> None:
    err = health.postgres_probe(stack.postgres_dsn, 30)
    if err:
        raise HarnessError(f"PostgreSQL did not accept a connection: {err}", pg.log_tail())
    deadline = time.monotonic() + KAFKA_START_TIMEOUT_S
    while time.monotonic() < deadline:
        dead = [k for k in kafka if not k.pid()]
        if dead:
            raise HarnessError(f"{dead[0].name} exited during start-up", dead[0].log_tail())
        err = health.kafka_probe(stack.bootstrap_servers, min(10, deadline - time.monotonic()), brokers=len(kafka))
        if err is None:
            return
    raise HarnessError(f"Kafka did not become ready within {KAFKA_START_TIMEOUT_S} s: {err}", kafka[0].log_tail())


def purged_paths(state: Path) -> list[Path]:
    """What `down --purge` deletes in a state folder (and what `up` must find absent in a folder it
    marks for the first time, so that purge never deletes what the harness did not make)."""
    from .shellenv import PGPASS_NAME       # the copy of the password `harness env` keeps
    kafka, pg = every_node(state), LocalPostgres(state)
    return [*(k.home for k in kafka), pg.home, pg.password_file, pg.admin_password_file,
            pg.audit_password_file, kafka[0].client_file, state / PGPASS_NAME, record_path(state)]


def down(purge: bool = False, log=print) -> list[str]:
    """`harness down`: stop every service this state folder owns; return what was stopped."""
    state = state_dir()
    leases.check_readable(state)
    if not state.is_dir():
        return []
    if purge and (why := marker.why_not_marked(state)):
        raise HarnessError(f"refusing to purge {state}: {why}; nothing was stopped or deleted")
    kafka, pg = every_node(state), LocalPostgres(state)
    stopped = []
    with leases.locked(state, log=log):
        users = leases.live(state)
        if users:
            log(f"warning: stopping a stack that {len(users)} running command(s) still use "
                f"(pid {', '.join(str(u.pid) for u in users)}); they will fail")
        for group in (kafka, [pg]):       # the Kafka nodes together (each may take its grace), then Postgres
            for svc in group:
                if svc.running():
                    log(f"Stopping {svc.name} ...")
            for ok, note in _stop_all(group):
                if ok:
                    stopped.append(note)
                elif note:
                    log(note)
        leases.unhold(state)
        if purge:
            for p in purged_paths(state):
                if p.is_dir():
                    shutil.rmtree(p, ignore_errors=True)
                else:
                    p.unlink(missing_ok=True)
            log(f"Deleted Kafka and PostgreSQL data under {state}")
    return stopped
