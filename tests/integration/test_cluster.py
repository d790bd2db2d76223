"""The 3-broker cluster for real: three Kafka JVMs, real SIGKILL and SIGSTOP of brokers, audited runs.

One cluster for the whole module (`harness up --brokers 3` in its own state folder), stopped with
`harness down --purge` at the end, which must leave no process of that folder behind. Runs are small
(200 payments with two broker kills; 600 paced payments for the producer) to fit CI's time.
"""

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from contextlib import contextmanager

import pytest

from harness.core import procs
from harness.run.runner import EXIT_CODES
from tests.conftest import ROOT, harness, processes_of, searchable_dir
from tests.unit.sample_report import validate
from tests import kafka_login
from harness.reporting.summary import whole

pytestmark = pytest.mark.integration


@contextmanager
def local_cluster(prefix: str, *up_args: str):
    """A 3-node local cluster in a fresh state folder (`harness up --brokers 3 *up_args`): {home, env, status};
    afterwards `harness down --purge`, and no process of the folder may survive it."""
    import shutil
    home = searchable_dir(prefix)
    env = {"HARNESS_HOME": str(home), "HARNESS_BOOTSTRAP_SERVERS": "", "HARNESS_POSTGRES_DSN": "",
           "HARNESS_STACK": "local"}
    st: dict = {}
    try:
        harness("up", "--brokers", "3", *up_args, env=env, check=True, timeout=300)
        st = json.loads(harness("status", "--json", env=env, check=True).stdout)
        kafka_login.settings(st["bootstrap_servers"])      # harness code this process calls logs in too
        yield {"home": home, "env": env, "status": st}
    finally:
        if st.get("bootstrap_servers"):     # its login must not reach a later cluster on the same ports
            kafka_login.forget(st["bootstrap_servers"])
        harness("down", "--purge", env=env, timeout=300)
        left = processes_of(home)
        shutil.rmtree(home, ignore_errors=True)
        assert not left, f"processes of the cluster's state folder survived `harness down`: {left}"


@pytest.fixture(scope="module")
def cluster():
    with local_cluster("harness-cluster-test-") as c:
        yield c


def nodes_story(cluster) -> str:
    """What each node's pid record and logs say: printed with a failure, so a CI log shows why."""
    from harness.stack.local_kafka import LocalKafka
    out = []
    for n in (1, 2, 3):
        k = LocalKafka(cluster["home"], n)
        rec = k.running()
        out.append(f"--- kafka-{n}: {'running as pid ' + str(rec.pid) if rec else 'NOT running'}\n{k.log_tail(25)}")
    return "\n".join(out)


def run_exp(cluster, tmp_path, *args, verdict="as-predicted") -> dict:
    out = tmp_path / "report"
    try:
        proc = harness("run", *args, "--quiet", "--out", str(out), env=cluster["env"], timeout=900)
    except subprocess.TimeoutExpired as e:
        raise AssertionError(f"harness run did not end in 900 s\n{(e.stderr or b'')[-3000:]!r}\n{nodes_story(cluster)}")
    assert proc.returncode == EXIT_CODES[verdict], proc.stderr[-3000:] + "\n" + nodes_story(cluster)
    d = json.loads((out / "report.json").read_text())
    validate(d)
    assert d["verdict"] == verdict, json.dumps(d["verdict_detail"], indent=1)
    return d


def read_keys(bootstrap: str, topic: str, isolation: str) -> Counter:
    """An independent reader: every record of `topic` as `isolation` sees it, counted per key."""
    from confluent_kafka import Consumer, TopicPartition
    c = Consumer(kafka_login.config(bootstrap, {"group.id": f"test-{time.time()}", "isolation.level": isolation,
                  "enable.auto.commit": False, "auto.offset.reset": "earliest"}))
    parts = list(c.list_topics(topic, timeout=10).topics[topic].partitions)
    ends = {p: c.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1] for p in parts}
    c.assign([TopicPartition(topic, p, 0) for p in parts])
    keys, deadline = Counter(), time.time() + 60
    while time.time() < deadline:
        for m in c.consume(500, timeout=0.5):
            if not m.error():
                keys[m.key().decode()] += 1
        pos = {tp.partition: tp.offset for tp in c.position([TopicPartition(topic, p) for p in parts])}
        if all(pos[p] >= ends[p] for p in parts):
            break
    c.close()
    return keys


def sigkill_mid_fault(env: dict, out, run_args: list, seen, timeout: float = 180):
    """`harness run *run_args --quiet --out out`, SIGKILLed once `seen()` gives something (its fault under
    way, seen from outside); returns what `seen()` gave then."""
    victim = subprocess.Popen([sys.executable, "-m", "harness.cli", "run", *run_args, "--quiet", "--out", str(out)],
                              cwd=ROOT, env={**os.environ, **env}, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline, found = time.time() + timeout, None
        while time.time() < deadline and not found:
            found = seen()
            time.sleep(0.2)
        assert found, f"the fault of `harness run {' '.join(run_args)}` was never seen under way"
        return found
    finally:
        victim.send_signal(signal.SIGKILL)
        victim.wait()


def test_three_brokers_each_with_its_own_folder_and_ports(cluster):
    st, home = cluster["status"], cluster["home"]
    assert st["brokers"] == 3 and st["healthy"]
    assert set(st["pids"]) == {"kafka-1", "kafka-2", "kafka-3", "postgres"}
    assert all(procs.alive(p) for p in st["pids"].values())
    from confluent_kafka.admin import AdminClient
    md = AdminClient(kafka_login.config(st["bootstrap_servers"])).list_topics(timeout=10)
    assert sorted(b.id for b in md.brokers.values()) == [1, 2, 3]
    assert all(b.host == "127.0.0.1" for b in md.brokers.values())
    assert len({b.port for b in md.brokers.values()}) == 3
    for n in (1, 2, 3):
        assert (home / f"kafka-{n}" / "data" / "meta.properties").exists()
    text = harness("status", env=cluster["env"]).stdout
    assert "kafka brokers:     3" in text and "kafka-3=" in text


def test_eos_with_broker_kills_and_crashes_stays_exact_under_read_committed(cluster, tmp_path):
    d = run_exp(cluster, tmp_path, "eos", "--messages", "200", "--fault", "planned-crash",
                "--fault", "broker-kill:count=2,every=1,down=2")
    # The second kill strikes only if the workers are still busy once the first node is back, which depends
    # on how fast the machine restarts a JVM (as in the eos-dedupe test below): either way the report says so.
    kills = [f for f in d["faults"] if f["fault"] == "broker-kill"]
    assert 1 <= len(kills) <= 2 and all(f["back_at"] and f["target"].startswith("kafka-") for f in kills)
    assert (f"Only {len(kills)} of 2 broker-kill faults struck (the workers finished first)" in whole(d)) == \
        (len(kills) < 2), whole(d)
    assert all("aborted_transactions" in f and "read_committed_stall_seconds" in f for f in kills)
    assert [t["fault"] for t in d["timeline"]["faults"]] == ["broker-kill"] * len(kills)
    ko = d["kafka_output"]
    assert (ko["read_committed"]["records"], ko["read_committed"]["duplicates"], ko["read_committed"]["lost"]) == \
        (200, 0, 0)
    # the aborted copies are a bound once brokers died, and the bound held
    assert "kafka.read_uncommitted.duplicates <= " in " ".join(d["predicted"]["expectations"])
    assert ko["read_uncommitted"]["duplicates"] >= len(d["crashes"])     # every planned crash left its copy
    # an independent read_committed reader agrees: each payment exactly once
    rc = read_keys(d["stack"]["bootstrap_servers"], d["stack"]["output_topic"], "read_committed")
    assert len(rc) == 200 and set(rc.values()) == {1}
    from confluent_kafka.admin import AdminClient
    md = AdminClient(kafka_login.config(d["stack"]["bootstrap_servers"])).list_topics(timeout=10)
    for topic in (d["stack"]["input_topic"], d["stack"]["output_topic"], "__transaction_state"):
        assert all(len(p.replicas) == 3 for p in md.topics[topic].partitions.values()), topic


def _events(out) -> list[dict]:
    p = out / "events.jsonl"
    return [json.loads(line) for line in p.read_text().splitlines() if line.strip()] if p.exists() else []


def test_a_transaction_coordinator_that_stops_answering_ends_the_worker_not_the_run(cluster, tmp_path):
    """The worker is held (SIGSTOP) mid-batch, its transaction coordinator frozen, the worker let go: its
    next transactional call cannot return (the client waits on the frozen node's connection until its own
    30 s timeout, then retries). The worker ends after --txn-stuck-after seconds, logs what it held, and
    its successor goes on. Before the call deadline the worker waited out the client's timeout and its
    retries (once, after a broker kill, until the run's time limit), and no txn_stuck event was written."""
    from harness.stack.brokers import leader_of
    from harness.stack.local_kafka import LocalKafka
    out = tmp_path / "report"
    proc = subprocess.Popen([sys.executable, "-m", "harness.cli", "run", "eos", "--messages", "300", "--workers", "1",
                             "--crash-rate", "0", "--commit-interval-ms", "200", "--txn-stuck-after", "3", "--quiet",
                             "--out", str(out)], cwd=ROOT, env={**os.environ, **cluster["env"]},
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    frozen = None
    try:
        deadline = time.time() + 120
        while not (first := [e for e in _events(out) if e["event"] == "first_message"]):
            assert time.time() < deadline and proc.poll() is None, "the worker never began"
            time.sleep(0.01)
        worker = first[0]["pid"]
        os.kill(worker, signal.SIGSTOP)          # the record in hand goes into a transaction once it runs again
        tid = next(e["transactional_id"] for e in _events(out) if e["event"] == "txn_initialized" and e["pid"] == worker)
        node, what = leader_of(cluster["status"]["bootstrap_servers"], None, transactional_id=tid)
        assert node, what
        frozen = LocalKafka(cluster["home"], node).running().pid
        os.kill(frozen, signal.SIGSTOP)
        os.kill(worker, signal.SIGCONT)
        while not (stuck := [e for e in _events(out) if e["event"] == "txn_stuck"]):
            assert time.time() < deadline and proc.poll() is None, "no transactional call was bounded"
            time.sleep(0.05)
    finally:
        if frozen:
            os.kill(frozen, signal.SIGCONT)
    _, err = proc.communicate(timeout=600)
    assert proc.returncode == EXIT_CODES["as-predicted"], err[-3000:] + "\n" + nodes_story(cluster)
    d = json.loads((out / "report.json").read_text())
    validate(d)
    ev = stuck[0]
    assert (ev["pid"], ev["attempt"]) == (worker, 1) and ev["seconds"] >= 3
    assert ev["call"] in ("send_offsets_to_transaction", "commit_transaction") and ev["produced"], ev
    # its successor took over, and the worker's end is described, not an unexplained death
    assert any(e["event"] == "started" and e["attempt"] == 2 for e in _events(out))
    assert d["verdict_detail"].get("unplanned_deaths") in (None, [])
    # committed or aborted, nobody can say: read_committed exact, the aborted copies a bound that held
    ko = d["kafka_output"]
    assert (ko["read_committed"]["records"], ko["read_committed"]["duplicates"], ko["read_committed"]["lost"]) == \
        (300, 0, 0)
    assert not d["predicted"]["exact"] and "a transactional call that never returned" in d["predicted"]["note"]
    bound = next(e for e in d["predicted"]["expectations"] if e.startswith("kafka.read_uncommitted.duplicates <= "))
    assert int(bound.rsplit(" ", 1)[1]) >= len(ev["produced"]) >= ko["read_uncommitted"]["duplicates"]


def test_eos_dedupe_with_broker_kills_is_exact_in_kafka_and_postgres(cluster, tmp_path):
    d = run_exp(cluster, tmp_path, "eos-dedupe", "--messages", "200", "--fault", "planned-crash",
                "--fault", "broker-kill:count=2,every=1,down=2")
    assert (d["counts"]["duplicates"], d["counts"]["lost"]) == (0, 0)
    assert d["ledger"]["actual_total"] == d["ledger"]["expected_total"]
    assert d["kafka_output"]["read_committed"]["duplicates"] == 0
    # The first kill strikes 1 s into the workers' time (they take several s); the second only if they are
    # still busy once the first node is back, which depends on the machine: either way the report says so.
    struck = len([f for f in d["faults"] if f["fault"] == "broker-kill"])
    assert 1 <= struck <= 2
    assert (f"Only {struck} of 2 broker-kill faults struck (the workers finished first)" in whole(d)) == \
        (struck < 2), whole(d)


@pytest.mark.slow          # 33 s; the default run keeps eos, eos-dedupe and group members under broker kills
def test_producer_with_and_without_idempotence_under_paused_brokers(cluster, tmp_path):
    on = run_exp(cluster, tmp_path / "on", "producer", "--messages", "600", "--idempotence", "on",
                 "--fault", "broker-pause")
    off = run_exp(cluster, tmp_path / "off", "producer", "--messages", "600", "--idempotence", "off",
                  "--fault", "broker-pause")
    for d in (on, off):
        assert len([f for f in d["faults"] if f["fault"] == "broker-pause"]) >= 1
        assert d["kafka_output"]["delivery_log"]["acked"] + d["kafka_output"]["delivery_log"]["unacked"] == 600
        assert d["counts"]["lost"] == 0                     # acks=all, min.insync.replicas=2: nothing acknowledged lost
    assert on["counts"]["duplicates"] == 0 and on["kafka_output"]["delivery_log"]["reordered"] == 0
    assert "kafka.read_committed.duplicates == 0" in on["predicted"]["expectations"]
    assert any(e.startswith("kafka.read_committed.duplicates <= ") for e in off["predicted"]["expectations"])
    # the report's count is the topic's: an independent reader finds the same duplicates
    rc = read_keys(off["stack"]["bootstrap_servers"], off["stack"]["output_topic"], "read_committed")
    assert sum(n - 1 for n in rc.values()) == off["counts"]["duplicates"]
    # the producer's delivery reports are in its history: acknowledged records are checked against the log
    for d, reorders in ((on, False), (off, True)):
        classes = d["anomaly_classes"]["classes"]
        assert classes["lost-write"]["count"] == 0 and classes["unseen"]["count"] == 0, classes
        assert not classes["lost-write"]["allowed"] and not classes["unseen"]["allowed"]   # acks=all
        assert classes["nonmonotonic-send"]["allowed"] is reorders
        dup = classes["duplicate"]
        assert dup["count"] == len([k for k, n in read_keys(d["stack"]["bootstrap_servers"], d["stack"]["output_topic"],
                                                            "read_committed").items() if n > 1])
        assert dup["allowed"] is reorders and d["verdict"] == "as-predicted", d["summary"]


def test_a_fire_and_forget_producer_counts_what_it_sent_and_the_topic_lacks(cluster, tmp_path):
    d = run_exp(cluster, tmp_path / "zero", "producer", "--messages", "300", "--acks", "0", "--fault", "broker-pause")
    prod = d["kafka_output"]["delivery_log"]
    assert prod["acked"] + prod["unacked"] == 300 and d["params"]["acks"] == "0"
    assert "none acknowledged" in whole(d) and "kafka.read_committed.lost <= 300" in d["predicted"]["expectations"]
    # what the report calls lost is what an independent reader finds missing, id for id
    seen = read_keys(d["stack"]["bootstrap_servers"], d["stack"]["output_topic"], "read_committed")
    missing = sorted(f"pay-{i:06d}" for i in range(1, 301) if f"pay-{i:06d}" not in seen)
    assert d["counts"]["lost"] + (d["counts"].get("unprocessed") or 0) == len(missing)
    assert set(d["anomalies"]["lost_ids"]) <= set(missing)
    # its sends are in the history without a place in the log (acks=0 returns no offset): nothing set aside
    assert d["anomaly_classes"]["history"]["bad_lines"] == 0
    assert d["anomaly_classes"]["classes"]["lost-write"]["allowed"]


def test_bad_cluster_input_is_one_line(cluster):
    proc = harness("run", "offset-after", "--fault", "leader-kill:of=output", env=cluster["env"])
    assert proc.returncode == 2 and proc.stderr.strip().startswith("error: --fault leader-kill needs an output topic")
    proc = harness("up", "--brokers", "1", env=cluster["env"])
    assert proc.returncode == 2 and "holds a 3-broker stack" in proc.stderr and "Traceback" not in proc.stderr


def test_killing_the_harness_mid_fault_leaves_nothing_but_the_recorded_brokers(cluster, tmp_path):
    home, env = cluster["home"], cluster["env"]
    before = {n: json.loads((home / f"kafka-{n}" / "kafka.pid").read_text())["pid"] for n in (1, 2, 3)}
    run = subprocess.Popen([sys.executable, "-m", "harness.cli", "run", "eos", "--messages", "3000", "--quiet",
                            "--out", str(tmp_path / "r"), "--fault", "broker-kill:count=5,every=0.5,down=1"],
                           cwd=ROOT, env={**os.environ, **env}, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.time() + 240
        restarted = None
        while time.time() < deadline and restarted is None:
            for n in (1, 2, 3):
                try:
                    pid = json.loads((home / f"kafka-{n}" / "kafka.pid").read_text())["pid"]
                except (OSError, ValueError):
                    continue
                if pid != before[n] and procs.alive(pid):
                    restarted = n
            time.sleep(0.2)
        assert restarted, "no broker was restarted by the fault"
    finally:
        run.send_signal(signal.SIGKILL)        # no cleanup at all: the harness dies mid-run
        run.wait()
    # The run's own children die with it (PR_SET_PDEATHSIG), but not at the same instant: wait for them
    # to go rather than for a fixed time, which a loaded machine may not honour.
    deadline = time.time() + 60
    while True:
        recorded = set()
        for n in (1, 2, 3):
            rec = json.loads((home / f"kafka-{n}" / "kafka.pid").read_text())
            if procs.alive(rec["pid"]):
                recorded.add(rec["pid"])
        pg = json.loads((home / "postgres" / "postgres.pid").read_text())["pid"] if \
            (home / "postgres" / "postgres.pid").exists() else None
        ours = {p for p in processes_of(home) if p not in recorded}
        # Postgres's own children carry the data folder too; every other process of the folder is a recorded node
        strays = [p for p in ours if pg is None or not _descends_from(p, pg)]
        if not strays or time.time() > deadline:
            break
        time.sleep(0.2)
    assert not strays, f"processes of the state folder that no pid record names: {strays}"
    # `harness up` brings back whatever the dead run left down, and the module's `down` stops it all
    up = harness("up", env=env, timeout=300)
    assert up.returncode == 0, up.stdout + up.stderr + nodes_story(cluster)
    # status probes the cluster anew (metadata, a topic made and deleted): a node that `up` has just seen
    # answer may still be settling its leaderships, so wait for the state rather than ask once
    deadline = time.time() + 60
    while True:
        st = json.loads(harness("status", "--json", env=env).stdout)
        if (st["healthy"] and all(st["pids"].values())) or time.time() > deadline:
            break
        time.sleep(1)
    assert st["healthy"] and all(st["pids"].values()), f"{st}\n{nodes_story(cluster)}"


def _descends_from(pid: int, ancestor: int) -> bool:
    while pid > 1:
        if pid == ancestor:
            return True
        try:
            pid = int(open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            return False
    return False


def test_consumers_in_a_real_group_stay_exact_through_rebalances(cluster, tmp_path):
    """--assignment group: workers subscribe; each crash moves partitions, each return takes some back."""
    d = run_exp(cluster, tmp_path, "offset-after", "--assignment", "group", "--partitions", "4", "--workers", "2",
                "--messages", "200", "--commit-every", "5")
    g = d["consumer_group"]
    assert g["protocol"] == "classic" and g["assignments"] > len(d["crashes"]) > 0 and g["revocations"] > 0
    assert d["predicted"]["exact"] and d["counts"]["lost"] == 0
    assert d["counts"]["duplicates"] == d["predicted"]["duplicates"] > 0
    # the ledger, recounted with plain SQL, agrees with the report
    proc = harness("audit", str(tmp_path / "report"), env=cluster["env"], timeout=300)
    assert proc.returncode == 0 and "agree" in proc.stdout + proc.stderr, proc.stderr[-2000:]
