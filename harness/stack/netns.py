"""A network namespace of its own for each local node, so a fault can cut one node's network.

A process fault (SIGKILL, SIGSTOP) stops a node; a network fault leaves it
running and cuts what it can reach: the harder case for Kafka, where a
request that timed out may still have been applied. To cut one node's
traffic and nobody else's, the node needs a network of its own. Each node
runs in a namespace the harness makes (`ip netns`), reached over veth links
the harness makes too:

- the node's address `198.18.S.<node>` sits on its namespace's loopback,
  so one address reaches it over any link (Kafka advertises one address per
  listener);
- a client link per node joins it to the machine's own namespace, where the
  workers, the readers and the proxies run (`<prefix>c<node>` there, with
  the address `198.18.S.<100+node>`);
- a mesh link per pair of nodes carries their own traffic (replication, the
  controllers' quorum) straight between their namespaces, so a partition
  between two nodes is a rule on one link.

Each link is a pair of /32 routes: no bridge, no forwarding, nothing in the
machine's own firewall. Faults are iptables rules inside the node's
namespace (`apply`, `heal`), so they touch no rule of the machine's, and
deleting the namespace undoes them all. `remove` is the cleanup: the names
derive from the harness's home and the record is written before anything is
made, so what a SIGKILLed harness left is found and removed by the next. A
name that exists and that the record does not claim is someone else's:
refused, never touched; a namespace a process still runs in is not deleted.

Traffic stays on the machine: the addresses come from 198.18.0.0/15, which
RFC 2544 sets aside for benchmarks (no real network uses it), are routed only
to these links, and the /24 is one that no route of the machine names more
precisely than the whole range (checked before use).
"""

from __future__ import annotations

import hashlib
import ipaddress
import json
import os
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from ..core.errors import HarnessError

RECORD = "netns.json"
NET = "198.18"              # the /16 the subnets are drawn from (RFC 2544's benchmark range)
CLIENT_BASE = 100           # a client link's address in the machine's namespace: 198.18.S.(100 + node)
IP_TIMEOUT_S = 20
GONE_WAIT_S = 10            # a deleted namespace's veth ends can take a moment to go
RECORD_LIMIT = 4096


def prefix_of(home: Path) -> str:
    """The names' prefix for one harness home: 'hk' and 6 hex digits (an interface name has at most 15
    characters, and `<prefix>c<node>` must fit)."""
    return "hk" + hashlib.sha256(str(Path(home).resolve()).encode()).hexdigest()[:6]


@dataclass(frozen=True)
class Layout:
    """Every name and address of one cluster's network, from its prefix, subnet and size (pure)."""
    prefix: str
    subnet: int             # S of 198.18.S.0/24
    nodes: int

    def namespace(self, node: int) -> str:
        return f"{self.prefix}-n{node}"

    def address(self, node: int) -> str:
        return f"{NET}.{self.subnet}.{node}"

    def client_address(self, node: int) -> str:
        return f"{NET}.{self.subnet}.{CLIENT_BASE + node}"

    def client_link(self, node: int) -> str:
        """The client link's end in the machine's namespace."""
        return f"{self.prefix}c{node}"

    @staticmethod
    def mesh_link(peer: int) -> str:
        """Inside a node's namespace, the end of its link to `peer`."""
        return f"m{peer}"

    def namespaces(self) -> list[str]:
        return [self.namespace(n) for n in range(1, self.nodes + 1)]

    def commands(self) -> list[list[str]]:
        """The `ip` commands that make the network, in order."""
        out: list[list[str]] = []
        for n in range(1, self.nodes + 1):
            ns = self.namespace(n)
            out += [["ip", "netns", "add", ns],
                    ["ip", "-n", ns, "link", "set", "lo", "up"],
                    ["ip", "-n", ns, "addr", "add", f"{self.address(n)}/32", "dev", "lo"],
                    ["ip", "link", "add", self.client_link(n), "type", "veth", "peer", "name", "client", "netns", ns],
                    ["ip", "addr", "add", f"{self.client_address(n)}/32", "dev", self.client_link(n)],
                    ["ip", "link", "set", self.client_link(n), "up"],
                    ["ip", "-n", ns, "link", "set", "client", "up"],
                    ["ip", "route", "add", f"{self.address(n)}/32", "dev", self.client_link(n),
                     "src", self.client_address(n)],
                    ["ip", "-n", ns, "route", "add", f"{self.client_address(n)}/32", "dev", "client",
                     "src", self.address(n)]]
        for a in range(1, self.nodes + 1):
            for b in range(a + 1, self.nodes + 1):
                na, nb = self.namespace(a), self.namespace(b)
                out += [["ip", "-n", na, "link", "add", self.mesh_link(b), "type", "veth", "peer", "name",
                         self.mesh_link(a), "netns", nb],
                        ["ip", "-n", na, "link", "set", self.mesh_link(b), "up"],
                        ["ip", "-n", nb, "link", "set", self.mesh_link(a), "up"],
                        ["ip", "-n", na, "route", "add", f"{self.address(b)}/32", "dev", self.mesh_link(b),
                         "src", self.address(a)],
                        ["ip", "-n", nb, "route", "add", f"{self.address(a)}/32", "dev", self.mesh_link(a),
                         "src", self.address(b)]]
        return out

    def as_dict(self) -> dict:
        return {"prefix": self.prefix, "subnet": self.subnet, "nodes": self.nodes}


# -- the rules a fault puts inside a namespace (pure) -------------------------------------------

def isolate_rules(layout: Layout, node: int) -> list[list[str]]:
    """Everything in and out of the node, except its own loopback: clients and the other nodes alike."""
    return [["-A", "INPUT", "!", "-i", "lo", "-j", "DROP"], ["-A", "OUTPUT", "!", "-o", "lo", "-j", "DROP"]]


def split_rules(layout: Layout, node: int, others: list[int]) -> list[list[str]]:
    """Only the node's links to `others` (the other side of a split): its clients and its side stay."""
    out = []
    for peer in others:
        link = layout.mesh_link(peer)
        out += [["-A", "INPUT", "-i", link, "-j", "DROP"], ["-A", "OUTPUT", "-o", link, "-j", "DROP"]]
    return out


def client_cut_rules(layout: Layout, node: int) -> list[list[str]]:
    """The node's client link: every TCP packet either way answered with a reset, so open connections
    break at their next packet and new ones are refused at once (the nodes' own traffic goes on)."""
    return [["-A", "INPUT", "-i", "client", "-p", "tcp", "-j", "REJECT", "--reject-with", "tcp-reset"],
            # not the resets themselves: REJECT's own answer leaves through OUTPUT too
            ["-A", "OUTPUT", "-o", "client", "-p", "tcp", "!", "--tcp-flags", "RST", "RST", "-j", "REJECT",
             "--reject-with", "tcp-reset"]]


def loss_rules(layout: Layout, node: int, share: float) -> list[list[str]]:
    """A random `share` of the packets on the node's client link dropped, either way (TCP resends them)."""
    p = f"{share:.4f}"
    return [["-A", "INPUT", "-i", "client", "-m", "statistic", "--mode", "random", "--probability", p, "-j", "DROP"],
            ["-A", "OUTPUT", "-o", "client", "-m", "statistic", "--mode", "random", "--probability", p, "-j",
             "DROP"]]


# -- doing it ---------------------------------------------------------------------------------

def _ip(args: list[str], check: bool = True) -> subprocess.CompletedProcess:
    try:
        proc = subprocess.run(args, capture_output=True, text=True, timeout=IP_TIMEOUT_S)
    except FileNotFoundError:
        raise HarnessError(f"{args[0]} is not installed: node networks need iproute2 and iptables") from None
    except subprocess.TimeoutExpired:
        raise HarnessError(f"`{' '.join(args[:4])} ...` did not answer within {IP_TIMEOUT_S} s") from None
    if check and proc.returncode != 0:
        raise HarnessError(f"`{' '.join(args)}` failed: {(proc.stderr or proc.stdout).strip()[:300]}")
    return proc


def existing_namespaces() -> set[str]:
    proc = _ip(["ip", "netns", "list"], check=False)
    return {line.split()[0] for line in proc.stdout.splitlines() if line.strip()}


def _links() -> set[str]:
    proc = _ip(["ip", "-o", "link", "show"], check=False)
    out = set()
    for line in proc.stdout.splitlines():
        parts = line.split(":")
        if len(parts) > 1:
            out.add(parts[1].strip().split("@")[0])
    return out


def free_subnet(prefix: str) -> int:
    """A /24 of 198.18.0.0/16 that no route of the machine names (broader routes, such as a default route
    or a VPN's 0.0.0.0/1, are not about this range), first trying the one the prefix hashes to."""
    proc = _ip(["ip", "-4", "route", "show", "table", "all"], check=False)
    nets = []
    for line in proc.stdout.splitlines():
        for word in line.split()[:2]:         # "10.1.0.0/16 dev ...", "local 127.0.0.1 dev lo ...", "default ..."
            if word == "default":
                break
            try:
                nets.append(ipaddress.ip_network(word, strict=False))
                break
            except ValueError:
                continue
    start = int(prefix[2:], 16) % 250 + 1
    for i in range(250):
        s = (start + i - 1) % 250 + 1
        mine = ipaddress.ip_network(f"{NET}.{s}.0/24")
        if not any(mine.overlaps(n) for n in nets if n.prefixlen >= 15):
            return s
    raise HarnessError(f"no free /24 in {NET}.0.0/16 for the nodes' networks: routes of this machine name them all")


def available() -> str | None:
    """Why this machine cannot give nodes their own networks, or None when it can."""
    if os.geteuid() != 0:
        return "network namespaces need root (ip netns)"
    for tool in ("ip", "iptables"):
        if _which(tool) is None:
            return f"{tool} is not installed"
    return None


def _which(tool: str) -> str | None:
    import shutil
    return shutil.which(tool)


def record_path(state: Path) -> Path:
    return state / RECORD


def read_record(state: Path) -> Layout | None:
    """The layout the record claims, or None without one. The file is read as untrusted: its names are
    rebuilt from the home (never taken from it), and only its subnet and size are read, checked."""
    from ..core.safefile import read_limited
    try:
        d = json.loads(read_limited(record_path(state), RECORD_LIMIT, "the node networks' record", follow_links=False))
        subnet, nodes = d["subnet"], d["nodes"]
    except (HarnessError, ValueError, KeyError, TypeError):
        return None
    if type(subnet) is not int or type(nodes) is not int or not (1 <= subnet <= 250 and 1 <= nodes <= 9):
        return None
    return Layout(prefix_of(state), subnet, nodes)


def make(state: Path, nodes: int) -> Layout:
    """Makes the nodes' network (the record first). Refuses a name that exists and is not ours."""
    why = available()
    if why:
        raise HarnessError(f"the nodes cannot have networks of their own: {why}")
    if not 1 <= nodes <= 9:
        raise HarnessError("node networks are made for 1 to 9 nodes")
    prefix = prefix_of(state)
    if read_record(state) is not None:
        remove(state)                       # a network left by an earlier harness of this home
    deadline = time.monotonic() + GONE_WAIT_S
    taken = _named(prefix)
    while taken and not any(n.startswith(prefix + "-") for n in taken) and time.monotonic() < deadline:
        time.sleep(0.1)                     # only veth ends, going with namespaces just deleted
        taken = _named(prefix)
    if taken:
        raise HarnessError(f"{', '.join(sorted(taken))} exist(s) and are not this harness's: nothing was touched")
    layout = Layout(prefix, free_subnet(prefix), nodes)
    state.mkdir(parents=True, exist_ok=True)
    tmp = record_path(state).with_suffix(".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "w") as f:
        json.dump(layout.as_dict(), f)
    os.replace(tmp, record_path(state))
    try:
        for cmd in layout.commands():
            _ip(cmd)
    except HarnessError:
        remove(state)
        raise
    return layout


def _named(prefix: str) -> set[str]:
    """Namespaces and links of the machine's namespace that carry this prefix."""
    return {n for n in existing_namespaces() if n.startswith(prefix + "-")} | \
        {n for n in _links() if n.startswith(prefix)}


def remove(state: Path) -> list[str]:
    """Deletes what the record claims (namespaces, and with them their links, routes and rules), then the
    record; returns the namespaces it deleted. Without a record nothing is touched. A namespace a process
    still runs in is left, with the record, and said in one line (its processes are stopped first by
    whoever started them)."""
    layout = read_record(state)
    if layout is None:
        _drop_record(state)
        return []
    present = existing_namespaces()
    busy = {}
    for ns in layout.namespaces():
        if ns in present:
            pids = _ip(["ip", "netns", "pids", ns], check=False).stdout.split()
            if pids:
                busy[ns] = pids
    if busy:
        raise HarnessError("node networks still in use, left as they are: " +
                           "; ".join(f"{ns} by pid {', '.join(p[:5])}" for ns, p in sorted(busy.items())))
    removed = []
    for ns in layout.namespaces():
        if ns in present:
            _ip(["ip", "netns", "del", ns])
            removed.append(ns)
    links = _links()
    for n in range(1, layout.nodes + 1):         # a veth pair goes with its namespace end; this is in case
        if layout.client_link(n) in links:
            _ip(["ip", "link", "del", layout.client_link(n)], check=False)
    if existing_namespaces() & set(layout.namespaces()):
        raise HarnessError(f"node networks could not be deleted: {', '.join(sorted(existing_namespaces() & set(layout.namespaces())))}")
    _drop_record(state)
    return removed


def _drop_record(state: Path) -> None:
    path = record_path(state)
    if path.is_symlink() or path.is_file():
        path.unlink()
    elif path.exists():
        raise HarnessError(f"{path} is not a file: the harness did not write it, and leaves it")


def in_namespace(layout: Layout, node: int, argv: list[str]) -> list[str]:
    """A command line that runs `argv` inside the node's namespace."""
    return ["ip", "netns", "exec", layout.namespace(node), *argv]


def apply(layout: Layout, node: int, rules: list[list[str]]) -> None:
    """Adds iptables rules inside the node's namespace (its own table: the machine's are not touched)."""
    for rule in rules:
        _ip(in_namespace(layout, node, ["iptables", "-w", "5", *rule]))


def heal(layout: Layout, node: int) -> None:
    """Removes every rule inside the node's namespace (all of them are the harness's)."""
    _ip(in_namespace(layout, node, ["iptables", "-w", "5", "-F"]))


def rules_in(layout: Layout, node: int) -> list[str]:
    """The rules inside the node's namespace, as `iptables -S` lists them (for checks and leftovers)."""
    proc = _ip(in_namespace(layout, node, ["iptables", "-S"]))
    return [line for line in proc.stdout.splitlines() if not line.startswith("-P ")]
