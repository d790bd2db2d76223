"""--client java on the real stack: the eos family's loop on Kafka's own Java client, killed at its kill
points (real halts, real SIGSTOP for the zombie) and judged by the same predictors and anomaly checker as
the Python workers;
an independent reader agrees; the client's own log shows a new producer epoch at every transaction's end
(transaction version 2, which the default 4.x broker finalizes). The 3.9 side is in test_kafka_versions.py."""

import json

import pytest

from harness.reporting.summary import whole
from tests.conftest import harness
from tests.integration.plain_reader import read_topic
from tests.integration.test_experiments import run_exp

pytestmark = pytest.mark.integration


def _epochs_rose_per_transaction(d) -> None:
    assert d["environment"]["kafka_transaction_version"] == "2"
    tp = d["transaction_protocol"]
    assert tp["client"] == "java" and tp["version_seen"] == "2", tp
    assert tp["transactions_ended"] == tp["commits_with_epoch_known"] == tp["commits_epoch_bumped"] > 0
    assert tp["processes_said_tv2"]["enabled"] > 0 == tp["processes_said_tv2"]["disabled"]
    for t in tp["examples"]:
        assert t["ended"] == [t["began"][0], t["began"][1] + 1], t


def test_java_workers_crash_at_every_point_and_are_judged_like_the_python_ones(stack, tmp_path):
    d = run_exp(stack, tmp_path, "eos-boundary", "--client", "java", "--kill-point", "any", "--workers", "2", "--partitions", "4",
                "--messages", "300")
    assert d["params"]["client"] == "java"
    crashes = d["crashes"]
    assert len(crashes) == 30 and {c["worker"] for c in crashes} == {"w0", "w1"}
    assert len({c["point"] for c in crashes}) >= 3            # a seeded point per id, among the loop's five
    # exact: every ledger row written again is one the crash records listed, and Kafka's output is exact
    assert d["predicted"]["exact"] is True
    assert d["counts"]["duplicates"] == d["predicted"]["duplicates"] == sum(len(c["unacked"]) for c in crashes) > 0
    ko = d["kafka_output"]
    assert (ko["read_committed"]["duplicates"], ko["read_committed"]["lost"]) == (0, 0)
    assert ko["read_uncommitted"]["duplicates"] == d["predicted"]["kafka_output"]["read_uncommitted"]["duplicates"]
    seen, stable, ends = read_topic(d["stack"]["bootstrap_servers"], d["stack"]["output_topic"], "read_committed")
    assert len(seen) == 300 and sorted(seen.values()) == sorted(set(seen.values())) and stable == ends
    _epochs_rose_per_transaction(d)
    assert len(d["timings"]["restart_seconds"]) == 30
    # the Java workers' histories feed the anomaly checker as the Python ones do: every class checked, none found
    classes = d["anomaly_classes"]["classes"]
    assert len(classes) == 11 and {n: c["count"] for n, c in classes.items()} == {n: 0 for n in classes}
    assert d["anomaly_classes"]["history"]["processes"] == 32      # two slots, 30 crashes


def test_a_java_zombie_is_fenced(stack, tmp_path):
    d = run_exp(stack, tmp_path, "zombie", "--client", "java", "--messages", "200")
    z = d["fault_details"]["zombie"]
    assert z["state"] == "done" and z["fenced"] is True and z["zombie_exit_code"] == 3, z
    assert "Fenced" in z["fenced_error"] or "epoch" in z["fenced_error"], z["fenced_error"]
    _epochs_rose_per_transaction(d)


def test_what_only_the_python_loop_does_is_refused_in_one_line(stack):
    for args, says in ((["eos", "--client", "java", "--fault", "abort"], "--fault abort needs a worker loop"),
                       (["eos-streams", "--client", "java"], "--client applies to")):
        proc = harness("run", *args, "--messages", "10", env=stack["env"], timeout=120)
        assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
        assert says in proc.stderr.strip().splitlines()[-1]


@pytest.mark.parametrize("experiment, args, started", [
    ("eos", ("--client", "java", "--messages", "20000"), "TXN-END"),
    # A Kafka Streams worker at full speed could finish 20,000 records (and be idle at the stop) while the other
    # starts: a ledger row per record by JDBC and five times the records keep both busy on a quiet machine too.
    ("eos-streams", ("--effect", "postgres", "--messages", "100000"), "FIRST-RECORD"),
    # The same under the streams protocol (KIP-1071): Streams names its producers' transactional.ids by the process
    # id whichever protocol assigns its tasks. Nightly: the default run keeps a real streams-protocol run.
    pytest.param("eos-streams", ("--effect", "postgres", "--messages", "100000", "--streams-protocol", "streams"),
                 "FIRST-RECORD", marks=pytest.mark.slow, id="eos-streams-streams-protocol"),
])
def test_an_interrupt_fences_the_transaction_a_stopped_jvm_left_open(stack, tmp_path, experiment, args, started):
    """Ctrl-C SIGKILLs the busy JVMs where they stand, likely inside a transaction: the harness's doing. Their
    transactional.id (ours for the Java workers; for Kafka Streams the one named by the process id it kept in its
    state directory) is fenced before the final read, so no transaction of theirs hangs and the report blames
    no hanging transaction on the system under test. No crashes are planned: every JVM is busy at the stop."""
    import signal
    import time
    from tests.integration.test_experiments import _start_run
    out = tmp_path / experiment
    proc = _start_run(stack, out, experiment, *args, "--crash-rate", "0", "--workers", "2", "--partitions", "2")
    deadline = time.monotonic() + 240
    while not all(started in (f.read_text(errors="replace") if f.exists() else "")
                  for f in (out / "workers" / "w0.log", out / "workers" / "w1.log")):
        assert time.monotonic() < deadline and proc.poll() is None, proc.communicate()[1][-2000:] if proc.poll() else ""
        time.sleep(0.2)
    time.sleep(1)
    proc.send_signal(signal.SIGINT)
    proc.communicate(timeout=300)
    assert proc.returncode == 130
    d = json.loads((out / "report.json").read_text())
    assert d["verdict"] == "interrupted"
    stopped = d["verdict_detail"]["killed_at_stop"]
    assert {x["worker"] for x in stopped} == {"w0", "w1"}, stopped
    assert all(x.get("transaction") == "fenced" for x in stopped), stopped
    assert d["anomaly_classes"]["classes"]["hanging-transaction"]["count"] == 0
    assert "fenced their transactional.id (2)" in whole(d)
