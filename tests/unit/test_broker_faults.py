"""Broker faults on hand-made clusters: the seeded schedule, the Docker SDK path with a stand-in client,
the one-line refusals, and the pid-record checks that keep every signal on our own nodes."""

import signal
import time
from types import SimpleNamespace

import pytest

from harness.core.errors import HarnessError
from harness.faults import FAULTS, build
from harness.faults.broker import BrokerKill, BrokerPause, LeaderKill
from harness.run.params import RunParams
from harness.stack import brokers, pidrecord
from harness.stack.brokers import ComposeBrokers, LocalBrokers, coordinator_partition, for_stack, java_string_hash
from harness.stack.stack import Stack


# -- a cluster that records what was done to it --------------------------------------------

class FakeHands:
    kind = "fake"

    def __init__(self):
        self.calls, self.down, self.frozen = [], set(), set()

    def node_ids(self):
        return [1, 2, 3]

    def target(self, node):
        return f"kafka-{node}"

    def kill(self, node):
        self.calls.append(("kill", node))
        self.down.add(node)
        return f"pid {1000 + node}"

    def start(self, node):
        self.calls.append(("start", node))
        self.down.discard(node)
        return f"pid {2000 + node}"

    def pause(self, node):
        self.calls.append(("pause", node))
        self.frozen.add(node)
        return f"pid {1000 + node}"

    def resume(self, node):
        self.calls.append(("resume", node))
        self.frozen.discard(node)

    def answers(self, node):
        return node not in self.down and node not in self.frozen

    def running(self, node):
        return node not in self.down

    def condition(self, node):
        return f"kafka-{node} exited with status 1" if node in self.down else f"kafka-{node} runs"

    def log_tail(self, node, lines=5):
        return "ERROR Exiting Kafka due to fatal exception\nlast line"


def fake_sup(finished=False):
    slot = SimpleNamespace(first_message_at=time.time() - 100, finished=finished, attempt=1)
    return SimpleNamespace(slots=[slot])


def drive(fault, sup, seconds=None):
    """Tick the fault with a clock that jumps, until it is done (or `seconds` of fake time passed)."""
    now = [time.time()]
    real = time.time
    try:
        time.time = lambda: now[0]
        for _ in range(10_000):
            fault.tick(sup)
            if fault.state == "done" or (seconds is not None and now[0] - real() > seconds):
                break
            now[0] += 0.3
    finally:
        time.time = real


def test_broker_kill_kills_then_restarts_one_node_at_a_time_on_a_seeded_schedule():
    f = BrokerKill(count=3, every=1.0, down=2.0, seed=7)
    f.hands = FakeHands()
    drive(f, fake_sup())
    kinds = [c[0] for c in f.hands.calls]
    assert kinds == ["kill", "start"] * 3, f.hands.calls
    assert all(a[1] == b[1] for a, b in zip(f.hands.calls[::2], f.hands.calls[1::2])), "restart the node killed"
    rows = f.entries([], [])
    assert len(rows) == 3 and all(r["fault"] == "broker-kill" and r["signal"] == "SIGKILL" for r in rows)
    assert all(r["back_at"] >= r["recovered_at"] > r["time"] for r in rows)
    assert all(1.0 <= r["out_seconds"] <= 2.4 for r in rows)          # down=2: seeded within 1..2 s (ticks of 0.3)
    # the same seed chooses the same nodes and delays
    g = BrokerKill(count=3, every=1.0, down=2.0, seed=7)
    assert (g.waits, g.downs, g.picks) == (f.waits, f.downs, f.picks)
    assert BrokerKill(count=3, seed=8).picks != f.picks


def test_broker_pause_freezes_and_resumes_and_the_run_waits_for_it():
    f = BrokerPause(count=1, every=0.5, down=1.0, seed=1)
    f.hands = FakeHands()
    sup = fake_sup()
    f.tick(sup)                      # schedules the first fault
    assert not f.busy()
    drive(f, sup, seconds=2.0)
    assert f.hands.calls[0][0] == "pause"
    drive(f, sup)
    assert [c[0] for c in f.hands.calls] == ["pause", "resume"] and not f.busy()
    assert f.entries([], [])[0]["signal"] == "SIGSTOP"


def test_no_node_stays_killed_or_frozen_when_the_run_stops_mid_fault():
    for cls, undo in ((BrokerKill, "start"), (BrokerPause, "resume")):
        f = cls(count=2, every=0.1, down=600, seed=3)
        f.hands = FakeHands()
        sup = fake_sup()
        drive(f, sup, seconds=3)
        assert f.busy() and f.hands.calls and f.hands.calls[-1][0] in ("kill", "pause")
        f.finish(sup)
        assert f.hands.calls[-1][0] == undo and not f.hands.down and not f.hands.frozen


def test_faults_missed_because_the_workers_finished_are_said():
    f = BrokerKill(count=2, seed=1)
    f.hands = FakeHands()
    drive(f, fake_sup(finished=True))
    assert f.hands.calls == [] and f.state == "done"
    assert "Only 0 of 2 broker-kill faults struck" in f.shortfall([], f.story([]))


def test_aborts_seen_during_a_fault_are_listed_with_it():
    f = BrokerKill(count=1, every=0.1, down=0.5, seed=2)
    f.hands = FakeHands()
    drive(f, fake_sup())
    t = f.struck[0]["time"]
    events = [{"event": "txn_aborted", "t": t + 0.5, "produced": ["a", "b"]},
              {"event": "txn_aborted", "t": t - 5, "produced": ["z"]},         # before the fault: not its own
              {"event": "fenced", "t": t + 1, "produced": ["c"]}]
    row = f.entries([], events)[0]
    assert row["aborted_transactions"] == 2 and row["aborted_records_at_most"] == 3
    assert f.bounds_aborts(f.story(events))


def test_a_restart_that_fails_is_reported_not_raised():
    class Broken(FakeHands):
        def start(self, node):
            raise HarnessError("Kafka node 2 exited at once")
    f = BrokerKill(count=2, every=0.1, down=0.3, seed=2)
    f.hands = Broken()
    drive(f, fake_sup())
    assert f.state == "done" and "exited at once" in f.entries([], [])[0]["note"]
    assert f.stops_run().startswith("broker-kill: kafka-")
    assert f.stops_run().endswith("could not be restarted: Kafka node 2 exited at once")


def test_a_node_whose_restarted_process_ends_stops_the_run_at_once_naming_it_and_its_log():
    """A restarted node that exits is given up within GONE_GRACE_S, not waited for RECOVERY_TIMEOUT_S, and
    the run is told to stop (before, the run waited out its time limit and nothing said which node)."""
    from harness.faults.broker import GONE_GRACE_S, RECOVERY_TIMEOUT_S

    class DiesAfterStart(FakeHands):
        def start(self, node):
            self.calls.append(("start", node))      # started, but its process ends at once: still down
            return f"pid {2000 + node}"
    f = BrokerKill(count=2, every=0.1, down=0.3, seed=2)
    f.hands = DiesAfterStart()
    assert f.stops_run() is None
    drive(f, fake_sup(), seconds=RECOVERY_TIMEOUT_S)
    entry = f.entries([], [])[0]
    assert f.state == "done" and len(f.struck) == 1 and entry["back_at"] is None
    node = f.struck[0]["node"]
    waited = float(entry["note"].split("did not come back ")[1].split(" s ")[0])
    assert waited <= GONE_GRACE_S + 1
    assert f"kafka-{node} exited with status 1" in entry["note"] and "Exiting Kafka due to fatal" in entry["note"]
    assert f.stops_run().startswith(f"broker-kill: kafka-{node} (node {node}) did not come back")
    assert "answering" not in f.sentence(None)


def test_a_node_that_runs_but_never_answers_is_given_up_at_the_bound():
    from harness.faults.broker import RECOVERY_TIMEOUT_S

    class Silent(FakeHands):
        def running(self, node):
            return True

        def answers(self, node):
            return node not in self.calls_started and super().answers(node)

        def start(self, node):
            self.calls_started = {node}
            return super().start(node)
    h = Silent()
    h.calls_started = set()
    f = BrokerKill(count=1, every=0.1, down=0.3, seed=2)
    f.hands = h
    drive(f, fake_sup(), seconds=RECOVERY_TIMEOUT_S + 30)
    assert f.state == "done" and f.stops_run() and f"not come back {RECOVERY_TIMEOUT_S}" in f.stops_run()


def test_a_node_still_writing_its_log_is_waited_for_past_the_bound_but_not_past_the_cap():
    """A loaded machine brought a killed broker container back after more than RECOVERY_TIMEOUT_S while its log
    showed it rejoining the quorum: the run was given up as incomplete. A node whose log still changes is waited
    for (up to RECOVERY_CAP_S); one whose log went quiet is given up at the bound."""
    from harness.faults.broker import RECOVERY_CAP_S, RECOVERY_TIMEOUT_S

    class Slow(FakeHands):
        """Running, its log growing, answering only after `answer_after` calls of answers()."""
        def __init__(self, answer_after):
            super().__init__()
            self.lines, self.asked, self.answer_after, self.restarted = 0, 0, answer_after, set()

        def running(self, node):
            return True

        def start(self, node):
            self.restarted.add(node)
            return super().start(node)

        def answers(self, node):
            if node in self.restarted:
                self.asked += 1
                return self.asked > self.answer_after
            return super().answers(node)

        def log_tail(self, node, lines=5):
            self.lines += 1
            return f"INFO recovering segment {self.lines}"
    # answers after ~200 s of fake time (checks every 0.3 s): past the bound, before the cap
    h = Slow(answer_after=int(200 / 0.3))
    f = BrokerKill(count=1, every=0.1, down=0.3, seed=2)
    f.hands = h
    drive(f, fake_sup(), seconds=RECOVERY_CAP_S + 60)
    entry = f.entries([], [])[0]
    assert f.stops_run() is None and entry["back_at"] is not None
    assert entry["until_answering_seconds"] > RECOVERY_TIMEOUT_S
    assert not any(k.startswith("log_") for k in entry)          # the bookkeeping stays out of the report
    # one that never answers, however busy its log, is given up at the cap
    g = BrokerKill(count=1, every=0.1, down=0.3, seed=2)
    g.hands = Slow(answer_after=10 ** 9)
    drive(g, fake_sup(), seconds=RECOVERY_CAP_S + 60)
    assert g.state == "done" and f"not come back {RECOVERY_CAP_S}" in g.stops_run()


# -- options, declarations, refusals -------------------------------------------------------

def test_broker_fault_options_are_checked_in_one_line():
    p = RunParams("eos", faults=["broker-kill:count=0"])
    with pytest.raises(HarnessError, match="count must be between 1 and 100"):
        p.validate()
    with pytest.raises(HarnessError, match="unknown option"):
        RunParams("eos", faults=["broker-pause:kills=2"]).validate()
    with pytest.raises(HarnessError, match="of must be input, output or coordinator"):
        RunParams("eos", faults=["leader-kill:of=me"]).validate()
    with pytest.raises(HarnessError, match="leader-kill needs"):
        RunParams("offset-after", faults=["leader-kill:of=output"]).validate()
    built = build(RunParams("eos", faults=["broker-kill:count=3,every=1,down=2", "planned-crash"]), None or
                  __import__("harness.experiments", fromlist=["get"]).get("eos"))
    assert [f.name for f in built] == ["broker-kill", "planned-crash"] and built[0].count == 3
    assert {"broker-kill", "broker-pause", "leader-kill"} <= set(FAULTS)


def test_leader_kill_targets_what_the_declaration_names():
    from harness.experiments import get
    f = build(RunParams("eos", faults=["leader-kill"]), get("eos"))[0]
    f.setup(SimpleNamespace(exp=get("eos")))
    assert f.of == "coordinator"
    g = build(RunParams("offset-after", faults=["leader-kill"]), get("offset-after"))[0]
    g.setup(SimpleNamespace(exp=get("offset-after")))
    assert g.of == "input"


def local_stack(n):
    return Stack(kind="local", bootstrap_servers="127.0.0.1:1", postgres_dsn="", owned=True, brokers=n)


def test_a_broker_fault_on_one_broker_is_one_clear_line():
    with pytest.raises(HarnessError) as e:
        BrokerKill().check_stack(local_stack(1))
    assert "needs the 3-broker cluster" in str(e.value) and "harness up --brokers 3" in str(e.value)
    with pytest.raises(HarnessError, match="never touches an external cluster"):
        for_stack(Stack(kind="external", bootstrap_servers="x:1", postgres_dsn="", owned=False, brokers=3),
                  "broker-pause")
    compose_one = Stack(kind="compose", bootstrap_servers="x:1", postgres_dsn="", owned=True, brokers=1)
    with pytest.raises(HarnessError, match="--stack compose --brokers 3"):
        for_stack(compose_one, "leader-kill")


def test_the_transaction_coordinator_is_found_as_kafka_hashes_the_id():
    # Java: "hello".hashCode() == 99162322, "polygenelubricants".hashCode() == Integer.MIN_VALUE
    assert java_string_hash("hello") == 99162322
    assert java_string_hash("polygenelubricants") == -2 ** 31
    assert java_string_hash("") == 0
    assert coordinator_partition("hello", 4) == 99162322 % 4
    assert coordinator_partition("polygenelubricants", 50) == 0     # Utils.abs(MIN_VALUE) is 0, not negative


# -- the compose cluster through a stand-in Docker SDK --------------------------------------

class FakeContainer:
    def __init__(self, name, log):
        self.name, self.log, self.status = name, log, "running"

    def kill(self):
        self.log.append(("kill", self.name))
        self.status = "exited"

    def start(self):
        self.log.append(("start", self.name))
        self.status = "running"

    def pause(self):
        self.log.append(("pause", self.name))
        self.status = "paused"

    def unpause(self):
        self.log.append(("unpause", self.name))
        self.status = "running"

    def reload(self):
        pass


class FakeDocker:
    """Only what docker.DockerClient offers that the harness uses: containers.list(all=, filters=)."""

    def __init__(self, services=("kafka-1", "kafka-2", "kafka-3", "postgres")):
        self.log, self.queries = [], []
        self.by_service = {s: FakeContainer(f"harness-{s}-1", self.log) for s in services}
        self.containers = SimpleNamespace(list=self._list)

    def _list(self, all=False, filters=None):
        self.queries.append(filters)
        labels = dict(l.split("=", 1) for l in filters["label"])
        if labels.get("com.docker.compose.project") != "harness":
            return []
        c = self.by_service.get(labels.get("com.docker.compose.service"))
        return [c] if c else []


def test_compose_broker_faults_act_on_the_broker_containers_by_their_compose_labels(monkeypatch):
    docker = FakeDocker()
    hands = ComposeBrokers(docker)
    assert hands.kill(2) == "container harness-kafka-2-1"
    assert hands.start(2) == "container harness-kafka-2-1"
    assert hands.pause(3) == "container harness-kafka-3-1"
    assert not hands.running(3)
    hands.resume(3)
    assert docker.log == [("kill", "harness-kafka-2-1"), ("start", "harness-kafka-2-1"),
                          ("pause", "harness-kafka-3-1"), ("unpause", "harness-kafka-3-1")]
    assert all("com.docker.compose.project=harness" in q["label"] for q in docker.queries)
    assert ("postgres" not in str(docker.log))


def test_compose_broker_kill_end_to_end_with_the_fake_engine(monkeypatch):
    docker = FakeDocker()
    f = BrokerKill(count=2, every=0.1, down=0.5, seed=4)
    f.check_stack(Stack(kind="compose", bootstrap_servers="x", postgres_dsn="", owned=True, brokers=3), docker)
    monkeypatch.setattr(brokers.portcheck, "answers", lambda port, timeout=0.2: True)
    monkeypatch.setattr(brokers.health, "node_answers", lambda *a, **k: True)
    drive(f, fake_sup())
    assert [a for a, _ in docker.log] == ["kill", "start", "kill", "start"]
    assert all(r["target"].startswith("kafka-") for r in f.entries([], []))


def test_a_started_container_whose_broker_does_not_answer_is_not_back(monkeypatch):
    """Issue: a container merely started was reported "answering". Now the broker itself must answer."""
    docker = FakeDocker()
    hands = ComposeBrokers(docker)
    monkeypatch.setattr(brokers.portcheck, "answers", lambda port, timeout=0.2: True)
    asked = []
    monkeypatch.setattr(brokers.health, "node_answers", lambda host, port, node, bootstrap, timeout=1.0:
                        asked.append((port, node)) or False)
    hands.kill(2)
    hands.start(2)
    assert hands.running(2) and not hands.answers(2)
    from harness.stack.compose import CLUSTER_KAFKA_PORTS
    assert asked == [(CLUSTER_KAFKA_PORTS[1], 2)]


def test_a_container_that_exits_after_its_restart_ends_the_fault_with_its_state_and_log(monkeypatch):
    docker = FakeDocker()
    for c in docker.by_service.values():
        c.attrs = {"State": {"ExitCode": 1}}
        c.logs = lambda tail=5: b"Exception in thread main\nkafka.docker.KafkaDockerWrapper: bad config\n"
        c.start = (lambda c: lambda: (docker.log.append(("start", c.name)), setattr(c, "status", "exited")))(c)
    f = BrokerKill(count=2, every=0.1, down=0.5, seed=4)
    f.check_stack(Stack(kind="compose", bootstrap_servers="x", postgres_dsn="", owned=True, brokers=3), docker)
    monkeypatch.setattr(brokers.portcheck, "answers", lambda port, timeout=0.2: False)
    drive(f, fake_sup(), seconds=60)
    assert [a for a, _ in docker.log] == ["kill", "start"]       # the second fault never struck
    note = f.entries([], [])[0]["note"]
    assert "is exited, exit code 1" in note and "KafkaDockerWrapper: bad config" in note
    assert "did not come back" in f.stops_run()


def test_a_missing_container_is_one_line():
    hands = ComposeBrokers(FakeDocker(services=("kafka-1",)))
    with pytest.raises(HarnessError, match="expected one container of service kafka-3"):
        hands.kill(3)


def test_the_docker_sdk_is_imported_only_when_used(monkeypatch):
    import builtins
    real = builtins.__import__

    def no_docker(name, *a, **k):
        if name == "docker":
            raise ImportError("no module named docker")
        return real(name, *a, **k)
    monkeypatch.setattr(builtins, "__import__", no_docker)
    import importlib
    importlib.reload(brokers)            # the module itself imports without the SDK
    with pytest.raises(HarnessError, match="need the Docker SDK"):
        brokers.ComposeBrokers()


# -- local nodes: only verified pid records are ever signalled -------------------------------

def test_local_broker_faults_never_signal_a_process_their_record_does_not_prove(tmp_path):
    import subprocess
    import sys
    home = tmp_path / "kafka-2"
    home.mkdir()
    decoy = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)", "kafka.Kafka",
                              "/someone/elses/server.properties"], start_new_session=True)
    try:
        from harness.core import procs
        rec = pidrecord.PidRecord(pid=decoy.pid, start_time=procs.start_time(decoy.pid),
                                  marks=["kafka.Kafka", str(home / "server.properties")], group=True)
        pidrecord.write(home / "kafka.pid", rec)
        hands = LocalBrokers(tmp_path)
        assert hands.kill(2) is None and hands.pause(2) is None
        time.sleep(0.2)
        assert decoy.poll() is None, "a process whose command line lacks our server.properties was signalled"
        assert not hands.running(2)
    finally:
        decoy.kill()
        decoy.wait()


def test_a_local_node_is_signalled_as_its_own_process_group(tmp_path):
    import subprocess
    import sys
    from harness.core import procs
    from harness.stack.local_kafka import LocalKafka
    node = LocalKafka(tmp_path, 3)
    node.home.mkdir(parents=True)
    p = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)", "kafka.Kafka", str(node.props)],
                         start_new_session=True)
    try:
        # The record is checked against the process's command line: wait until it is the stand-in's
        # (right after the fork it is still ours, and a busy machine makes that window long).
        deadline = time.time() + 30
        while "kafka.Kafka" not in procs.cmdline(p.pid) and time.time() < deadline:
            time.sleep(0.01)
        pidrecord.write(node.pidfile, pidrecord.PidRecord(pid=p.pid, start_time=procs.start_time(p.pid),
                                                          marks=node.marks(), group=True,
                                                          ports={"kafka-3": 1, "controller-3": 2}))
        hands = LocalBrokers(tmp_path)
        assert hands.pause(3) == f"pid {p.pid}"
        assert hands.kill(3) == f"pid {p.pid}"
        p.wait(timeout=10)
        assert p.returncode == -signal.SIGKILL
        assert hands._saved[3].ports == {"kafka-3": 1, "controller-3": 2}    # kept for the restart
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
