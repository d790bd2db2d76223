"""How long a worker's consumer lets the broker hold an idle fetch (harness/clients/consume.py says why): long for a
worker that only reads forward, short for one whose partitions move under it (a seek after an abort, a new
leader, a group's assignment). Before: every worker used 20 ms; with 500 ms for all, `harness run eos
--fault abort` took 121 s against 10 s, each rewind waiting out a held fetch."""

from types import SimpleNamespace

from harness.clients import consume
from harness.faults import FAULTS
from harness.runtime.context import consumer_settings
from harness.runtime.crashplan import CrashPlan

ARGS = SimpleNamespace(bootstrap="127.0.0.1:1", group="harness-g", isolation="read_committed")


def test_a_worker_that_only_reads_forward_lets_the_broker_hold_idle_fetches_long():
    conf = consumer_settings(ARGS, {}, CrashPlan(seed=1, crash_rate=0.1))
    assert conf["fetch.wait.max.ms"] == consume.FETCH_WAIT_MS == 500
    assert consumer_settings(ARGS, {}, None)["fetch.wait.max.ms"] == 500


def test_a_worker_whose_partitions_move_keeps_idle_fetches_short():
    moved = CrashPlan(seed=1, crash_rate=0.1, partitions_move=True)
    assert consumer_settings(ARGS, {}, moved)["fetch.wait.max.ms"] == consume.FETCH_WAIT_MOVING_MS == 20
    group = consumer_settings(ARGS, {"assignment": "group"}, None)
    assert group["fetch.wait.max.ms"] == 20 and group["group.protocol"] == "classic"


def test_an_experiments_own_consumer_settings_win():
    conf = consumer_settings(ARGS, {}, None, {"fetch.wait.max.ms": 100, "enable.auto.commit": True})
    assert conf["fetch.wait.max.ms"] == 100 and conf["enable.auto.commit"] is True


def test_the_faults_that_seek_or_move_a_leader_say_so():
    moving = {name for name, f in FAULTS.items() if f.moves_partitions}
    assert moving == {"abort", "client-pause", "broker-kill", "broker-pause", "leader-kill", "rolling-upgrade",
                      "partition", "client-cut", "latency", "delay-request", "fail-request"}
