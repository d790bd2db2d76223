"""Local KRaft Kafka nodes (combined broker + controller) as processes: one node, or a cluster of three.

Started with `java -cp <jars> kafka.Kafka server.properties` after
`kafka.tools.StorageTool format`, from the jars that `maven.resolve_kafka`
brings. Settings are tuned for crash tests rather than production: a killed
consumer must be back within a second and an aborted transaction must not
linger (see `SERVER_SETTINGS`). Logs go to `<state>/kafka/logs/server.log`.

The broker is started as the leader of a new session, and `kafka/kafka.pid`
holds its pid record (see `pidrecord`): the JVM is only ever signalled when its
pid, start time and our own `server.properties` path on its command line all
match, and then as a whole process group, because we created that group.

`harness up --brokers 3` starts three nodes, `<state>/kafka-1` .. `kafka-3`,
each with its own data, logs, pid record and two ports on 127.0.0.1. Each node
is broker AND controller (one quorum of three voters), as in
compose/docker-compose.cluster.yml. Why combined rather than separate
controllers: on two cores and 24 GiB, three JVMs (1 GiB heap at most each)
cost far less CPU at start-up and at rest than six, and killing one node then
tests what a production-sized failure does to both roles at once: a majority of
the quorum survives any single node, exactly as a majority of the replicas
does. Replication factor 3 and min.insync.replicas=2 apply to the harness's
topics (payments.create_topic) and to the internal ones (`CLUSTER_SETTINGS`),
so acks=all survives one dead or paused node.

With `auth="scram"` (harness up --auth scram) the only listener clients use is
SASL_PLAINTEXT with SCRAM-SHA-512; the broker talks to itself through it too
(transaction markers), as the user `harness`, created in the metadata at
format time (`--add-scram`; KRaft has no ZooKeeper to hold it). The controller
listener takes SASL/PLAIN logins of the user `controller` only (kafka_auth.py
says why not SCRAM). The passwords are random and live in
`<state>/client.properties` and `<state>/kafka-controller.properties` (0600),
and in server.properties (0600); the format command takes the SCRAM one from a
0600 argument file (`java @file`), so no password is ever on a command line.
A cluster of three has the same listeners on every node, with the same
users and passwords (the files are the state folder's, not a node's).

A node's folder (data, logs, its settings) is its owner's only: folders 0700,
files 0600, whatever the auth (`make_private`, `safefile.PRIVATE_UMASK`).
"""

import os
import signal
import subprocess
import uuid
from pathlib import Path

from ..core import safefile
from ..core.errors import HarnessError
from . import kafka_auth, netns, pidrecord
from .kafka_auth import SCRAM_MECHANISM, SCRAM_USER, write_private as _write_private

LOOPBACK = "127.0.0.1"

AUTHS = ("none", "scram")
DEFAULT_AUTH = "scram"        # a new stack's; a stack set up with --auth none keeps it (recorded_auth)
CLIENT_PROPERTIES = kafka_auth.CLIENT_FILE
RELEASE_FILE = "kafka_version"        # beside a node's data: the release that formatted it (--kafka-version)

SERVER_SETTINGS = {
    # A single voter that is both broker and controller.
    "process.roles": "broker,controller",
    "node.id": "1",
    "controller.listener.names": "CONTROLLER",
    "inter.broker.listener.name": "PLAINTEXT",
    "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
    "auto.create.topics.enable": "false",
    # One node: every internal topic has replication factor 1 and few partitions (fast start).
    "offsets.topic.replication.factor": "1",
    "offsets.topic.num.partitions": "4",
    "transaction.state.log.replication.factor": "1",
    "transaction.state.log.min.isr": "1",
    "transaction.state.log.num.partitions": "4",
    "share.coordinator.state.topic.replication.factor": "1",
    "share.coordinator.state.topic.min.isr": "1",
    "default.replication.factor": "1",
    "min.insync.replicas": "1",
    # Crash tests restart consumers constantly: no initial rebalance delay, short sessions allowed.
    "group.initial.rebalance.delay.ms": "0",
    "group.min.session.timeout.ms": "500",
    "group.consumer.min.session.timeout.ms": "1000",
    "group.consumer.session.timeout.ms": "5000",
    "group.consumer.heartbeat.interval.ms": "500",
    "group.consumer.min.heartbeat.interval.ms": "500",
    # KIP-1071 streams groups (eos-streams --streams-protocol streams) likewise: the broker's floors are 45 s and 5 s.
    "group.streams.min.session.timeout.ms": "1000", "group.streams.session.timeout.ms": "5000",
    "group.streams.min.heartbeat.interval.ms": "500", "group.streams.heartbeat.interval.ms": "500",
    "group.streams.initial.rebalance.delay.ms": "0",
    # Share groups (KIP-932; share.version is finalized at format on 4.2+): a group may set record locks and
    # sessions as short as a crash test needs (the broker's floors are 15 s and 45 s); the groups' defaults stay
    # Kafka's own (30 s locks, 45 s sessions), and the queues experiments set theirs with the admin API.
    "group.share.min.record.lock.duration.ms": "1000",
    "group.share.min.session.timeout.ms": "1000",
    "group.share.min.heartbeat.interval.ms": "500",
    "share.coordinator.state.topic.num.partitions": "4",
    # Dead-letter topics of share groups (KIP-1191, Kafka 4.4): a group's must start with this broker prefix
    # (Kafka's default is `dlq.`); a run's is one of its own `harness.` topics (naming.RunNames.dlq_topic).
    "errors.deadletterqueue.topic.name.prefix": "harness.",
    # Offset commits are appended by the group coordinator after a 5 ms linger by default: every
    # synchronous commit would wait for it. Append at once instead (commits per record are our workload).
    "group.coordinator.append.linger.ms": "0",
    # Abort timed-out transactions within about a second instead of ten.
    "transaction.abort.timed.out.transaction.cleanup.interval.ms": "1000",
    "transaction.max.timeout.ms": "900000",
    "num.network.threads": "2",
    "num.io.threads": "4",
    "log.retention.hours": "168",
}

# A cluster of three: every internal topic on all three nodes, two of them in sync for acks=all.
CLUSTER_SETTINGS = {
    "offsets.topic.replication.factor": "3",
    "transaction.state.log.replication.factor": "3",
    "transaction.state.log.min.isr": "2",
    "share.coordinator.state.topic.replication.factor": "3",
    "share.coordinator.state.topic.min.isr": "2",
    "default.replication.factor": "3",
    "min.insync.replicas": "2",
    "unclean.leader.election.enable": "false",
    # A killed node is noticed by the controller after this (default 9 s), and its partitions move.
    "broker.session.timeout.ms": "4000",
    "broker.heartbeat.interval.ms": "500",
    # Three JVMs share two cores: fewer threads each.
    "num.io.threads": "2",
    "num.replica.fetchers": "1",
    "background.threads": "4",
}
CLUSTER_SIZES = (1, 3)

LOG4J2 = """\
status = warn
name = harness-kafka
appender.file.type = File
appender.file.name = FILE
appender.file.fileName = ${sys:kafka.logs.dir}/server.log
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = INFO
rootLogger.appenderRef.file.ref = FILE
logger.request.name = kafka.request.logger
logger.request.level = WARN
logger.state.name = state.change.logger
logger.state.level = WARN
"""

# C1 only: over the first default suite after `up` the broker used 32.7-33.2 CPU-s against 43.5-47.6 with C2;
# a broker kept up and warm pays instead (a second suite: 31.7 against 26.6). docs/changelog.md, Numbers, 2026-12-04.
JVM_OPTS = ["-Xms512m", "-Xmx1g", "-XX:+UseG1GC", "-XX:MaxGCPauseMillis=20", "-XX:TieredStopAtLevel=1",
            "-Djava.awt.headless=true", "-XX:+ExitOnOutOfMemoryError"]
# A cold JVM on two busy cores takes 5-15 s to serve metadata; a broker that is not up after this is broken.
START_TIMEOUT_S = 90


class LocalKafka(pidrecord.RecordedService):
    """One Kafka node: the single broker (`node` None, folder `kafka`) or node N of a cluster (`kafka-N`)."""

    group = True        # started as the leader of a new session: stopped as a whole group
    program = "java"

    def __init__(self, state: Path, node: int | None = None):
        self.node = node
        self.node_id = node or 1
        self.key = "kafka" if node is None else f"kafka-{node}"     # its name in status, pids and reports
        self.name = "Kafka" if node is None else f"Kafka node {node}"
        self.home = state / self.key
        self.data = self.home / "data"
        self.logs = self.home / "logs"
        self.props = self.home / "server.properties"
        self.pidfile = self.home / "kafka.pid"
        self.client_file = state / CLIENT_PROPERTIES
        self.proc: subprocess.Popen | None = None       # the process this object started, if any

    def marks(self) -> list[str]:
        return ["kafka.Kafka", str(self.props)]

    def log_tail(self, lines: int = 20) -> str:
        out = []
        for f in (self.logs / "server.log", self.home / "stdout.log"):
            out += safefile.read_tail(f).splitlines()[-lines:]
        return "\n".join(out[-lines:])

    def log_sizes(self) -> tuple:
        """The sizes of its logs: they grow while the node is at work."""
        sizes = []
        for f in (self.logs / "server.log", self.home / "stdout.log"):
            try:
                sizes.append(f.stat().st_size)
            except OSError:
                sizes.append(None)
        return tuple(sizes)

    def network(self) -> "netns.Layout | None":
        """The node networks this node runs in (harness up --node-networks), or None: it binds 127.0.0.1."""
        layout = netns.read_record(self.home.parent)
        return layout if layout is not None and self.node_id <= layout.nodes else None

    def host(self) -> str:
        """The address the node listens on and advertises: its node network's, else 127.0.0.1."""
        layout = self.network()
        return layout.address(self.node_id) if layout else LOOPBACK

    def write_config(self, port: int, controller_port: int, auth: str = "none", voters: str | None = None,
                     proxied: tuple[int, int] | None = None) -> None:
        """`voters`: the cluster's controller.quorum.voters (None: this node alone). `proxied`: (port, proxy
        port): a second client listener on `port` that advertises the node's Toxiproxy proxy on 127.0.0.1
        (stack/toxiproxy.py), so clients that bootstrap through the proxies stay behind them."""
        settings = dict(SERVER_SETTINGS)
        if voters:
            settings.update(CLUSTER_SETTINGS)
        host = self.host()
        settings.update({
            "node.id": str(self.node_id),
            "listeners": f"PLAINTEXT://{host}:{port},CONTROLLER://{host}:{controller_port}",
            "advertised.listeners": f"PLAINTEXT://{host}:{port}",
            "controller.quorum.voters": voters or f"{self.node_id}@{host}:{controller_port}",
            "log.dirs": str(self.data),
        })
        if auth == "scram":
            settings.update(kafka_auth.scram_settings(port, controller_port, self.scram_password(),
                                                      kafka_auth.controller_password(self.home.parent), host))
        if proxied is not None:         # the same protocol and login as the node's own client listener
            protocol = "SASL_PLAINTEXT" if auth == "scram" else "PLAINTEXT"
            settings.update({
                "listeners": f"{settings['listeners']},PROXIED://{host}:{proxied[0]}",
                "advertised.listeners": f"{settings['advertised.listeners']},PROXIED://{LOOPBACK}:{proxied[1]}",
                "listener.security.protocol.map": f"{settings['listener.security.protocol.map']},PROXIED:{protocol}",
            })
            if auth == "scram":
                jaas = f"listener.name.sasl_plaintext.{SCRAM_MECHANISM.lower()}.sasl.jaas.config"
                settings[jaas.replace(".sasl_plaintext.", ".proxied.", 1)] = settings[jaas]
        _write_private(self.props, "".join(f"{k}={v}\n" for k, v in settings.items()))
        safefile.write_text(self.home / "log4j2.properties", LOG4J2, safefile.PRIVATE)

    def port_names(self, port: int, controller_port: int, proxied: tuple[int, int] | None = None) -> dict:
        """Its ports under the stack's names for them (local_record.port_names), for its pid record: so
        the running node says which ports are its own even when stack.json is lost."""
        n = "" if self.node is None else f"-{self.node}"
        return {f"kafka{n}": port, f"controller{n}": controller_port,
                **({f"proxied{n}": proxied[0]} if proxied else {})}

    def configured_auth(self) -> str:
        """"scram" when server.properties has the SASL listener, else "none" (also without a config)."""
        try:
            return "scram" if "SASL_PLAINTEXT://" in self.props.read_text() else "none"
        except OSError:
            return "none"

    def scram_password(self) -> str:
        """The SCRAM user's password from client.properties, written (0600) with a new one if missing."""
        return kafka_auth.client_password(self.client_file.parent)

    def client_settings(self) -> dict:
        """The settings in client.properties ({} when there is none: a plaintext stack)."""
        from ..clients.kafka_client import load_file
        return load_file(self.client_file) if self.client_file.exists() else {}

    def _java(self, lib: Path, main: str, *args: str) -> list[str]:
        return ["java", *JVM_OPTS, f"-Dlog4j2.configurationFile={self.home / 'log4j2.properties'}",
                f"-Dkafka.logs.dir={self.logs}", "-cp", f"{lib}/*", main, *args]

    def cluster_id(self) -> str | None:
        """The cluster id this node's storage was formatted with (None: not formatted)."""
        try:
            for line in (self.data / "meta.properties").read_text().splitlines():
                if line.startswith("cluster.id="):
                    return line.partition("=")[2].strip()
        except OSError:
            pass
        return None

    def formatted(self) -> bool:
        return (self.data / "meta.properties").exists()

    def release(self) -> str | None:
        """The Kafka release that formatted this node's data (written beside it at format time); None when
        not formatted, or formatted by a harness that wrote none (it ran only the pinned release)."""
        from .kafka_versions import RELEASE
        got = safefile.read_tail(self.home / RELEASE_FILE, 64).strip()     # never a FIFO's wait, never a link
        return got if RELEASE.fullmatch(got) else None

    def record_release(self, release: str) -> None:
        """Name `release` as the one this node's data now runs on (a rolling upgrade restarted it there)."""
        safefile.write_text(self.home / RELEASE_FILE, release + "\n", safefile.PRIVATE)

    def format(self, lib: Path, auth: str = "none", cluster_id: str | None = None, release: str | None = None) -> None:
        if self.formatted():
            return
        safefile.make_folder(self.data, safefile.PRIVATE_FOLDER)
        cluster_id = cluster_id or _cluster_id()
        args = ["kafka.tools.StorageTool", "format", "-t", cluster_id, "-c", str(self.props), "--ignore-formatted"]
        if auth == "scram":
            args += ["--add-scram", f"{SCRAM_MECHANISM}=[name={SCRAM_USER},password={self.scram_password()}]"]
        # The arguments go in a 0600 file the java launcher expands (`@file`): the password is not in argv.
        argfile = self.home / "format.args"
        _write_private(argfile, "".join(_argfile_quote(a) + "\n" for a in args))
        cmd = ["java", "-Xmx256m", "-XX:TieredStopAtLevel=1",      # C1: 0.61 CPU-s a format, against 0.96
               f"-Dlog4j2.configurationFile={self.home / 'log4j2.properties'}", f"-Dkafka.logs.dir={self.logs}",
               "-cp", f"{lib}/*", f"@{argfile}"]
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120, umask=safefile.PRIVATE_UMASK)
        finally:
            argfile.unlink(missing_ok=True)
        if proc.returncode != 0:
            from ..clients.kafka_client import scrub
            raise HarnessError("Kafka storage format failed",
                               scrub((proc.stdout + proc.stderr)[-2000:], self.client_settings()))
        if release:
            safefile.write_text(self.home / RELEASE_FILE, release + "\n", safefile.PRIVATE)

    def start(self, lib: Path, port: int, controller_port: int, owner: str, auth: str = "none",
              voters: str | None = None, cluster_id: str | None = None, proxied: tuple[int, int] | None = None,
              release: str | None = None) -> int:
        """Start the node (formatting its storage first if new) and write its pid record at once.

        A broker fault's restart comes through here too, so a restarted node is recorded like the first start."""
        self.make_private()
        self.write_config(port, controller_port, auth, voters=voters, proxied=proxied)
        self.format(lib, auth, cluster_id=cluster_id, release=release)
        out_fd = os.open(self.home / "stdout.log", os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW, safefile.PRIVATE)
        with open(out_fd, "ab") as out:
            java = self._java(lib, "kafka.Kafka", str(self.props))
            layout = self.network()     # `ip netns exec` enters the node's namespace, then execs java (same pid)
            proc = subprocess.Popen(netns.in_namespace(layout, self.node_id, java) if layout else java, stdout=out,
                                    stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                    start_new_session=True, cwd=self.home, umask=safefile.PRIVATE_UMASK)
        self.proc = proc        # a broker fault that restarts the node reads its exit status from it
        try:
            rec = pidrecord.capture(proc.pid, self.marks(), group=self.group, owner=owner,
                                    ports=self.port_names(port, controller_port, proxied))
        except ProcessLookupError:
            raise HarnessError(f"{self.name} exited at once", self.log_tail())
        pidrecord.write(self.pidfile, rec)
        return proc.pid

    def make_private(self) -> None:
        """The node's folder, its data and its logs: 0700, so no other local user reads a record, an offset or
        a log line (its files are made under safefile.PRIVATE_UMASK). A folder of an older harness is narrowed too."""
        for d in (self.home, self.data, self.logs):
            safefile.make_folder(d, safefile.PRIVATE_FOLDER)
            if not d.is_symlink():
                os.chmod(d, safefile.PRIVATE_FOLDER)

    def stop(self) -> tuple[bool, str | None]:
        # A node a broker-pause left stopped (the harness died mid-fault) must run again to act on TERM.
        self.signal(signal.SIGCONT)
        # Kafka shuts down cleanly on TERM in a few seconds; KILL after that is safe for a test broker.
        return self.stop_ours(grace=20.0)

    def signal(self, sig: signal.Signals) -> int | None:
        """Send `sig` to this node's process group if its pid record is verified; the pid, or None."""
        rec = self.running()
        if rec is None:
            return None
        try:
            os.killpg(rec.pid, sig) if rec.group else os.kill(rec.pid, sig)
        except ProcessLookupError:
            return None
        return rec.pid


def voters(controller_ports: list[int], hosts: list[str] | None = None) -> str:
    """controller.quorum.voters for nodes 1..N on these controller ports (and hosts: 127.0.0.1 without)."""
    hosts = hosts or [LOOPBACK] * len(controller_ports)
    return ",".join(f"{i}@{h}:{p}" for i, (h, p) in enumerate(zip(hosts, controller_ports), 1))


def nodes(state: Path, brokers: int) -> list[LocalKafka]:
    """The Kafka nodes of a stack of this size."""
    return [LocalKafka(state)] if brokers == 1 else [LocalKafka(state, n) for n in range(1, brokers + 1)]


def every_node(state: Path) -> list[LocalKafka]:
    """Every Kafka node folder this state folder holds, whatever size it was started with (for `down`)."""
    found = [LocalKafka(state)]
    for d in sorted(state.glob("kafka-*")):
        if d.is_dir() and d.name[6:].isdigit():
            found.append(LocalKafka(state, int(d.name[6:])))
    return found


def _argfile_quote(arg: str) -> str:
    """One argument of a java @file: double-quoted, backslashes and quotes escaped."""
    return '"' + arg.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _cluster_id() -> str:
    """A random cluster id in Kafka's format (URL-safe base64 of 16 bytes).

    One in 64 such ids starts with '-', which StorageTool's argument parser takes for an
    option ("argument --cluster-id/-t: expected one argument"); Kafka's own Uuid.randomUuid
    draws again in that case, and so do we.
    """
    import base64
    while True:
        cid = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not cid.startswith("-"):
            return cid

