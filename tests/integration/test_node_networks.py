"""Each node in a network namespace of its own (harness/stack/netns.py), on real namespaces, veth links and
iptables rules, with small TCP servers standing in for the nodes: a node isolated reaches nobody and nobody
reaches it; a split cuts only the links between the sides; a client cut resets the clients and spares the
nodes; heal undoes each; removal leaves no namespace, link or route, also after a SIGKILLed harness; a name
that is not ours is refused and left alone."""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from harness.core.errors import HarnessError
from harness.stack import netns

ROOT = Path(__file__).resolve().parents[2]
PORT = 7000

pytestmark = pytest.mark.skipif(netns.available() is not None, reason=f"no node networks here: {netns.available()}")

SERVER = """
import socket, sys, threading
def serve(c):
    c.sendall(b"hello")
    try:
        while (data := c.recv(100)):
            c.sendall(data)
    except OSError:
        pass
    c.close()
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind((sys.argv[1], int(sys.argv[2]))); s.listen(16)
print("ready", flush=True)
while True:
    threading.Thread(target=serve, args=(s.accept()[0],), daemon=True).start()
"""

CLIENT = """
import socket, sys
try:
    with socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=float(sys.argv[3])) as c:
        print(c.recv(5).decode() or "closed")
except socket.timeout:
    print("timeout")
except ConnectionRefusedError:
    print("refused")
except ConnectionResetError:
    print("reset")
except OSError as e:
    print(f"error {e.errno}")
"""


def reach(layout, to: int, frm: int | None = None, timeout: float = 1.0) -> str:
    """What a TCP client gets from node `to`: from the machine's namespace (frm None) or from node `frm`'s."""
    argv = [sys.executable, "-c", CLIENT, layout.address(to), str(PORT), str(timeout)]
    if frm is not None:
        argv = netns.in_namespace(layout, frm, argv)
    return subprocess.run(argv, capture_output=True, text=True, timeout=30).stdout.strip()


@pytest.fixture
def network(tmp_path):
    home = tmp_path / "home"
    layout = netns.make(home, 3)
    servers = []
    try:
        for n in (1, 2, 3):
            p = subprocess.Popen(netns.in_namespace(layout, n, [sys.executable, "-c", SERVER, layout.address(n),
                                                                 str(PORT)]), stdout=subprocess.PIPE, text=True)
            servers.append(p)
            assert p.stdout.readline().strip() == "ready"
        yield home, layout
    finally:
        for p in servers:
            p.kill()
            p.wait()
        netns.remove(home)


def leftovers(layout) -> list[str]:
    ns = [n for n in netns.existing_namespaces() if n.startswith(layout.prefix)]
    links = subprocess.run(["ip", "-o", "link", "show"], capture_output=True, text=True).stdout
    routes = subprocess.run(["ip", "-4", "route", "show", "table", "all"], capture_output=True, text=True).stdout
    return ns + [w for w in links.split() if w.startswith(layout.prefix)] + \
        [r for r in routes.splitlines() if f"{netns.NET}.{layout.subnet}." in r]


def test_every_node_reaches_every_other_and_the_machine_reaches_each(network):
    _, layout = network
    for to in (1, 2, 3):
        assert reach(layout, to) == "hello"
        for frm in (1, 2, 3):
            if frm != to:
                assert reach(layout, to, frm) == "hello", (frm, to)


def test_an_isolated_node_reaches_nobody_and_heals(network):
    _, layout = network
    netns.apply(layout, 1, netns.isolate_rules(layout, 1))
    assert reach(layout, 1) == "timeout"
    assert reach(layout, 1, 2) == "timeout" and reach(layout, 2, 1) == "timeout"
    assert reach(layout, 3, 2) == "hello" and reach(layout, 2) == "hello"        # the others go on
    netns.heal(layout, 1)
    assert netns.rules_in(layout, 1) == []
    assert reach(layout, 1) == "hello" and reach(layout, 2, 1) == "hello"


def test_a_split_cuts_only_the_links_between_the_sides(network):
    _, layout = network
    netns.apply(layout, 1, netns.split_rules(layout, 1, [2, 3]))          # minority {1}, majority {2, 3}
    assert reach(layout, 1, 2) == "timeout" and reach(layout, 3, 1) == "timeout"
    assert reach(layout, 1) == "hello" and reach(layout, 3, 2) == "hello"  # its clients, and the majority
    netns.heal(layout, 1)
    assert reach(layout, 1, 2) == "hello"


def test_a_client_cut_resets_the_clients_at_once_and_spares_the_nodes(network):
    _, layout = network
    import socket
    held = socket.create_connection((layout.address(2), PORT), timeout=5)       # open before the cut
    assert held.recv(5) == b"hello"
    netns.apply(layout, 2, netns.client_cut_rules(layout, 2))
    assert reach(layout, 2, timeout=5) in ("refused", "reset")                 # not a timeout: told at once
    with pytest.raises(ConnectionResetError):                                  # an open one breaks at its next packet
        held.sendall(b"x")
        held.recv(1)
    held.close()
    assert reach(layout, 2, 1) == "hello"
    netns.heal(layout, 2)
    assert reach(layout, 2) == "hello"


def test_a_lossy_client_link_drops_the_share_it_is_given(network):
    _, layout = network
    netns.apply(layout, 3, netns.loss_rules(layout, 3, 1.0))
    assert reach(layout, 3) == "timeout" and reach(layout, 3, 1) == "hello"
    netns.heal(layout, 3)
    netns.apply(layout, 3, netns.loss_rules(layout, 3, 0.0))
    assert reach(layout, 3) == "hello"


def test_removal_leaves_nothing_and_a_name_that_is_not_ours_is_refused_and_left_alone(tmp_path):
    home = tmp_path / "home"
    layout = netns.make(home, 2)
    assert len(leftovers(layout)) > 0
    assert sorted(netns.remove(home)) == layout.namespaces()
    assert leftovers(layout) == [] and not netns.record_path(home).exists()
    stranger = f"{layout.prefix}-n1"
    subprocess.run(["ip", "netns", "add", stranger], check=True)
    try:
        with pytest.raises(HarnessError, match="not this harness's: nothing was touched"):
            netns.make(home, 2)
        assert stranger in netns.existing_namespaces()
        assert netns.remove(home) == [] and stranger in netns.existing_namespaces()
    finally:
        subprocess.run(["ip", "netns", "del", stranger], check=False)


def test_a_network_a_process_still_runs_in_is_left_with_its_record(tmp_path):
    home = tmp_path / "home"
    layout = netns.make(home, 1)
    sleeper = subprocess.Popen(netns.in_namespace(layout, 1, ["sleep", "60"]))
    try:
        deadline = time.time() + 10
        while not subprocess.run(["ip", "netns", "pids", layout.namespace(1)], capture_output=True,
                                 text=True).stdout.strip() and time.time() < deadline:
            time.sleep(0.05)
        with pytest.raises(HarnessError, match=f"still in use, left as they are: {layout.namespace(1)} by pid"):
            netns.remove(home)
        assert layout.namespace(1) in netns.existing_namespaces() and netns.read_record(home) == layout
    finally:
        sleeper.kill()
        sleeper.wait()
    assert netns.remove(home) == [layout.namespace(1)]


def test_what_a_sigkilled_harness_made_is_removed_by_the_next_one(tmp_path):
    home = tmp_path / "home"
    code = (f"from pathlib import Path; from harness.stack import netns; "
            f"netns.make(Path({str(home)!r}), 3); print('made', flush=True); import time; time.sleep(60)")
    proc = subprocess.Popen([sys.executable, "-c", code], cwd=ROOT, stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "made"
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
    layout = netns.read_record(home)
    assert layout is not None and len(leftovers(layout)) > 0
    netns.remove(home)
    deadline = time.time() + 10
    while leftovers(layout) and time.time() < deadline:      # a veth's deletion can lag its namespace's
        time.sleep(0.1)
    assert leftovers(layout) == []
