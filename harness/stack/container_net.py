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
- client cut: the node's client listener ports (EXTERNAL, the one published on
  127.0.0.1, and PROXIED, where its Toxiproxy forwards), answered with TCP
  resets either way; its peers use the INTERNAL and CONTROLLER listeners and
  go on;
- loss (the latency fault's `loss`): a random share of the packets on the
  PROXIED listener's port dropped;
- split: the packets from and to the other side's container addresses.

The container's pid and addresses come from the engine (the Docker SDK), for
containers found by the compose project's labels; a pid the engine does not
give (a container that is not running) is no target.
"""

from __future__ import annotations

import os
import shutil
import subprocess

from ..core.errors import HarnessError
from .netns import isolate_rules  # noqa: F401 - the same rules in a container

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


def _run_inside(pid: int, argv: list[str]) -> subprocess.CompletedProcess:
    """Runs `argv` inside the network namespace of process `pid`, held open by a descriptor from the start:
    refused when that namespace is the harness's own or the machine's (an engine in another pid namespace,
    a container on the host's network, a pid reused since the engine named it), so a rule or a flush can
    never land in the machine's own firewall."""
    enter(pid, argv)            # the pid's shape
    try:
        fd = os.open(f"/proc/{pid}/ns/net", os.O_RDONLY)
    except OSError as e:
        raise HarnessError(f"cannot open the network namespace of container process {pid}: {e.strerror or e}")
    try:
        inode = os.fstat(fd).st_ino
        ours = {os.stat("/proc/self/ns/net").st_ino}
        try:
            ours.add(os.stat("/proc/1/ns/net").st_ino)     # the machine's, where it can be read
        except OSError:
            pass
        if inode in ours:
            raise HarnessError(f"process {pid} shares this machine's network namespace: it is not a broker "
                               f"container of its own, and the harness puts no rule there")
        cmd = ["nsenter", f"--net=/proc/self/fd/{fd}", *argv]
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=NSENTER_TIMEOUT_S, pass_fds=(fd,))
        except FileNotFoundError:
            raise HarnessError(f"{cmd[0]} is not installed") from None
        except subprocess.TimeoutExpired:
            raise HarnessError(f"`{' '.join(argv[:3])} ...` in container process {pid} did not answer within "
                               f"{NSENTER_TIMEOUT_S} s") from None
    finally:
        os.close(fd)
    if proc.returncode != 0:
        raise HarnessError(f"`{' '.join(argv)}` in container process {pid} failed: "
                           f"{(proc.stderr or proc.stdout).strip()[:300]}")
    return proc


def client_cut_rules(*ports: int) -> list[list[str]]:
    """The client listeners' ports (EXTERNAL, and PROXIED where the node's proxy forwards): every TCP packet
    to or from them answered with a reset."""
    out = []
    for port in ports:
        out += [["-A", "INPUT", "-p", "tcp", "--dport", str(port), "-j", "REJECT", "--reject-with", "tcp-reset"],
                ["-A", "OUTPUT", "-p", "tcp", "--sport", str(port), "!", "--tcp-flags", "RST", "RST", "-j", "REJECT",
                 "--reject-with", "tcp-reset"]]
    return out


def loss_rules(port: int, share: float) -> list[list[str]]:
    """A random `share` of the packets to and from the client listener `port` dropped (TCP resends them)."""
    p = f"{share:.4f}"
    return [["-A", "INPUT", "-p", "tcp", "--dport", str(port), "-m", "statistic", "--mode", "random",
             "--probability", p, "-j", "DROP"],
            ["-A", "OUTPUT", "-p", "tcp", "--sport", str(port), "-m", "statistic", "--mode", "random",
             "--probability", p, "-j", "DROP"]]


def split_rules(peers: list[str]) -> list[list[str]]:
    """Every packet from or to the other side's addresses dropped."""
    out = []
    for ip in peers:
        out += [["-A", "INPUT", "-s", ip, "-j", "DROP"], ["-A", "OUTPUT", "-d", ip, "-j", "DROP"]]
    return out


def apply(pid: int, rules: list[list[str]]) -> None:
    for rule in rules:
        _run_inside(pid, ["iptables", "-w", "5", *rule])


def heal(pid: int) -> None:
    """Removes every rule of the filter table inside the container's namespace (the engine puts none there:
    its embedded DNS uses the nat table)."""
    _run_inside(pid, ["iptables", "-w", "5", "-F"])


def rules_in(pid: int) -> list[str]:
    proc = _run_inside(pid, ["iptables", "-S"])
    return [line for line in proc.stdout.splitlines() if not line.startswith("-P ")]
