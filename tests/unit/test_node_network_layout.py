"""The node networks' names, addresses and commands (harness/stack/netns.py), without making any."""

import json

from harness.stack import netns


def test_names_fit_an_interface_and_addresses_are_distinct():
    layout = netns.Layout(netns.prefix_of("/some/home"), 42, 9)
    assert len(layout.client_link(9)) <= 15 and all(len(n) <= 32 for n in layout.namespaces())
    addrs = [layout.address(n) for n in range(1, 10)] + [layout.client_address(n) for n in range(1, 10)]
    assert len(set(addrs)) == 18 and all(a.startswith("198.18.42.") for a in addrs)
    assert netns.prefix_of("/some/home") == netns.prefix_of("/some/home/") != netns.prefix_of("/other")


def test_a_three_node_network_has_a_client_link_per_node_and_a_link_per_pair():
    cmds = netns.Layout("hkabcdef", 7, 3).commands()
    veths = [c for c in cmds if "veth" in c]
    assert len(veths) == 3 + 3
    assert ["ip", "route", "add", "198.18.7.2/32", "dev", "hkabcdefc2", "src", "198.18.7.102"] in cmds
    assert ["ip", "-n", "hkabcdef-n1", "route", "add", "198.18.7.3/32", "dev", "m3", "src", "198.18.7.1"] in cmds
    # nothing touches the machine's firewall, forwarding or default routes
    flat = [" ".join(c) for c in cmds]
    assert not any("iptables" in c or "sysctl" in c or "default" in c for c in flat)


def test_rules_stay_inside_the_namespace_and_say_what_they_cut():
    layout = netns.Layout("hkabcdef", 7, 3)
    assert netns.in_namespace(layout, 2, ["iptables", "-F"]) == ["ip", "netns", "exec", "hkabcdef-n2", "iptables", "-F"]
    assert ["-A", "INPUT", "-i", "m3", "-j", "DROP"] in netns.split_rules(layout, 1, [2, 3])
    assert all("client" in r for r in netns.client_cut_rules(layout, 1) + netns.loss_rules(layout, 1, 0.25))
    assert "0.2500" in netns.loss_rules(layout, 1, 0.25)[0]


def test_the_record_is_read_as_untrusted(tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    assert netns.read_record(home) is None
    for bad in ("not json", "[]", '{"subnet": "7", "nodes": 3}', '{"subnet": 7, "nodes": 99}',
                '{"subnet": 0, "nodes": 3}', '{"subnet": 7}'):
        netns.record_path(home).write_text(bad)
        assert netns.read_record(home) is None, bad
    # names come from the home, never from the file
    netns.record_path(home).write_text(json.dumps({"prefix": "eth0", "subnet": 7, "nodes": 2}))
    assert netns.read_record(home) == netns.Layout(netns.prefix_of(home), 7, 2)


def test_a_subnet_is_refused_only_where_a_route_names_it(monkeypatch):
    from types import SimpleNamespace
    routes = "default via 192.168.1.1 dev eth0\n0.0.0.0/1 via 10.8.0.1 dev tun0\n10.0.0.0/8 dev tun0\n" \
             "local 127.0.0.1 dev lo table local\n198.18.0.0/15 dev bench0\n"
    monkeypatch.setattr(netns, "_ip", lambda args, check=True: SimpleNamespace(stdout=routes, returncode=0))
    try:
        netns.free_subnet("hk000005")
        raise AssertionError("a route naming the whole benchmark range leaves no /24")
    except netns.HarnessError:
        pass
    routes = "default via 192.168.1.1 dev eth0\n0.0.0.0/1 via 10.8.0.1 dev tun0\n198.18.6.0/24 dev x\n"
    assert netns.free_subnet("hk000005") == 7          # 6 is named; broad routes do not count


def test_a_record_that_is_a_fifo_a_link_or_a_folder_is_never_followed_read_or_removed(tmp_path):
    import os
    import pytest
    from harness.errors import HarnessError
    home = tmp_path / "home"
    home.mkdir()
    os.mkfifo(netns.record_path(home))
    assert netns.read_record(home) is None                 # at once: a FIFO is not waited on
    netns.record_path(home).unlink()
    secret = tmp_path / "secret"
    secret.write_text('{"subnet": 7, "nodes": 2}')
    netns.record_path(home).symlink_to(secret)
    assert netns.read_record(home) is None                 # a link is not followed
    netns.record_path(home).unlink()
    netns.record_path(home).mkdir()
    with pytest.raises(HarnessError, match="is not a file"):
        netns.remove(home)
    assert netns.record_path(home).is_dir()
