"""--fault rolling-upgrade on a hand-made cluster: its options and one-line refusals (a downgrade above all),
each node stopped cleanly and started on the new release in turn, waited for until in sync, then the features
finalized at the end or mid-run, and what the report and the timeline say."""

from types import SimpleNamespace

import pytest

from harness.core.errors import HarnessError
from harness.faults import FAULTS
from harness.faults.upgrade import RollingUpgrade
from harness.run.params import RunParams
from harness.stack.stack import Stack
from tests.unit.test_broker_faults import FakeHands, drive, fake_sup

SPEC = "rolling-upgrade:from=3.9.1,to=4.4.0"


class UpgradeHands(FakeHands):
    """FakeHands that also stop cleanly (the node ends after `stopping` ticks), start on a release, and are
    in sync only after `syncing` looks."""

    def __init__(self, stopping=3, syncing=2):
        super().__init__()
        self.stopping, self.syncing, self.ticks, self.looks = stopping, syncing, {}, 0

    def stop(self, node):
        self.calls.append(("stop", node))
        self.ticks[node] = self.stopping
        return f"pid {1000 + node}"

    def running(self, node):
        if node in self.ticks:
            self.ticks[node] -= 1
            if self.ticks[node] <= 0:
                del self.ticks[node]
                self.down.add(node)
            return True
        return node not in self.down

    def start(self, node, release=None):
        self.calls.append(("start", node, release))
        self.down.discard(node)
        self.looks = 0
        return f"pid {2000 + node}"

    def in_sync(self):
        self.looks += 1
        return self.looks > self.syncing


def upgrade(finalize="end"):
    f = RollingUpgrade("3.9.1", "4.4.0", finalize, every=1.0, seed=3)
    f.hands = UpgradeHands()
    f.run = SimpleNamespace(stack=SimpleNamespace(bootstrap_servers="127.0.0.1:1"))     # nobody answers: unknown
    f.started = []
    f._start_finalize = lambda: (f.started.append(True), setattr(f, "state", "finalizing"),
                                 setattr(f, "finalized", {"time": 1.0, "release_version": "4.4"}))
    f._poll_finalize = lambda: (f.finalized.update(exit_code=0), setattr(f, "state", "done"))
    return f


@pytest.mark.parametrize("spec, says", [
    ("rolling-upgrade:from=4.4.0,to=3.9.1", "to=3.9.1 is not newer than from=4.4.0; a downgrade is refused"),
    ("rolling-upgrade:from=4.4.0,to=4.4.0", "is not newer"),
    ("rolling-upgrade:to=4.4.0", "give from=RELEASE and to=RELEASE"),
    (SPEC + ",finalize=soon", "finalize must be end or mid"),
    (SPEC + ",count=2", "unknown option(s) count"),
    ("rolling-upgrade:from=3.9,to=4.4.0", "3.9"),
])
def test_bad_specs_and_a_downgrade_are_refused_in_one_line(spec, says):
    with pytest.raises(HarnessError, match=None) as e:
        RunParams("eos", faults=[spec]).validate()
    assert says in str(e.value) and "\n" not in str(e.value)


def test_it_is_a_declared_fault_that_runs_alone_among_the_broker_faults():
    assert FAULTS["rolling-upgrade"] is RollingUpgrade
    with pytest.raises(HarnessError, match="cannot run with broker-kill"):
        RunParams("eos", faults=[SPEC, "broker-kill"]).validate()


def test_only_a_cluster_the_harness_started_on_the_from_release_takes_it():
    f = RollingUpgrade("3.9.1", "4.4.0")
    with pytest.raises(HarnessError, match="the cluster runs Kafka 4.4.0, not from=3.9.1"):
        f.check_stack(Stack(kind="local", bootstrap_servers="x:1", postgres_dsn="", owned=True, brokers=3, kafka_version="4.4.0"))
    with pytest.raises(HarnessError, match=r"`harness up --stack compose --brokers 3 --kafka-version 3.9.1`"):
        f.check_stack(Stack(kind="compose", bootstrap_servers="x:1", postgres_dsn="", owned=True, brokers=3,
                            kafka_version="4.4.0"))
    with pytest.raises(HarnessError, match="a cluster the harness started"):
        f.check_stack(Stack(kind="external", bootstrap_servers="x:1", postgres_dsn="", owned=False, brokers=3,
                            kafka_version="3.9.1"))


def test_each_node_in_turn_stops_cleanly_restarts_on_the_new_release_and_is_waited_for_until_in_sync():
    f = upgrade()
    sup = fake_sup()
    drive(f, sup, seconds=60)
    assert f.hands.calls == [("stop", 1), ("start", 1, "4.4.0"), ("stop", 2), ("start", 2, "4.4.0"),
                             ("stop", 3), ("start", 3, "4.4.0")], f.hands.calls
    # finalize=end: every node runs 4.4.0, the features wait for the workers, and the run waits for them
    assert f.state == "to-finalize" and f.busy() and not f.started
    sup.slots[0].finished = True
    f.tick(sup)
    f.tick(sup)
    assert f.started and f.state == "done" and not f.busy()
    rows = f.entries([], [])
    nodes, last = rows[:3], rows[3]
    assert [r["node"] for r in nodes] == [1, 2, 3] and all(r["signal"] == "SIGTERM" for r in nodes)
    assert all(r["release"] == "4.4.0" and r["mark"] == f"node {r['node']} -> Kafka 4.4.0" for r in nodes)
    assert all(r["back_at"] >= r["recovered_at"] > r["time"] for r in nodes)
    assert last["target"] == "the cluster's features" and last["exit_code"] == 0 and last["finalize"] == "end"
    assert "Features finalized (end, exit 0): unknown (the broker could not be asked)" in f.sentence(f.story([]))
    f.features.append({"time": 2.0, "when": "after", "levels": {"metadata.version": 33, "transaction.version": 2}})
    f.features = f.features[-1:]
    assert f.entries([], [])[3]["mark"] == "features: metadata.version 4.4-IV2, transaction.version 2, group.version 0"


def test_finalize_mid_bumps_the_features_while_the_workers_still_run():
    f = upgrade("mid")
    drive(f, fake_sup(), seconds=60)
    assert f.started and f.state == "done"


def test_workers_that_finish_mid_upgrade_leave_no_node_behind_and_the_features_still_finalized():
    f = upgrade()
    sup = fake_sup()
    drive(f, sup, seconds=2)              # the first node is being upgraded
    sup.slots[0].finished = True
    assert f.busy()
    drive(f, sup, seconds=60)
    assert [c[0] for c in f.hands.calls] == ["stop", "start"] * 3 and f.started and f.state == "done"
    assert f.shortfall([], f.story([])) == ""


def test_a_run_that_ends_while_a_node_shuts_down_starts_it_again_on_the_new_release():
    f = upgrade()
    sup = fake_sup()
    for _ in range(10_000):
        f.tick(sup)
        if f.state == "out":
            break
        f.next_at = 0.0
    assert f.state == "out" and f.hands.calls == [("stop", 1)]
    f.finish(sup)
    assert f.hands.calls == [("stop", 1), ("start", 1, "4.4.0")] and f.state == "done"
