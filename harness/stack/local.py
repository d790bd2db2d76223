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
the one-node stack and the three-node cluster alike (not behind --proxies).

This module holds the commands; `stack.json` is read and written by
local_record.py, and the services are started and stopped by
local_services.py.
"""

import os
import shutil
from pathlib import Path

import psycopg.conninfo

from ..core.errors import HarnessError
from ..core.paths import state_dir
from . import health, interrupts, leases, marker, netns, toxiproxy
from .claim import Claim
from .local_kafka import every_node, nodes as kafka_nodes
from .local_postgres import DATABASE, USER, LocalPostgres
from .local_record import bootstrap_of, kafka_release, known_ports, port_names, proxied, read_record, record_damage, record_path, recorded_auth, size
from .local_services import check_size, key_of, mark_of, node_release, services, stack_from, start_with_free_ports, stop_all
from .stack import Stack
# Re-exported for cli.py only (its home is local_record.py).


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
    return (bootstrap.strip() == bootstrap_of(port, len(kafka), [k.host() for k in kafka], proxied(state))
            and d.get("host") in ("127.0.0.1", "localhost") and str(d.get("port")) == str(port.get("postgres"))
            and d.get("user", USER) == USER and d.get("dbname", DATABASE) == DATABASE)


def status(check: bool = True) -> Stack | None:
    """The local stack as the pid records show it, or None when nothing of it runs or is recorded."""
    state = state_dir()
    leases.check_readable(state)
    rec = read_record(state)
    if rec is not None and rec.get("kind") not in (None, "local"):
        return None
    kafka, pg, proxy = kafka_nodes(state, size(state)), LocalPostgres(state), toxiproxy.LocalToxiproxy(state)
    proxies = proxied(state)
    svcs = [*kafka, pg, *([proxy] if proxies else [])]
    running = {key_of(s, pg): s.running() for s in svcs}
    strays = {svc.name: svc.strangers(mark_of(svc, pg)) for svc in svcs if running[key_of(svc, pg)] is None}
    if not any(running.values()) and not any(strays.values()):
        return None
    port = known_ports(state, kafka, pg)
    stack = stack_from(port, kafka, pg, recorded_auth(state), proxies, node_release(kafka) or kafka_release(state))
    if proxies:
        stack.pids["toxiproxy"] = proxy.pid()
    damage = record_damage(state, any(running.values()))
    if damage:
        stack.notes.append(f"{damage}; ports are taken from the running services' pid records")
    for name, pids in strays.items():
        stack.notes.append(f"{name} is not running" if not pids else
                           f"a {name} from this folder runs as pid {', '.join(map(str, pids))} but no valid pid "
                           f"record names it: the harness will not touch it")
    if check:
        stack.healthy = all(running.values()) and set(port_names(len(kafka), proxies)) <= set(port) \
            and health.kafka_probe(stack.bootstrap_servers, 10, brokers=len(kafka),
                                    cluster_id=kafka[0].cluster_id()) is None \
            and health.postgres_probe(stack.postgres_dsn, 5) is None
        stack.postgres_version = health.postgres_version(stack.postgres_dsn) if stack.healthy else None
    layout = netns.read_record(state)
    if layout is not None:
        stack.notes.append(f"Kafka nodes in networks of their own ({netns.NET}.{layout.subnet}.0/24)")
        if check:
            try:
                cut = [n for n in range(1, layout.nodes + 1) if netns.rules_in(layout, n)]
            except HarnessError as e:
                cut, why = [], str(e)
                stack.notes.append(f"the nodes' network rules could not be read: {why}")
            if cut:
                stack.notes.append(f"node {', '.join(map(str, cut))} is cut off by network rules (a network fault "
                                   f"under way, or one a killed harness left: `harness down` removes them)")
    if proxies:
        stack.notes.append("Kafka clients go through Toxiproxy (a proxy per node, for the latency fault)")
        api = proxy.api() if check else None
        if api is not None:
            try:
                toxic = api.toxics()
            except HarnessError as e:
                toxic = {}
                stack.notes.append(f"Toxiproxy's toxics could not be read: {e}")
            if toxic:
                stack.notes.append(f"{', '.join(sorted(toxic))} delayed by Toxiproxy (a latency fault under way, or "
                                   f"one a killed harness left: `harness down` removes it)")
            try:
                now, recorded = api.upstreams(), proxy.upstreams()
            except HarnessError as e:
                now, recorded = {}, {}
                stack.notes.append(f"where Toxiproxy's proxies forward could not be read: {e}")
            elsewhere = sorted(n for n in recorded if now.get(n, recorded[n]) != recorded[n])
            if elsewhere:
                stack.notes.append(f"the proxies of node {', '.join(map(str, elsewhere))} forward to a protocol "
                                   f"proxy, not to the node (a protocol fault under way, or one a killed harness "
                                   f"left: the next protocol fault or `harness down` points them back)")
    if leases.held(state):
        stack.notes.append("held by `harness up` until `harness down`")
    users = leases.live(state, drop_stale=False)
    if users:
        stack.notes.append("in use by " + ", ".join(f"pid {u.pid}" for u in users))
    return stack


def up(log=print, hold: bool = False, command: str = "", brokers: int | None = None,
       auth: str | None = None, node_networks: bool | None = None,
       proxies: bool | None = None) -> tuple[Stack, Claim | None]:
    """Start what is not running and wait until all answer.

    With `hold` (harness up) the stack is kept until `harness down` and no lease is taken;
    otherwise the caller gets a Claim and must `release()` it. `brokers` (1 or 3) is the cluster
    size; None keeps the size this state folder remembers (1 for a new one). `auth` ("none",
    "scram") is how Kafka's clients authenticate; None keeps what the stack was formatted with.
    `node_networks`: each Kafka node in a network namespace of its own (netns.py), for network
    faults; None keeps what the stack was set up with. `proxies`: Toxiproxy in front of each node
    (toxiproxy.py), for the latency fault; None keeps what the stack was set up with.
    """
    state = state_dir()
    leases.prepare(state)
    # what `down --purge` looks for before it deletes anything; refused in a folder that already holds
    # names purge would delete (a project's own kafka/ or postgres/), so purge deletes only ours
    marker.mark(state, in_the_way=[p for p in purged_paths(state) if os.path.lexists(p)])
    rec = read_record(state) or {}
    if rec.get("kind") not in (None, "local"):
        raise HarnessError(f"{state} holds a {rec.get('kind')} stack; run `harness down` first")

    # Ctrl-C, SIGTERM or SIGHUP: what was started is stopped, unless the hold is written (see interrupts).
    with leases.locked(state, log=log), interrupts.handled():
        n = check_size(state, brokers)
        claim = None if hold else Claim(state, leases.take(state, command))
        started = []
        try:
            stack, started = start_with_free_ports(state, "user" if hold else "command", log, n, auth,
                                                   node_networks, proxies)
            if hold:
                with interrupts.step(final=True):
                    leases.hold(state)
                    for svc in services(state, n).values():
                        svc.set_owner("user")
        except BaseException:
            if claim is not None:
                leases.give_back(claim.lease)
            if hold and started and not leases.held(state):     # interrupted between the start and the hold
                stop_all([svc for key, svc in services(state, n).items() if key in started])
                if not any(k.running() for k in kafka_nodes(state, n)):
                    try:
                        netns.remove(state)
                    except HarnessError as e:
                        log(f"warning: {e}")
            raise
        if not hold:
            claim.started = started
    return stack, claim


def purged_paths(state: Path) -> list[Path]:
    """What `down --purge` deletes in a state folder (and what `up` must find absent in a folder it
    marks for the first time, so that purge never deletes what the harness did not make)."""
    from .shellenv import PGPASS_NAME       # the copy of the password `harness env` keeps
    from .kafka_auth import CONTROLLER_FILE
    from .shell_user import FILE as SHELL_FILE      # `harness env`'s read-only Kafka login
    kafka, pg = every_node(state), LocalPostgres(state)
    proxy = toxiproxy.LocalToxiproxy(state)         # its files only: a folder of that name may predate us
    return [*(k.home for k in kafka), pg.home, *proxy.files(), pg.password_file, pg.admin_password_file,
            pg.audit_password_file, kafka[0].client_file, state / CONTROLLER_FILE, state / PGPASS_NAME, state / SHELL_FILE,
            record_path(state)]


def down(purge: bool = False, log=print) -> list[str]:
    """`harness down`: stop every service this state folder owns; return what was stopped."""
    state = state_dir()
    leases.check_readable(state)
    if not state.is_dir():
        return []
    if purge and (why := marker.why_not_marked(state)):
        raise HarnessError(f"refusing to purge {state}: {why}; nothing was stopped or deleted")
    kafka, pg = every_node(state), LocalPostgres(state)
    proxy = toxiproxy.LocalToxiproxy(state)         # with it go the toxics a killed harness left
    stopped = []
    with leases.locked(state, log=log):
        users = leases.live(state)
        if users:
            log(f"warning: stopping a stack that {len(users)} running command(s) still use "
                f"(pid {', '.join(str(u.pid) for u in users)}); they will fail")
        for group in (kafka, [proxy], [pg]):   # the Kafka nodes together (each may take its grace), then the rest
            for svc in group:
                if svc.running():
                    log(f"Stopping {svc.name} ...")
            for ok, note in stop_all(group):
                if ok:
                    stopped.append(note)
                elif note:
                    log(note)
            if group is kafka:
                try:
                    if netns.remove(state):          # the nodes' own networks, with every rule in them
                        log("Removed the Kafka nodes' own networks")
                except HarnessError as e:
                    log(f"warning: {e}")
        leases.unhold(state)
        if purge:
            for p in purged_paths(state):
                if p.parent != state and p.parent.is_symlink():
                    continue                # a planted link: what it points to is not ours to delete
                if p.is_dir():
                    shutil.rmtree(p, ignore_errors=True)
                else:
                    p.unlink(missing_ok=True)
            try:
                toxiproxy.LocalToxiproxy(state).home.rmdir()       # only when nothing else is in it
            except OSError:
                pass
            log(f"Deleted Kafka and PostgreSQL data under {state}")
    return stopped
