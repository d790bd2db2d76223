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
    from harness.core.errors import HarnessError
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


def _networked_home(tmp_path, nodes=3):
    home = tmp_path / "home"
    home.mkdir()
    netns.record_path(home).write_text(json.dumps({"subnet": 7, "nodes": nodes}))
    return home


def test_nodes_with_networks_listen_and_advertise_their_own_address_also_with_scram(tmp_path):
    from harness.stack.local_kafka import LocalKafka, voters
    home = _networked_home(tmp_path, 1)
    k = LocalKafka(home)
    assert k.host() == "198.18.7.1"
    for auth in ("none", "scram"):
        k.write_config(19092, 19093, auth)
        props = k.props.read_text()
        assert "127.0.0.1" not in props and "198.18.7.1:19092" in props and "1@198.18.7.1:19093" in props
    assert voters([1, 2], ["198.18.7.1", "198.18.7.2"]) == "1@198.18.7.1:1,2@198.18.7.2:2"
    assert LocalKafka(tmp_path / "plain").host() == "127.0.0.1" and voters([5]) == "1@127.0.0.1:5"


def test_the_choice_of_node_networks_keeps_what_runs_and_refuses_a_change_under_running_nodes(tmp_path):
    import pytest
    from harness.core.errors import HarnessError
    from harness.stack.local_services import _choose_networks
    home = _networked_home(tmp_path)
    assert _choose_networks(home, {}, True, None) is True          # stack.json lost: what runs wins
    assert _choose_networks(home, {"node_networks": True}, False, None) is True
    with pytest.raises(HarnessError, match="run in node networks of their own; to take them out"):
        _choose_networks(home, {}, True, False)
    plain = tmp_path / "plain"
    plain.mkdir()
    assert _choose_networks(plain, {}, True, None) is False
    with pytest.raises(HarnessError, match="do not run in node networks"):
        _choose_networks(plain, {}, True, True)


def test_the_local_stack_is_recognised_at_its_nodes_own_addresses(tmp_path, monkeypatch):
    from types import SimpleNamespace
    from harness.stack import local
    home = _networked_home(tmp_path)
    (home / "stack.json").write_text(json.dumps({"kind": "local", "brokers": 3}))
    monkeypatch.setattr(local, "state_dir", lambda: home)
    monkeypatch.setattr(local, "known_ports", lambda state, kafka, pg: {"kafka-1": 19192, "kafka-2": 19292,
                                                                        "kafka-3": 19392, "postgres": 15432})
    import harness.stack.local_kafka as lk
    import harness.stack.local_postgres as lp
    monkeypatch.setattr(lk.LocalKafka, "running", lambda self: SimpleNamespace(pid=1))
    monkeypatch.setattr(lp.LocalPostgres, "running", lambda self: SimpleNamespace(pid=2))
    dsn = "postgresql://harness@127.0.0.1:15432/harness"
    assert local.serves("198.18.7.1:19192,198.18.7.2:19292,198.18.7.3:19392", dsn)
    assert not local.serves("127.0.0.1:19192,127.0.0.1:19292,127.0.0.1:19392", dsn)
