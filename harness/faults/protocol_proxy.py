"""A Kafka protocol proxy that delays, fails or duplicates requests of one API, for the protocol faults.

Toxiproxy holds back every byte of a connection; KAFKA-17754 needs one request
held (an EndTxn, a Produce) while the client times out, closes its connection
and moves on, and then that request landing. This proxy reads Kafka's framing
(kafka_wire.py) and nothing more: per client connection it forwards requests
in order to the node, one upstream connection each, and hands the node's
responses back in order.

- delay: a matching request (and, to keep the connection's order, those
  after it) is held `ms`, then forwarded, even when the client closed its
  connection meanwhile: the upstream connection stays open until the late
  request was sent and answered, so it lands after the client moved on.
- fail: a matching request is answered in the broker's place with an error,
  without forwarding it (`when=before`: the broker never saw it) or after
  forwarding it (`when=after`: the broker applied it, the client hears an
  error).
- duplicate: a matching request is forwarded twice; the second answer is
  dropped.

Every request touched is one JSON line in the log (API, version, correlation
id, client id, node, action, delay, error), which the report reads.

Why not Kroxylicious (the Apache-licensed Kafka proxy): its proxy closes the
node's connection as soon as the client's closes (its channel state machine's
`onClientInactive` goes straight to closed), so a request a filter holds past
the client's timeout never reaches the node, which is the point of
`delay-request`; and it advertises its own addresses, where the stack's
clients reach the nodes through the Toxiproxy proxies they were given.

It runs in a thread of the harness (an asyncio loop), listening on 127.0.0.1
on ports the kernel picks: nothing of it outlives the harness, killed or not.
The Toxiproxy proxy in front of each node forwards to it during a run
(faults/protocol.py), so the nodes' advertised addresses need no rewriting.
"""

from __future__ import annotations

import asyncio
import json
import random
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from ..core import safefile
from . import kafka_wire as wire

LOOPBACK = "127.0.0.1"
DRAIN_S = 60.0          # how long a closed client's held requests still wait for the node's answers


@dataclass
class Rule:
    """Which requests a fault touches and how: action is delay, fail or duplicate."""
    action: str
    api: str
    rate: float = 1.0
    ms: int = 0
    error: int = 0
    when: str = "before"
    count: int | None = None        # at most this many touched (None: no limit)
    nodes: tuple = ()               # only these nodes (empty: all)
    client: str | None = None       # only clients whose client id starts with this
    seed: int = 0
    touched: int = field(default=0, init=False)

    def __post_init__(self):
        self.rng = random.Random(self.seed)

    def matches(self, node: int, head: dict) -> bool:
        """Whether to touch this request; draws from the seeded generator only for the named API."""
        if head["api"] != self.api or (self.nodes and node not in self.nodes):
            return False
        if self.client is not None and not (head["client_id"] or "").startswith(self.client):
            return False
        if self.count is not None and self.touched >= self.count:
            return False
        if self.rng.random() >= self.rate:
            return False
        self.touched += 1
        return True


class ProtocolProxy:
    """One listener per node, forwarding to that node's (host, port), touching what `rule` names."""

    def __init__(self, upstreams: dict[int, tuple[str, int]], rule: Rule, log: Path):
        self.upstreams, self.rule, self.log_path = dict(upstreams), rule, log
        self.ports: dict[int, int] = {}
        self.loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._servers: list = []
        self._tasks: set = set()
        self._log = None

    # -- the harness's side (any thread) ----------------------------------------------------
    def start(self, timeout: float = 10.0) -> dict[int, int]:
        """Listen on a port per node; returns {node: port on 127.0.0.1}."""
        self._log = safefile.open_log(self.log_path)
        ready = threading.Event()
        failed: list = []

        def run():
            self.loop = asyncio.new_event_loop()
            # A connection's task that ended on its node's or client's hang-up is no news: never a traceback.
            self.loop.set_exception_handler(lambda loop, context: None)
            try:
                self.loop.run_until_complete(self._listen())
            except BaseException as e:      # noqa: BLE001 - handed to start(), which raises it
                failed.append(e)
                ready.set()
                return
            ready.set()
            self.loop.run_forever()
            self.loop.close()

        self._thread = threading.Thread(target=run, name="protocol-proxy", daemon=True)
        self._thread.start()
        if not ready.wait(timeout) or failed:
            self.stop()
            raise OSError(f"the protocol proxy could not listen: {failed[0] if failed else 'no answer'}")
        return dict(self.ports)

    def stop(self, timeout: float = 10.0) -> None:
        """Close the listeners and every connection; held requests not yet forwarded are dropped."""
        if self.loop is not None and self._thread is not None and self._thread.is_alive():
            asyncio.run_coroutine_threadsafe(self._close(), self.loop).result(timeout)
            self.loop.call_soon_threadsafe(self.loop.stop)
            self._thread.join(timeout)
        if self._log is not None:
            self._log.close()
            self._log = None

    # -- the loop's side ----------------------------------------------------------------------
    async def _listen(self):
        for node in sorted(self.upstreams):
            server = await asyncio.start_server(lambda r, w, n=node: self._spawn(self._serve(n, r, w)),
                                                LOOPBACK, 0)
            self._servers.append(server)
            self.ports[node] = server.sockets[0].getsockname()[1]

    async def _close(self):
        for s in self._servers:
            s.close()
        for t in list(self._tasks):
            t.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    def _spawn(self, coro):
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        task.add_done_callback(lambda t: t.cancelled() or t.exception())     # retrieved: never "never retrieved"
        return task

    def _record(self, node: int, head: dict, **what) -> None:
        line = {"time": round(time.time(), 6), "node": node, "api": head["api"], "version": head["version"],
                "correlation_id": head["correlation_id"], "client_id": head["client_id"], **what}
        self._log.write((json.dumps(line) + "\n").encode())
        self._log.flush()

    async def _serve(self, node: int, client_r, client_w):
        host, port = self.upstreams[node]
        try:
            up_r, up_w = await asyncio.open_connection(host, port)
        except OSError:
            client_w.close()
            return
        requests: asyncio.Queue = asyncio.Queue()
        answers: asyncio.Queue = asyncio.Queue()
        client_gone = asyncio.Event()
        writer = self._spawn(self._forward(node, requests, answers, up_w, client_gone))
        reader = self._spawn(self._answer(node, answers, up_r, client_w, client_gone))
        reader.add_done_callback(lambda _: client_w.close())     # the node hung up: so does the client's side
        try:
            while True:
                prefix = await client_r.readexactly(4)
                body = await client_r.readexactly(wire.frame_size(prefix))
                head = wire.request_header(body)
                await requests.put((head, body, self.rule.matches(node, head)))
        except (asyncio.IncompleteReadError, ConnectionError, wire.WireError):
            pass
        finally:
            client_gone.set()
            await requests.put(None)
            try:
                # asyncio.wait, not gather: the node hanging up (the reader's error) is no error of the proxy's
                await asyncio.wait({writer, reader}, timeout=DRAIN_S)
            finally:
                for t in (writer, reader):
                    t.cancel()
                up_w.close()
                client_w.close()

    async def _forward(self, node: int, requests, answers, up_w, client_gone):
        """Requests to the node in their order: a delayed one holds those after it (`client_gone` in its log
        line: its client had closed the connection by the time it was forwarded, so it landed after the client
        gave up on it)."""
        rule = self.rule
        while (item := await requests.get()) is not None:
            head, body, touched = item
            frame = len(body).to_bytes(4, "big") + body
            answered = wire.expects_response(head, body)
            if touched and rule.action == "delay":
                held = time.monotonic()
                await asyncio.sleep(rule.ms / 1000)
                self._record(node, head, action="delay", ms=rule.ms,
                             held_ms=round((time.monotonic() - held) * 1000), client_gone=client_gone.is_set())
            if touched and rule.action == "fail" and rule.when == "before":
                self._record(node, head, action="fail", when="before", error=rule.error, forwarded=False)
                await answers.put(("local", head, wire.error_response(head, rule.error)))
                continue
            up_w.write(frame)
            if answered:
                await answers.put(("fail" if touched and rule.action == "fail" else "pass", head, None))
            if touched and rule.action == "duplicate":
                up_w.write(frame)
                if answered:
                    await answers.put(("drop", head, None))
                self._record(node, head, action="duplicate", answered=answered)
            await up_w.drain()
        await answers.put(None)

    async def _answer(self, node: int, answers, up_r, client_w, client_gone):
        """The node's answers to the client in order, with ours put in their place."""
        while (item := await answers.get()) is not None:
            kind, head, ours = item
            if kind == "local":
                out = ours
            else:
                prefix = await up_r.readexactly(4)
                body = await up_r.readexactly(wire.frame_size(prefix))
                if kind == "drop":
                    continue
                if kind == "fail":
                    self._record(node, head, action="fail", when="after",
                                 error=self.rule.error, forwarded=True, broker_error=wire.response_error(head, body))
                    body = wire.with_error(head, body, self.rule.error)
                out = len(body).to_bytes(4, "big") + body
            if not client_gone.is_set():
                try:
                    client_w.write(out)
                    await client_w.drain()
                except ConnectionError:
                    client_gone.set()
