"""delay-request, fail-request, duplicate-request: faults inside Kafka's protocol, on one kind of request.

Jepsen's worst Kafka transaction bug (KAFKA-17754) needs one request held
back, an EndTxn or a Produce, while the client times out, aborts and starts
its next transaction; when the late request lands, the broker applies it to
the wrong transaction. Toxiproxy (the `latency` fault) delays every byte of a
node's connections; these faults touch only the requests of the API they
name (by API key, and optionally node and client id), through the protocol
proxy (faults/protocol_proxy.py):

- `delay-request:api=EndTxn,ms=...`: hold matching requests, then forward them,
  even after their client closed its connection;
- `fail-request:api=EndTxn,error=...,when=before|after`: answer in the broker's
  place with that error, without forwarding (the broker never saw it: an
  honest "failed") or after forwarding (the broker applied it, the client
  hears an error: an honest "unknown");
- `duplicate-request:api=Produce`: forward a request twice (what an
  idempotent producer's sequence numbers must absorb).

They need the 3-node local cluster behind its proxies (`harness up --brokers 3
--proxies`): for the run, each node's Toxiproxy proxy forwards to the
protocol proxy, which forwards to the node, so the addresses the nodes
advertise (their Toxiproxy proxies') stay right. At the run's end (done,
Ctrl-C, an error) the proxies forward to the nodes again and the protocol
proxy stops; it runs inside the harness, so a killed harness takes it along,
and the next protocol fault's check (or `harness down`, which restarts
Toxiproxy from its configuration) points the proxies back at the nodes.
Choices (`rate`) are drawn from the run's seed. Each request touched is a
row of the report's faults (API, correlation id, client id, node, delay or
error) and a mark on the timeline, read from the proxy's own log
(`protocol-proxy.jsonl` in the run folder).
"""

from __future__ import annotations

from pathlib import Path

from ..core.errors import HarnessError
from ..runtime import crashlog
from . import kafka_wire as wire
from .base import Fault, number
from .protocol_proxy import ProtocolProxy, Rule

LOG_NAME = "protocol-proxy.jsonl"
MAX_DELAY_MS = 300_000
DEFAULT_COUNT = 10
MAX_COUNT = 100_000
SAME_PROXY = "each puts the protocol proxy in front of the nodes, and there is one"


class ProtocolFault(Fault):
    action = ""
    default_rate = 1.0
    default_api: str | None = None
    apis: tuple = tuple(wire.API_KEYS)
    options = {"api": "the API whose requests are touched: " + ", ".join(wire.API_KEYS),
               "rate": "share of the matching requests touched, drawn from the run's seed",
               "count": f"at most this many requests touched (default {DEFAULT_COUNT}, at most {MAX_COUNT})",
               "node": "only requests to this node (default: every node)",
               "client": "only requests whose client id starts with this (default: every client)"}

    def __init__(self, rule: Rule):
        self.rule = rule
        self.hands = None
        self.proxy: ProtocolProxy | None = None
        self.log: Path | None = None
        self.rerouted: list[int] = []
        self.left_behind = ""

    @classmethod
    def from_options(cls, spec: str, opts: dict, params) -> "ProtocolFault":
        api = opts.pop("api", cls.default_api)
        if api not in cls.apis:
            raise HarnessError(f"--fault {spec}: api must be one of {', '.join(cls.apis)}, got {api!r}")
        rate = number(spec, "rate", opts.pop("rate"), float, 0.0, 1.0) if "rate" in opts else cls.default_rate
        count = number(spec, "count", opts.pop("count"), int, 1, MAX_COUNT) if "count" in opts else DEFAULT_COUNT
        node = number(spec, "node", opts.pop("node"), int, 1, 99) if "node" in opts else None
        client = opts.pop("client", None)
        rule = Rule(cls.action, api, rate=rate, count=count, nodes=(node,) if node else (), client=client or None,
                    seed=params.seed or 0)
        f = cls(rule)
        f._options(spec, opts)
        return f

    def _options(self, spec: str, opts: dict) -> None:
        """The options of this fault alone, taken from `opts`."""

    def describe(self) -> dict:
        r = self.rule
        return {"fault": self.name, "api": r.api, "rate": r.rate, "count": r.count,
                "node": r.nodes[0] if r.nodes else None, "client": r.client}

    def check_stack(self, stack, docker_client=None) -> None:
        if stack.kind == "external":
            raise HarnessError(f"--fault {self.name} puts a proxy between the clients and nodes the harness "
                               f"started; it never touches an external cluster (--bootstrap-servers)")
        if stack.kind == "compose":
            raise HarnessError(f"--fault {self.name} runs on the local cluster only (`harness up --brokers 3 "
                               f"--proxies`): the compose cluster's Toxiproxy cannot reach a proxy of the harness")
        from ..stack.brokers import for_stack
        self.hands = for_stack(stack, self.name, docker_client)
        why = self.hands.proxies()
        if why:
            raise HarnessError(f"--fault {self.name} needs a proxy in front of each node: {why}")
        for node in self.hands.rerouted_nodes():       # a killed harness's: point them back at their node
            self.hands.reroute(node, None)
        if self.rule.nodes and self.rule.nodes[0] not in self.hands.node_ids():
            raise HarnessError(f"--fault {self.name}: node must be one of "
                               f"{', '.join(map(str, self.hands.node_ids()))}, got {self.rule.nodes[0]}")

    def setup(self, run) -> None:
        self.log = Path(run.run_dir) / LOG_NAME
        upstreams = {}
        for node, address in self.hands._recorded_upstreams().items():
            host, _, port = address.rpartition(":")
            upstreams[node] = (host, int(port))
        self.proxy = ProtocolProxy(upstreams, self.rule, self.log)
        ports = self.proxy.start()
        try:
            for node, port in sorted(ports.items()):
                self.rerouted.append(node)
                self.hands.reroute(node, f"127.0.0.1:{port}")
        except BaseException:
            self.release()
            raise

    def finish(self, sup) -> None:
        self.release()

    def release(self) -> None:
        """The nodes' proxies forward to the nodes again, then the protocol proxy stops (idempotent)."""
        errors = []
        for node in list(self.rerouted):
            try:
                self.hands.reroute(node, None)
                self.rerouted.remove(node)
            except HarnessError as e:
                errors.append(f"node {node}: {e}")
        if self.proxy is not None:
            self.proxy.stop()
            self.proxy = None
        if errors:
            self.left_behind = (f" {self.name}: a proxy could not be pointed back at its node ({'; '.join(errors)}); "
                           f"the next protocol fault or `harness down` does it.")

    def touched(self) -> list[dict]:
        """The proxy's log of the requests it touched (empty when it never started)."""
        if self.log is None or not self.log.is_file():
            return []
        return crashlog.parse(self.log.read_bytes())

    def entries(self, crashes, events) -> list[dict]:
        return [{"fault": self.name, "time": r.get("time"),
                 "target": f"{r.get('api')} to node {r.get('node')}, correlation id {r.get('correlation_id')}",
                 **{k: r.get(k) for k in ("node", "api", "version", "correlation_id", "client_id")},
                 **{k: r[k] for k in ("ms", "held_ms", "client_gone", "error", "when", "broker_error") if k in r}}
                for r in self.touched()]

    def story(self, events) -> dict:
        rows = self.touched()
        return {**self.describe(), "touched": len(rows), "log": LOG_NAME,
                "clients": sorted({str(r.get("client_id")) for r in rows})}

    def observed(self, story) -> dict:
        return {f"fault.{self.name}.touched": (story or {}).get("touched", 0)}

    def sentence(self, story) -> str:
        if not story:
            return ""
        return (f" The protocol proxy {self.verb} {story['touched']} {story['api']} request(s){self._how()} (each "
                f"listed with its correlation id and client id; the proxy's own log is {LOG_NAME}).")

    def shortfall(self, crashes, story) -> str:
        if story is not None and not story["touched"]:
            return self.left_behind + (f" {self.name} touched no {self.rule.api} request: none was sent through the proxy"
                    f"{' to that node' if self.rule.nodes else ''}{' by that client' if self.rule.client else ''}, "
                    f"or the seeded draws at rate {self.rule.rate:g} touched none.")
        return self.left_behind

    verb = "touched"

    def _how(self) -> str:
        return ""


class HeldOrFailed(ProtocolFault):
    """A request held past its client's timeout, or failed, can end in an abort no crash record describes
    (the client aborts and rewinds): the aborted copies become bounds, and the workers keep fetches short."""
    moves_partitions = True

    def bounds_aborts(self, story) -> bool:
        return bool((story or {}).get("touched"))


class DelayRequest(HeldOrFailed):
    name = "delay-request"
    action = "delay"
    verb = "held back"
    options = {**ProtocolFault.options, "ms": f"how long each is held (default 5000, at most {MAX_DELAY_MS}); "
                                              f"longer than the client's request timeout, it lands after the "
                                              f"client gave up on it"}

    def _options(self, spec, opts):
        self.rule.ms = number(spec, "ms", opts.pop("ms"), int, 0, MAX_DELAY_MS) if "ms" in opts else 5000

    def describe(self) -> dict:
        return {**super().describe(), "ms": self.rule.ms}

    def story(self, events) -> dict:
        return {**super().story(events), "after_client_gone": sum(1 for r in self.touched() if r.get("client_gone"))}

    def _how(self) -> str:
        return f" {self.rule.ms} ms each"

    def sentence(self, story) -> str:
        s = super().sentence(story)
        if story and story["touched"]:
            s += (f" {story['after_client_gone']} of them reached the node after their client had closed the "
                  f"connection (it gave up on them).")
        return s


class FailRequest(HeldOrFailed):
    name = "fail-request"
    action = "fail"
    verb = "failed"
    default_rate = 0.2
    apis = tuple(wire.FAILABLE)
    options = {**ProtocolFault.options,
               "api": "the API whose requests are failed: " + ", ".join(wire.FAILABLE) + " (answers that are one "
                      "error code)",
               "rate": "share of the matching requests failed, drawn from the run's seed (default 0.2)",
               "error": "the error answered: " + ", ".join(wire.ERRORS) + " (default COORDINATOR_NOT_AVAILABLE)",
               "when": "before (default: answered without forwarding, the broker never saw it) or after "
                       "(forwarded, the broker's answer replaced: it applied it)"}

    def _options(self, spec, opts):
        error = opts.pop("error", "COORDINATOR_NOT_AVAILABLE")
        if error not in wire.ERRORS:
            raise HarnessError(f"--fault {spec}: error must be one of {', '.join(wire.ERRORS)}, got {error!r}")
        when = opts.pop("when", "before")
        if when not in ("before", "after"):
            raise HarnessError(f"--fault {spec}: when must be before or after, got {when!r}")
        self.rule.error, self.rule.when, self.error_name = wire.ERRORS[error], when, error

    def describe(self) -> dict:
        return {**super().describe(), "error": self.error_name, "when": self.rule.when}

    def _how(self) -> str:
        return (f" with {self.error_name}, "
                + ("never forwarded" if self.rule.when == "before" else "after the broker applied them"))


class DuplicateRequest(ProtocolFault):
    name = "duplicate-request"
    action = "duplicate"
    verb = "sent twice"
    default_rate = 0.2
    apis = ("Produce",)
    default_api = "Produce"
    options = {**ProtocolFault.options, "api": "Produce (the only one)",
               "rate": "share of the Produce requests sent twice, drawn from the run's seed (default 0.2)"}


for _cls in (DelayRequest, FailRequest, DuplicateRequest):
    _cls.excludes = {other: SAME_PROXY for other in ("delay-request", "fail-request", "duplicate-request")}
