"""Starting and stopping the local stack's services: one Kafka node or three, and PostgreSQL.

A start checks what the state folder already holds (its cluster size, its
auth, strangers without a pid record), chooses free ports (again, when another
process took one between the choice and the bind), starts what is not running
and waits until all answer. A failing start stops what it started and raises
one clear line with the tail of the failing service's log.

Apart from the `up`/`down`/`status` commands (local.py) so that claim.py, which
stops what a command started when the command lets go of the stack, can use
`services` and `stop_all` without importing the commands that hand out claims.
"""

import shutil
import time
from pathlib import Path

from ..clients import kafka_client
from ..core import versions
from ..core.errors import HarnessError
from . import health, interrupts, kafka_versions, local_kafka, maven, netns, ports, toxiproxy
from .local_kafka import AUTHS, CLUSTER_SIZES, START_TIMEOUT_S as KAFKA_START_TIMEOUT_S
from .local_kafka import every_node, nodes as kafka_nodes, voters as quorum_voters
from .local_postgres import LocalPostgres, find_bindir
from .local_record import bootstrap_of, is_port, known_ports, port_names, preferred, proxied as recorded_proxies, read_record, record_damage, recorded_auth, service_of, size, write_record
from .stack import Stack


def stack_from(port: dict, kafka: list, pg: LocalPostgres, auth: str = "none", proxies: bool = False,
               release: str = versions.KAFKA_VERSION) -> Stack:
    """The Stack these services make on these ports (what `up` returns and `status` shows)."""
    bootstrap = bootstrap_of(port, len(kafka), [k.host() for k in kafka], proxies)
    own = kafka[0].client_settings() if auth == "scram" else {}
    settings = kafka_client.resolve(bootstrap, own)
    if proxies:     # a broker fault asks the nodes themselves whether one is back (brokers.LocalBrokers.answers)
        kafka_client.use(bootstrap_of(port, len(kafka), [k.host() for k in kafka]), settings)
    return Stack(kind="local", bootstrap_servers=bootstrap,
                 postgres_dsn=pg.dsn(port["postgres"]) if "postgres" in port else "",
                 audit_dsn=pg.audit_dsn(port["postgres"]) if "postgres" in port else "",
                 # its superuser makes and drops each run's role (PostgreSQL 15 has no safe CREATEROLE)
                 roles_dsn=pg.admin_dsn(port["postgres"]) if "postgres" in port and pg.admin_password_file.exists()
                 else "",
                 owned=True, kafka_version=release, brokers=len(kafka),
                 pids={**{k.key: k.pid() for k in kafka}, "postgres": pg.pid()},
                 kafka_config=settings)


def node_release(kafka: list) -> str | None:
    """The release that formatted the nodes' data, as the first node that wrote one says (see
    LocalKafka.release); None when none did."""
    return next((r for k in kafka if (r := k.release())), None)


def services(state: Path, brokers: int | None = None) -> dict:
    """The stack's services by key (kafka or kafka-1..N, postgres, and toxiproxy when it has one)."""
    nodes = kafka_nodes(state, brokers or size(state))
    proxy = toxiproxy.LocalToxiproxy(state)
    extra = {"toxiproxy": proxy} if recorded_proxies(state) or proxy.pidfile.exists() else {}
    return {**{k.key: k for k in nodes}, "postgres": LocalPostgres(state), **extra}


def mark_of(svc, pg) -> str:
    """What a process of this service has among its arguments (the data folder, the node's properties file,
    Toxiproxy's config), by which a stray one without a pid record is found (`strangers`)."""
    if isinstance(svc, toxiproxy.LocalToxiproxy):
        return str(svc.config)
    return str(pg.data) if svc is pg else str(svc.props)


def key_of(svc, pg) -> str:
    """The service's key in `services` (kafka, kafka-N, postgres, toxiproxy)."""
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


def _choose_proxies(state: Path, rec: dict, nodes_run: bool, asked: bool | None, brokers: int, auth: str) -> bool:
    """Whether clients reach the nodes through Toxiproxy (toxiproxy.py): as asked, else as the stack was set
    up. The nodes' listeners depend on it: a change while a node runs is refused in one line."""
    have = recorded_proxies(state)
    want = have if asked is None else asked
    if nodes_run and want != have:
        raise HarnessError(f"the running Kafka nodes {'have' if have else 'have no'} Toxiproxy proxies in front "
                           f"of them; to {'add' if want else 'remove'} those, run `harness down` first")
    if want and brokers == 1:
        raise HarnessError("--proxies runs on the 3-broker cluster (the latency fault needs it): "
                           "`harness up --brokers 3 --proxies`")
    if want and not nodes_run and toxiproxy.find_binary() is None:
        raise HarnessError(f"--proxies: {toxiproxy.BINARY} not found (on PATH or in Go's bin folder); "
                           f"`bash .ci/install-toxiproxy.sh` builds it with go install")
    return want


# A port is chosen free, then bound by the service a second later: another stack starting at the same
# instant (a suite beside a test run, two CI jobs) can take it in between, and the service dies at
# start-up. After a failed start has stopped what it started, a port of ours that is still bound is
# someone else's: choose again. Three tries: each loser of a race picks a port the kernel has just said
# is free, so a second clash is already unlikely.
PORT_RACE_TRIES = 3


def start_with_free_ports(state: Path, owner: str, log, brokers: int, auth: str | None,
                          node_networks: bool | None = None, proxies: bool | None = None) -> tuple[Stack, list[str]]:
    """`_start_missing`, again with newly chosen ports when a service lost its port to another process
    between the choice and the bind."""
    for attempt in range(1, PORT_RACE_TRIES + 1):
        try:
            return _start_missing(state, owner, log, brokers, auth, node_networks, proxies)
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


def _tools(log, release: str) -> tuple[Path, Path]:
    """Postgres binaries and this Kafka release's jars, or one clear line about what is missing."""
    bindir = find_bindir()
    lib = maven.resolve_kafka(log, release)
    try:
        maven.resolve_tools(log)       # for the checker's DescribeProducers (checker/open_transactions.py)
    except HarnessError as e:
        log(f"Kafka's command-line tools could not be resolved ({e}); the producers holding a transaction open "
            f"will be unknown in reports")
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


def _choose_networks(state: Path, rec: dict, nodes_run: bool, asked: bool | None) -> bool:
    """Whether the Kafka nodes run in node networks of their own (netns.py): as asked, else as the stack
    was set up. A change while a node runs is refused in one line."""
    have = netns.read_record(state) is not None
    if asked is None:       # as set up; while nodes run, as they run (stack.json may be lost or damaged)
        want = have if nodes_run else bool(rec.get("node_networks"))
    else:
        want = asked
    if nodes_run and want != have:
        raise HarnessError(f"the running Kafka nodes {'run in' if have else 'do not run in'} node networks of "
                           f"their own; to {'give them' if want else 'take them out of'} those, run `harness down` "
                           f"first")
    if want and not have and (why := netns.available()):
        raise HarnessError(f"--node-networks: {why}")
    return want


def _start_missing(state: Path, owner: str, log, brokers: int = 1,
                   auth: str | None = None, node_networks: bool | None = None,
                   proxies: bool | None = None) -> tuple[Stack, list[str]]:
    """Under the lock: start the services that do not run, wait until all answer."""
    kafka, pg, proxy = kafka_nodes(state, brokers), LocalPostgres(state), toxiproxy.LocalToxiproxy(state)
    notes = []
    rec = read_record(state) or {}
    had = size(state)
    rec["brokers"] = brokers
    nodes_run = any(k.running() for k in kafka)
    auth = _choose_auth(state, kafka, nodes_run, auth)
    release = kafka_versions.chosen(node_release(kafka) or rec.get("kafka_version"),
                                    nodes_run or any(k.formatted() for k in kafka), str(state))
    rec["kafka_version"] = release
    networks = _choose_networks(state, rec, nodes_run, node_networks)
    rec["node_networks"] = networks
    proxies = _choose_proxies(state, rec, nodes_run, proxies, brokers, auth)
    rec["proxies"] = proxies
    svcs = [*kafka, pg, *([proxy] if proxies else [])]
    names = port_names(brokers, proxies)
    running = {key_of(s, pg): s.running() for s in svcs}
    layout = netns.read_record(state) if networks else None
    cut = [k.node_id for k in kafka if layout and running[k.key] and netns.rules_in(layout, k.node_id)]
    if cut:         # it would never answer as a whole: say why at once instead of waiting out the start timeout
        raise HarnessError(f"Kafka node {', '.join(map(str, cut))} is cut off by network rules (a network fault "
                           f"under way, or one a killed harness left): `harness down` removes them")
    api = proxy.api() if proxies and running["toxiproxy"] else None
    delayed = api.delayed_nodes() if api is not None else []
    if delayed:     # every run on it would be slowed, and judged, without being told
        raise HarnessError(f"Kafka node {', '.join(map(str, delayed))} is delayed by Toxiproxy (a latency fault "
                           f"under way, or one a killed harness left): `harness down` removes it")
    if not all(running.values()):
        bindir, lib = _tools(log, release)      # fail early, before starting anything
    damage = record_damage(state, any(running.values())) if had == brokers else None
    if damage:
        what = "rebuilt it from the running services" if any(running.values()) else "starting fresh"
        notes.append(f"{damage}; {what}")
    for svc in svcs:
        if not svc.running() and (strays := svc.strangers(mark_of(svc, pg))):
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

    started, made_networks = [], False
    try:
        if not running["postgres"]:
            log(f"Starting PostgreSQL on 127.0.0.1:{port['postgres']} ...")
            started.append("postgres")
            with interrupts.step():          # a signal waits for the pid record: without it nothing could stop it
                pg.start(bindir, port["postgres"], owner)
        for n in pg.ensure_roles(port["postgres"]):     # set up, or put right in a folder of an older harness
            log(n)
            notes.append(n)
        if not any(running[k.key] for k in kafka):
            if networks:
                log("Making the Kafka nodes' own networks (network namespaces) ...")
                made_networks = True
                with interrupts.step():
                    netns.make(state, brokers)
            elif netns.read_record(state) is not None:
                netns.remove(state)         # left by a stack that had them
        if not proxies and proxy.running():
            proxy.stop()                    # the stack no longer has proxies (`harness up --no-proxies`)
        if proxies and running["toxiproxy"] and not all(running[k.key] for k in kafka):
            proxy.stop()                    # a node starts again, perhaps on other ports: its proxy must follow
            running["toxiproxy"] = None
        if proxies and not running["toxiproxy"]:
            log(f"Starting Toxiproxy on 127.0.0.1:{port['toxiproxy']} (a proxy per Kafka node) ...")
            started.append("toxiproxy")
            with interrupts.step():
                proxy.start(port["toxiproxy"], {k.node_id: (port[f"proxy-{k.node_id}"],
                                                            f"{k.host()}:{port[f'proxied-{k.node_id}']}")
                                                for k in kafka}, owner)
        if brokers == 1 and not running["kafka"]:
            how = f" (SASL_PLAINTEXT {local_kafka.SCRAM_MECHANISM})" if auth == "scram" else ""
            log(f"Starting Kafka {release} on {kafka[0].host()}:{port['kafka']}{how} ...")
            started.append("kafka")
            with interrupts.step():
                kafka[0].start(lib, port["kafka"], port["controller"], owner, auth=auth, release=release)
        elif brokers > 1:
            quorum = quorum_voters([port[f"controller-{i}"] for i in range(1, brokers + 1)], [k.host() for k in kafka])
            cluster_id = next((c for k in kafka if (c := k.cluster_id())), None) or _new_cluster_id()
            for k in kafka:
                if not running[k.key]:
                    log(f"Starting Kafka {release} node {k.node_id} of {brokers} on "
                        f"{k.host()}:{port[k.key]} ...")
                    started.append(k.key)
                    with interrupts.step():
                        k.start(lib, port[k.key], port[f"controller-{k.node_id}"], owner, auth=auth, voters=quorum,
                                cluster_id=cluster_id, proxied=proxied_ports(port, k.node_id) if proxies else None,
                                release=release)
        stack = stack_from(port, kafka, pg, auth, proxies, release)
        _wait_ready(stack, kafka, pg, proxy if proxies else None)
    except BaseException:
        stop_all([s for s in svcs if key_of(s, pg) in started])
        if made_networks:
            try:
                netns.remove(state)
            except HarnessError as e:
                log(f"warning: {e}")
        raise
    stack.pids = {**{k.key: k.pid() for k in kafka}, "postgres": pg.pid(), **({"toxiproxy": proxy.pid()} if proxies else {})}
    stack.healthy = True
    stack.postgres_version = health.postgres_version(stack.postgres_dsn)
    stack.notes = notes + ([] if started else ["reused the running stack"])
    return stack, started


def proxied_ports(port: dict, node: int) -> tuple[int, int]:
    """(the node's proxied listener port, its proxy's port), for LocalKafka.start."""
    return port[f"proxied-{node}"], port[f"proxy-{node}"]


def _new_cluster_id() -> str:
    from .local_kafka import _cluster_id
    return _cluster_id()


def stop_all(svcs: list) -> list:
    """Stop services at once (each Kafka node may take its TERM grace): the results, in order."""
    from concurrent.futures import ThreadPoolExecutor
    if not svcs:
        return []
    with ThreadPoolExecutor(max_workers=len(svcs)) as ex:
        return list(ex.map(lambda s: s.stop(), svcs))


def _wait_ready(stack: Stack, kafka: list, pg: LocalPostgres, proxy=None) -> None:
    err = health.postgres_probe(stack.postgres_dsn, 30)
    if err:
        raise HarnessError(f"PostgreSQL did not accept a connection: {err}", pg.log_tail())
    if proxy is not None:
        _wait_proxy(proxy, stack)
    deadline = time.monotonic() + KAFKA_START_TIMEOUT_S
    while time.monotonic() < deadline:
        dead = [k for k in kafka if not k.pid()]
        if dead:
            from .start_failure import kafka_cause
            why = kafka_cause(dead[0])
            if why:             # the cause in one line; its stack trace stays in the node's log
                raise HarnessError(f"{dead[0].name} exited during start-up: {why}")
            raise HarnessError(f"{dead[0].name} exited during start-up", dead[0].log_tail())
        err = health.kafka_probe(stack.bootstrap_servers, min(10, deadline - time.monotonic()), brokers=len(kafka),
                                 cluster_id=kafka[0].cluster_id())
        if err is None:
            return
    raise HarnessError(f"Kafka did not become ready within {KAFKA_START_TIMEOUT_S} s: {err}", kafka[0].log_tail())


def _wait_proxy(proxy, stack: Stack) -> None:
    """Toxiproxy answers on its API with every node's proxy (a port it could not bind ends the server)."""
    deadline = time.monotonic() + toxiproxy.START_TIMEOUT_S
    while time.monotonic() < deadline:
        if proxy.pid() is None:
            raise HarnessError("Toxiproxy exited during start-up", proxy.log_tail())
        api = proxy.api()
        try:
            if api is not None and len(api.proxies()) >= stack.brokers:
                return
        except HarnessError:
            pass                            # not answering yet
        time.sleep(0.1)
    raise HarnessError(f"Toxiproxy did not answer within {toxiproxy.START_TIMEOUT_S} s", proxy.log_tail())
