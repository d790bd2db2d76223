"""The node networks' names, addresses and commands (harness/stack/netns.py), without making any."""

import json

from harness.stack import netns


def test_names_fit_an_interface_and_addresses_are_distinct():
    layout = netns.Layout(netns.prefix_of("/some/home"), 42, 9)
    assert len(layout.client_link(9)) <= 15 and all(len(n) <= 32 for n in layout.namespaces())
    addrs = [layout.address(n) for n in range(1, 10)] + [layout.client_address(n) for n in range(1, 10)]
    assert len(set(addrs)) == 18 and all(a.startswith("10.213.42.") for a in addrs)
    assert netns.prefix_of("/some/home") == netns.prefix_of("/some/home/") != netns.prefix_of("/other")


def test_a_three_node_network_has_a_client_link_per_node_and_a_link_per_pair():
    cmds = netns.Layout("hkabcdef", 7, 3).commands()
    veths = [c for c in cmds if "veth" in c]
    assert len(veths) == 3 + 3
    assert ["ip", "route", "add", "10.213.7.2/32", "dev", "hkabcdefc2", "src", "10.213.7.102"] in cmds
    assert ["ip", "-n", "hkabcdef-n1", "route", "add", "10.213.7.3/32", "dev", "m3", "src", "10.213.7.1"] in cmds
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
