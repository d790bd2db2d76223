"""Network faults inside a broker container's own network namespace (the compose cluster).

Each container of the compose cluster already has a network namespace of its
own, made by the Docker engine: a fault is a set of iptables rules inside it,
entered with `nsenter --target <the container's pid> --net`, exactly as the
local cluster's faults act inside the namespaces the harness makes
(netns.py). The machine's own firewall and the engine's rules (in the
machine's namespace) are never touched; removing the container (`harness
down`) removes whatever a SIGKILLed harness left.

What the rules select differs from the local cluster's, because a container
has one interface (eth0) for everything:

- isolate: everything but the container's loopback (the same rules as netns);
- client cut: the node's client listener port (EXTERNAL, the one published on
  127.0.0.1), answered with TCP resets either way; its peers use the INTERNAL
  and CONTROLLER listeners and go on;
- split: the packets from and to the other side's container addresses.

The container's pid and addresses come from the engine (the Docker SDK), for
containers found by the compose project's labels; a pid the engine does not
give (a container that is not running) is no target.
"""

from __future__ import annotations

import os
import shutil

from ..errors import HarnessError
from .netns import _ip, isolate_rules  # noqa: F401 - isolate_rules: the same rules in a container

NSENTER_TIMEOUT_S = 20


def available() -> str | None:
    """Why rules cannot be put inside the containers' namespaces from here, or None."""
    if os.geteuid() != 0:
        return "entering a container's network namespace needs root (nsenter, iptables)"
    for tool in ("nsenter", "iptables"):
        if shutil.which(tool) is None:
            return f"{tool} is not installed"
    return None


def enter(pid: int, argv: list[str]) -> list[str]:
    """A command line that runs `argv` inside the network namespace of process `pid` (a container's)."""
    if not isinstance(pid, int) or isinstance(pid, bool) or pid <= 1:
        raise HarnessError(f"no container process to enter (pid {pid!r})")
    return ["nsenter", "--target", str(pid), "--net", *argv]


def client_cut_rules(port: int) -> list[list[str]]:
    """The client listener's port: every TCP packet to or from it answered with a reset."""
    return [["-A", "INPUT", "-p", "tcp", "--dport", str(port), "-j", "REJECT", "--reject-with", "tcp-reset"],
            ["-A", "OUTPUT", "-p", "tcp", "--sport", str(port), "!", "--tcp-flags", "RST", "RST", "-j", "REJECT",
             "--reject-with", "tcp-reset"]]


def split_rules(peers: list[str]) -> list[list[str]]:
    """Every packet from or to the other side's addresses dropped."""
    out = []
    for ip in peers:
        out += [["-A", "INPUT", "-s", ip, "-j", "DROP"], ["-A", "OUTPUT", "-d", ip, "-j", "DROP"]]
    return out


def apply(pid: int, rules: list[list[str]]) -> None:
    for rule in rules:
        _ip(enter(pid, ["iptables", "-w", "5", *rule]))


def heal(pid: int) -> None:
    """Removes every rule of the filter table inside the container's namespace (the engine puts none there)."""
    _ip(enter(pid, ["iptables", "-w", "5", "-F"]))


def rules_in(pid: int) -> list[str]:
    proc = _ip(enter(pid, ["iptables", "-S"]))
    return [line for line in proc.stdout.splitlines() if not line.startswith("-P ")]
