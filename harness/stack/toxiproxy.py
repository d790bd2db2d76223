"""Toxiproxy in front of each Kafka node's client listener, for the `latency` fault.

Delaying a node's traffic takes either the kernel's netem qdisc (not every
kernel has it: ours offers tc's htb and tbf, no netem) or a TCP proxy that
can hold bytes back. Toxiproxy (Shopify's, an HTTP API, widely used in
tests for exactly this) is that proxy; the harness does not write its own.

`harness up --brokers 3 --proxies` starts one `toxiproxy-server` on
127.0.0.1, recorded like every service of the stack (`toxiproxy/toxiproxy.pid`,
its config file on its command line), with one proxy per node: it listens on
127.0.0.1 (port `proxy-N`) and forwards to a second listener of the node
(`PROXIED`, port `proxied-N`) that advertises the proxy's address. Clients
that bootstrap through the proxies (the stack's bootstrap servers then are
the proxies) therefore reach every node through its proxy; the nodes talk
to each other (replication, the quorum, transaction markers) on their own
listeners, untouched. With node networks the proxies forward to the nodes'
own addresses, so a `partition` or `client-cut` cuts the proxied traffic too.

A fault's delay is a "toxic" on one proxy (`add_latency`), removed when the
fault heals; toxics live in the server's memory only, so `harness down`
(which stops the server) removes whatever a killed harness left. The API is
four HTTP calls, made here with the standard library: the Python clients on
PyPI are unmaintained.

The binary is found on PATH or in Go's bin folder as `toxiproxy-server`
(.ci/install-toxiproxy.sh builds it with `go install`).
"""

from __future__ import annotations

import http.client
import json
import os
import shutil
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path

from ..core import safefile
from ..core.errors import HarnessError
from . import pidrecord

LOOPBACK = "127.0.0.1"
BINARY = "toxiproxy-server"
TOXIC = "harness-latency"          # the name of the one toxic a fault puts on a proxy
START_TIMEOUT_S = 15
API_TIMEOUT_S = 5
MAX_ANSWER = 1 << 20                # three proxies and their toxics are a few kB


def find_binary() -> str | None:
    """The toxiproxy-server to run: on PATH, else in Go's bin folder (where `go install` puts it)."""
    found = shutil.which(BINARY)
    if found:
        return found
    gopath = os.environ.get("GOPATH") or str(Path.home() / "go")
    for root in gopath.split(os.pathsep):
        candidate = Path(root) / "bin" / BINARY
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return str(candidate)
    return None


def proxy_name(node: int) -> str:
    return f"kafka-{node}"


class LocalToxiproxy(pidrecord.RecordedService):
    """The stack's toxiproxy-server: one process, one proxy per Kafka node."""

    group = True
    program = BINARY

    def __init__(self, state: Path):
        self.key = "toxiproxy"
        self.name = "Toxiproxy"
        self.home = state / "toxiproxy"
        self.config = self.home / "proxies.json"
        self.pidfile = self.home / "toxiproxy.pid"
        self.proc: subprocess.Popen | None = None

    def upstreams(self) -> dict[int, str]:
        """{node: "host:port"} as the server was started with (its configuration file)."""
        try:
            proxies = json.loads(safefile.read_limited(self.config, 1 << 20, "Toxiproxy's configuration"))
        except ValueError:
            raise HarnessError(f"Toxiproxy's configuration {self.config} is not its JSON")
        return {int(p["name"].rpartition("-")[2]): str(p["upstream"]) for p in proxies
                if isinstance(p, dict) and str(p.get("name", "")).startswith("kafka-")
                and str(p["name"]).rpartition("-")[2].isdigit()}

    def marks(self) -> list[str]:
        return [str(self.config)]

    def files(self) -> list[Path]:
        """What the harness writes in its folder (`down --purge` deletes these, then the folder if empty)."""
        return [self.config, self.pidfile, self.home / "toxiproxy.log"]

    def log_tail(self, lines: int = 20) -> str:
        return "\n".join(safefile.read_tail(self.home / "toxiproxy.log").splitlines()[-lines:])

    def start(self, api_port: int, upstreams: dict[int, tuple[int, str]], owner: str) -> int:
        """Start the server with a proxy per node: {node: (listen port on 127.0.0.1, "host:port" upstream)}."""
        binary = find_binary()
        if binary is None:
            raise HarnessError(f"{BINARY} not found (on PATH or in Go's bin folder): run "
                               f"`bash .ci/install-toxiproxy.sh` (it builds it with go install)")
        safefile.make_folder(self.home, safefile.PRIVATE_FOLDER)
        proxies = [{"name": proxy_name(n), "listen": f"{LOOPBACK}:{listen}", "upstream": upstream, "enabled": True}
                   for n, (listen, upstream) in sorted(upstreams.items())]
        safefile.write_text(self.config, json.dumps(proxies, indent=2) + "\n", safefile.PRIVATE)
        out_fd = os.open(self.home / "toxiproxy.log", os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW,
                         safefile.PRIVATE)
        with open(out_fd, "ab") as out:
            # info, not the default debug: a line per API call would grow the log for nothing
            proc = subprocess.Popen([binary, "-host", LOOPBACK, "-port", str(api_port), "-config", str(self.config)],
                                    stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                    start_new_session=True, cwd=self.home, env={**os.environ, "LOG_LEVEL": "info"},
                                    umask=safefile.PRIVATE_UMASK)
        self.proc = proc
        try:
            rec = pidrecord.capture(proc.pid, self.marks(), group=self.group, owner=owner,
                                    ports={"toxiproxy": api_port,
                                           **{f"proxy-{n}": listen for n, (listen, _) in upstreams.items()}})
        except ProcessLookupError:
            raise HarnessError("Toxiproxy exited at once", self.log_tail())
        pidrecord.write(self.pidfile, rec)
        return proc.pid

    def stop(self) -> tuple[bool, str | None]:
        return self.stop_ours(grace=5.0)

    def api(self) -> "Api | None":
        """The running server's API, on the port its pid record names (None: it does not run)."""
        rec = self.running()
        return Api(rec.ports["toxiproxy"]) if rec is not None and "toxiproxy" in rec.ports else None


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    """A redirect is refused (an HTTPError), never followed: it could point anywhere."""

    def redirect_request(self, req, fp, code, msg, headers, newurl):
        return None


class Api:
    """Toxiproxy's HTTP API on 127.0.0.1:port: the calls the harness makes, nothing else."""

    def __init__(self, port: int):
        self.base = f"http://{LOOPBACK}:{int(port)}"

    def _call(self, method: str, path: str, body: dict | None = None):
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(self.base + path, data=data, method=method,
                                     headers={"Content-Type": "application/json"} if data else {})
        # Never through an HTTP proxy from the environment, never redirected: the server is on this loopback.
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({}), _NoRedirect())
        deadline = time.monotonic() + API_TIMEOUT_S
        try:
            with opener.open(req, timeout=API_TIMEOUT_S) as resp:
                chunks, size = [], 0
                while size < MAX_ANSWER and (chunk := resp.read(65536)):
                    chunks.append(chunk)
                    size += len(chunk)
                    if time.monotonic() > deadline:         # a server trickling bytes
                        raise HarnessError(f"Toxiproxy on {self.base} answered {method} {path} too slowly")
                text = b"".join(chunks).decode(errors="replace")
        except urllib.error.HTTPError as e:
            raise HarnessError(f"Toxiproxy refused {method} {path}: HTTP {e.code} "
                               f"{e.read(300).decode(errors='replace').strip()}")
        except (urllib.error.URLError, OSError, http.client.HTTPException) as e:
            raise HarnessError(f"Toxiproxy on {self.base} does not answer ({getattr(e, 'reason', e)})")
        if size >= MAX_ANSWER:
            raise HarnessError(f"Toxiproxy's answer to {method} {path} is larger than any it gives")
        try:
            return json.loads(text) if text.strip() else None
        except (ValueError, RecursionError):
            raise HarnessError(f"Toxiproxy answered {method} {path} with something that is not its JSON")

    def proxies(self) -> dict:
        got = self._call("GET", "/proxies")
        return got if isinstance(got, dict) else {}

    def toxics(self) -> dict[str, list[str]]:
        """{proxy name: [toxic names]} for the proxies that have toxics now."""
        out = {}
        for name, p in self.proxies().items():
            toxics = p.get("toxics") if isinstance(p, dict) else None
            if not isinstance(toxics, (list, type(None))):
                raise HarnessError(f"Toxiproxy on {self.base} answered GET /proxies with something that is not "
                                   f"its JSON")
            names = [t.get("name") for t in (toxics or []) if isinstance(t, dict)]
            if names:
                out[str(name)] = [str(n) for n in names]
        return out

    def delayed_nodes(self) -> list[int]:
        """The nodes whose proxy has a toxic now."""
        return sorted(int(n) for name in self.toxics() if (n := name.rpartition("-")[2]).isascii() and n.isdigit()
                      and len(n) < 4 and name == proxy_name(int(n)))

    def add_latency(self, node: int, ms: int, jitter: int) -> None:
        """Every byte the node sends its clients through the proxy is held `ms` ± `jitter` ms."""
        self._call("POST", f"/proxies/{proxy_name(node)}/toxics",
                   {"name": TOXIC, "type": "latency", "stream": "downstream", "toxicity": 1.0,
                    "attributes": {"latency": int(ms), "jitter": int(jitter)}})

    def upstreams(self) -> dict[int, str]:
        """{node: the "host:port" its proxy forwards to now}."""
        out = {}
        for name, p in self.proxies().items():
            n = str(name).rpartition("-")[2]
            if n.isascii() and n.isdigit() and len(n) < 4 and name == proxy_name(int(n)) and isinstance(p, dict):
                out[int(n)] = str(p.get("upstream"))
        return out

    def set_upstream(self, node: int, upstream: str) -> None:
        """The node's proxy forwards to `upstream` from now on (Toxiproxy restarts it: open connections close)."""
        self._call("POST", f"/proxies/{proxy_name(node)}", {"upstream": upstream})

    def remove_latency(self, node: int) -> None:
        """The fault's toxic removed from the node's proxy (nothing to do when it has none)."""
        try:
            self._call("DELETE", f"/proxies/{proxy_name(node)}/toxics/{TOXIC}")
        except HarnessError as e:
            if "HTTP 404" not in str(e):
                raise



class ProxiedNodes:
    """The latency and protocol faults' hands, for a cluster whose nodes each have a proxy: a class that mixes
    this in gives `_api()` (its Toxiproxy's), `node_ids()`, `heal(node)`, `_add_loss(node, share)` (the loss
    rules where its nodes' client packets pass; returns where they are) and `_recorded_upstreams()`."""

    def delayed_nodes(self) -> list[int]:
        """Nodes whose proxy has a toxic now (a fault of another run, or one a killed harness left)."""
        return [n for n in self._api().delayed_nodes() if n in self.node_ids()]

    def delay(self, node: int, ms: int, jitter: int, loss: float = 0.0) -> str | None:
        """The node's replies to its clients held `ms` ± `jitter` by its proxy; with `loss`, that share of the
        packets on its client link dropped as well. All or nothing."""
        api = self._api()
        try:
            api.add_latency(node, ms, jitter)
        except BaseException:       # a timeout may come after Toxiproxy added it: none at all
            try:
                api.remove_latency(node)
            except HarnessError:
                pass
            raise
        if loss:
            try:
                where = self._add_loss(node, loss)
            except BaseException:           # half a fault is none at all
                self.undelay(node, loss)
                raise
            return f"toxic on proxy {proxy_name(node)}, {where}"
        return f"toxic on proxy {proxy_name(node)}"

    def reroute(self, node: int, upstream: str | None) -> None:
        """The node's proxy forwards to `upstream` (a protocol proxy's listener; None: the node again, as
        the stack's Toxiproxy configuration says)."""
        self._api().set_upstream(node, upstream or self._recorded_upstreams()[node])

    def rerouted_nodes(self) -> list[int]:
        """Nodes whose proxy forwards elsewhere than to the node (a protocol fault under way, or one a killed
        harness left)."""
        recorded, now = self._recorded_upstreams(), self._api().upstreams()
        return sorted(n for n in self.node_ids() if n in recorded and now.get(n, recorded[n]) != recorded[n])

    def undelay(self, node: int, loss: float = 0.0) -> None:
        try:
            self._api().remove_latency(node)
        finally:
            if loss:
                self.heal(node)
