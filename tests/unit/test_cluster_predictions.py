"""Predictions under broker faults and for the producer under test, the delivery log, and the cluster's
bookkeeping (size remembered, refused changes, release of many nodes), on hand-made data."""

import json
from types import SimpleNamespace

import pytest

from harness.checker import deliveries
from harness.checker.observe import observe_run
from harness.checker.predict import predict
from harness.core.errors import HarnessError
from harness.experiments import get
from harness.experiments.producer.producer_settings import RETRIES, settings
from harness.run.params import RunParams
from harness.stack import local_record, local_services
from harness.stack.claim import release_plan
from harness.workload.naming import RunNames


def ex(p) -> dict:
    return {e.metric: (e.op, e.value) for e in p.expectations}


def crash(mid, point, **lists):
    return {"message_id": mid, "point": point, "worker": "w0", "attempt": 1, "time": 1.0, **lists}


# -- Kafka transactions under broker faults ---------------------------------------------------

def test_eos_without_broker_faults_stays_exact():
    p = predict(get("eos"), [crash("a", "after-produce-before-txn-commit", produced=["a"])])
    assert p.exact and ex(p)["kafka.read_uncommitted.duplicates"] == ("==", 1)


def test_a_broker_fault_makes_aborted_copies_a_bound_and_keeps_read_committed_exact():
    crashes = [crash("a", "after-produce-before-txn-commit", produced=["a"])]
    aborts = [{"event": "txn_aborted", "produced": ["x", "y"], "unacked": []}]
    p = predict(get("eos"), crashes, aborts=aborts, loosened=True)
    e = ex(p)
    assert not p.exact and e["kafka.read_uncommitted.duplicates"] == ("<=", 1 + 2)
    assert e["kafka.read_committed.duplicates"] == ("==", 0) and e["kafka.read_committed.lost"] == ("==", 0)
    assert "broker faults can abort transactions" in p.note
    # a broker fault that aborted nothing the workers saw: still a bound (the promise is about read_committed)
    q = predict(get("eos"), crashes, loosened=True)
    assert ex(q)["kafka.read_uncommitted.duplicates"] == ("<=", 1)


def test_consumer_experiments_stay_exact_under_broker_faults():
    p = predict(get("offset-after"), [crash("a", "after-effect-before-commit", unacked=["a"])], loosened=True)
    assert p.exact and ex(p)["ledger.duplicates"] == ("==", 1)


def test_an_abort_redoes_its_ledger_rows_and_perhaps_the_record_in_hand():
    aborts = [{"event": "txn_aborted", "produced": ["x"], "unacked": ["x"]}]
    e = ex(predict(get("eos-boundary"), [], aborts=aborts, loosened=True))
    assert e["ledger.duplicates"] == ("<=", 2)          # x again, and a record whose produce failed after its row
    d = ex(predict(get("eos-dedupe"), [], aborts=aborts, loosened=True))
    assert d["ledger.duplicates"] == ("==", 0) and d["ledger.dedupe_hits"] == ("<=", 2)


# -- the producer under test ---------------------------------------------------------------

def producer_prediction(loosened=False, interruptions=0, **opts):
    params = RunParams("producer", messages=100, **opts)
    return ex(predict(get("producer"), [], loosened=loosened, interruptions=interruptions, params=params))


def test_idempotent_acks_all_producer_promises_no_duplicate_no_loss_no_reordering_under_faults():
    e = producer_prediction(loosened=True)
    assert e == {"kafka.read_committed.duplicates": ("==", 0), "kafka.read_committed.lost": ("==", 0),
                 "producer.reordered": ("==", 0)}


def test_without_idempotence_duplicates_and_reordering_are_possible_and_bounded():
    e = producer_prediction(loosened=True, idempotence="off")
    assert e["kafka.read_committed.duplicates"] == ("<=", RETRIES * 100)
    assert e["producer.reordered"] == ("<=", 100) and e["kafka.read_committed.lost"] == ("==", 0)
    assert producer_prediction(idempotence="off", max_in_flight=1)["producer.reordered"] == ("==", 0)


def test_a_predictors_own_note_stays_and_the_broker_fault_bound_is_added_to_it():
    params = RunParams("producer", messages=100, idempotence="off")
    p = predict(get("producer"), [], loosened=True, params=params)
    assert "without idempotence each retry may write a record again" in p.note
    assert "broker faults can abort transactions" in p.note
    # without a broker fault the producer's note is the whole note (the prediction is exact)
    q = predict(get("producer"), [], params=params)
    assert q.exact and "without idempotence" in q.note and "broker faults" not in q.note


def test_acks_1_loses_only_under_broker_faults():
    assert producer_prediction(acks="1")["kafka.read_committed.lost"] == ("==", 0)
    assert producer_prediction(loosened=True, acks="1")["kafka.read_committed.lost"] == ("<=", 100)


def test_acks_0_is_fire_and_forget_lost_only_under_broker_faults_and_said_so():
    assert producer_prediction(acks="0")["kafka.read_committed.lost"] == ("==", 0)
    assert producer_prediction(loosened=True, acks="0")["kafka.read_committed.lost"] == ("<=", 100)
    assert "with acks=0 nothing is acknowledged" in predict(get("producer"), [], loosened=True,
                                                               params=RunParams("producer", messages=100, acks="0")).note


def test_a_restarted_producer_worker_may_send_again():
    assert producer_prediction(interruptions=1)["kafka.read_committed.duplicates"] == ("<=", RETRIES * 100)


def test_producer_settings_follow_the_options():
    for acks in ("0", "1"):
        s = settings(RunParams("producer", acks=acks))
        assert s["acks"] == acks and s["enable.idempotence"] is False
    s = settings(RunParams("producer"))
    assert s["acks"] == "all" and s["enable.idempotence"] is True and s["max.in.flight.requests.per.connection"] == 5
    assert s["request.timeout.ms"] < 1500 and s["retries"] == RETRIES
    # librdkafka times a request in flight out after socket.timeout.ms (request.timeout.ms goes to the broker):
    # without it a latency fault of a few seconds would never make the producer send a record again
    assert s["socket.timeout.ms"] == s["request.timeout.ms"]


@pytest.mark.parametrize("opts, says", [
    ({"experiment": "eos", "acks": "1"}, "--acks applies to producer only"),
    ({"experiment": "offset-after", "idempotence": "off"}, "--idempotence applies to producer only"),
    ({"experiment": "producer", "idempotence": "on", "acks": "1"}, "--acks 1 needs --idempotence off"),
    ({"experiment": "producer", "idempotence": "on", "acks": "0"}, "--acks 0 needs --idempotence off"),
    ({"experiment": "producer", "max_in_flight": 6}, "--max-in-flight above 5 needs --idempotence off"),
    ({"experiment": "producer", "max_in_flight": 0}, "--max-in-flight must be between 1"),
    ({"experiment": "producer", "acks": "2"}, "--acks must be one of 0, 1, all"),
])
def test_producer_options_are_checked_in_one_line(opts, says):
    with pytest.raises(HarnessError, match=says):
        RunParams(**opts).validate()


# -- the delivery log and what the audit makes of it ------------------------------------------

def test_delivery_log_keeps_the_last_word_and_reordering_is_read_per_partition(tmp_path):
    path = tmp_path / deliveries.FILE_NAME
    import os
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
    deliveries.append(fd, "a", None, 0, 0)
    deliveries.append(fd, "b", "Local: Message timed out", 0, -1)
    deliveries.append(fd, "c", "broker down", 0, -1)
    deliveries.append(fd, "c", None, 0, 5)          # retried by the caller: acknowledged in the end
    os.close(fd)
    path.write_text(path.read_text() + "{torn")
    log = deliveries.read(path)
    assert log.acked == {"a", "c"} and log.failed == {"b": "Local: Message timed out"} and log.reports == 4
    pos = {"a": (0, 0), "b": (0, 1), "c": (0, 2), "d": (1, 0), "e": (1, 1)}
    assert deliveries.reordered(["a", "c", "b", "d", "e", "a", "b"], pos) == ["b"]
    assert deliveries.reordered(["d", "a", "e", "b", "c"], pos) == []          # partitions interleave freely
    assert deliveries.read(tmp_path / "missing").error


def test_the_audit_counts_lost_as_acknowledged_and_missing(tmp_path):
    sent = ["a", "b", "c", "d"]
    amounts = {i: 100 for i in sent}
    records = [("a", b'{"id": "a", "amount": 100}'), ("c", b'{"id": "c", "amount": 100}'),
               ("a", b'{"id": "a", "amount": 100}')]

    def output_reader(bootstrap, topic, ids, amounts):
        from harness.checker.kafka_output import audit_records
        return audit_records(ids, {"read_committed": records, "read_uncommitted": records}, {}, amounts)
    log = deliveries.DeliveryLog(acked={"a", "b", "c"}, failed={"d": "timed out"})
    stack = SimpleNamespace(bootstrap_servers="x", postgres_dsn="")
    a = observe_run(get("producer"), stack, RunNames("r1"), amounts, {i: (0, n) for n, i in enumerate(sent)},
                  None, finished=True, output_reader=output_reader, deliveries=log,
                  order_reader=lambda b, t, iso: (records, None))
    assert a.metrics["kafka.read_committed.lost"] == 1 and a.evidence.ids["kafka.read_committed.lost"] == ["b"]
    assert a.output["read_committed"].unprocessed_ids == ["d"]        # never acknowledged: not lost
    assert a.metrics["kafka.read_committed.duplicates"] == 1
    assert a.metrics["producer.acked"] == 3 and a.metrics["producer.unacked"] == 1
    assert a.metrics["producer.reordered"] == 0
    unread = observe_run(get("producer"), stack, RunNames("r1"), amounts, {}, None, finished=True,
                       output_reader=output_reader, deliveries=deliveries.DeliveryLog(error="delivery log: gone"),
                       order_reader=lambda b, t, iso: (records, None))
    assert unread.metrics["kafka.read_committed.lost"] is None and unread.metrics["producer.acked"] is None
    assert "delivery log: gone" in unread.evidence.errors


# -- the cluster's bookkeeping --------------------------------------------------------------

def test_the_cluster_size_is_remembered_and_a_change_needs_a_purge(tmp_path):
    assert local_record.size(tmp_path) == 1
    (tmp_path / "stack.json").write_text(json.dumps({"kind": "local", "brokers": 3}))
    assert local_record.size(tmp_path) == 3 and local_services.check_size(tmp_path, None) == 3
    assert local_services.check_size(tmp_path, 1) == 1          # nothing of the 3-node stack exists yet
    (tmp_path / "kafka-1" / "data").mkdir(parents=True)
    with pytest.raises(HarnessError, match="holds a 3-broker stack.*harness down --purge"):
        local_services.check_size(tmp_path, 1)
    with pytest.raises(HarnessError, match="--brokers must be one of 1, 3"):
        local_services.check_size(tmp_path, 2)
    (tmp_path / "stack.json").write_text(json.dumps({"kind": "local", "brokers": 7}))
    assert local_record.size(tmp_path) == 1                     # a size the harness never starts is not believed


def test_cluster_ports_and_addresses():
    assert local_record.port_names(3) == ("kafka-1", "controller-1", "kafka-2", "controller-2", "kafka-3",
                                   "controller-3", "postgres")
    assert local_record.port_names(1) == ("kafka", "controller", "postgres")
    assert [local_record.preferred(n) for n in ("kafka-1", "controller-1", "kafka-3")] == [19192, 19193, 19392]
    assert local_record.bootstrap_of({"kafka-1": 1, "kafka-2": 2, "kafka-3": 3}, 3) == \
        "127.0.0.1:1,127.0.0.1:2,127.0.0.1:3"


def test_a_proxied_cluster_has_a_proxy_and_a_proxied_listener_per_node_and_bootstraps_through_the_proxies():
    names = local_record.port_names(3, proxies=True)
    assert names[:4] == ("kafka-1", "controller-1", "proxied-1", "proxy-1") and names[-2:] == ("postgres", "toxiproxy")
    assert len(set(names)) == len(names) == 14
    assert [local_record.preferred(n) for n in ("proxied-2", "proxy-2", "toxiproxy")] == [19294, 19295, 18474]
    assert [local_record.service_of(n) for n in ("proxied-2", "proxy-2", "toxiproxy", "controller-3", "controller")] \
        == ["kafka-2", "toxiproxy", "toxiproxy", "kafka-3", "kafka"]
    port = {"kafka-1": 1, "kafka-2": 2, "kafka-3": 3, "proxy-1": 11, "proxy-2": 12, "proxy-3": 13}
    assert local_record.bootstrap_of(port, 3, ["198.18.7.1", "198.18.7.2", "198.18.7.3"], proxies=True) == \
        "127.0.0.1:11,127.0.0.1:12,127.0.0.1:13"


def test_a_proxied_node_advertises_its_proxy_on_a_second_listener_and_talks_to_its_peers_on_its_own(tmp_path):
    from harness.stack.local_kafka import LocalKafka, voters
    node = LocalKafka(tmp_path, 2)
    node.home.mkdir(parents=True)
    node.write_config(19292, 19293, voters=voters([19193, 19293, 19393]), proxied=(19294, 19295))
    props = dict(line.split("=", 1) for line in node.props.read_text().splitlines())
    assert props["listeners"] == "PLAINTEXT://127.0.0.1:19292,CONTROLLER://127.0.0.1:19293,PROXIED://127.0.0.1:19294"
    assert props["advertised.listeners"] == "PLAINTEXT://127.0.0.1:19292,PROXIED://127.0.0.1:19295"
    assert props["listener.security.protocol.map"].endswith(",PROXIED:PLAINTEXT")
    assert props["inter.broker.listener.name"] == "PLAINTEXT"


def test_the_last_command_out_stops_every_node_it_started():
    owners = {"kafka-1": "command", "kafka-2": "command", "kafka-3": "command", "postgres": "user"}
    stop, line = release_plan(["kafka-1", "kafka-2", "kafka-3"], keep=False, held=False, others=[], owners=owners)
    assert stop == ["kafka-1", "kafka-2", "kafka-3"] and "Kafka node 2" in line


def test_the_cluster_group_is_not_in_the_default_suite():
    from harness.run.suite_runner import parse_experiments, suite_experiments
    assert "producer" not in suite_experiments()
    assert get("producer").suite["group"] == "cluster"
    assert parse_experiments("producer") == ["producer"]


def test_a_cluster_node_config_has_three_voters_and_durable_internal_topics(tmp_path):
    from harness.stack.local_kafka import LocalKafka, voters
    node = LocalKafka(tmp_path, 2)
    node.home.mkdir(parents=True)
    node.write_config(19292, 19293, voters=voters([19193, 19293, 19393]))
    props = dict(line.split("=", 1) for line in node.props.read_text().splitlines())
    assert props["node.id"] == "2" and props["process.roles"] == "broker,controller"
    assert props["controller.quorum.voters"] == "1@127.0.0.1:19193,2@127.0.0.1:19293,3@127.0.0.1:19393"
    assert props["listeners"] == "PLAINTEXT://127.0.0.1:19292,CONTROLLER://127.0.0.1:19293"
    for key in ("offsets.topic.replication.factor", "transaction.state.log.replication.factor",
                "default.replication.factor"):
        assert props[key] == "3"
    assert props["min.insync.replicas"] == "2" and props["transaction.state.log.min.isr"] == "2"
    single = LocalKafka(tmp_path)
    single.home.mkdir(parents=True)
    single.write_config(19092, 19093)
    sp = dict(line.split("=", 1) for line in single.props.read_text().splitlines())
    assert sp["controller.quorum.voters"] == "1@127.0.0.1:19093" and sp["offsets.topic.replication.factor"] == "1"


def test_compose_cluster_file_describes_the_same_topology():
    import yaml
    from pathlib import Path
    from harness.stack.local_kafka import CLUSTER_SETTINGS, SERVER_SETTINGS
    doc = yaml.safe_load((Path(__file__).resolve().parents[2] / "compose" / "docker-compose.cluster.yml").read_text())
    kafkas = {k: v for k, v in doc["services"].items() if k.startswith("kafka")}
    assert sorted(kafkas) == ["kafka-1", "kafka-2", "kafka-3"]
    for name, svc in kafkas.items():
        env = svc["environment"]
        assert env["KAFKA_PROCESS_ROLES"] == SERVER_SETTINGS["process.roles"]
        assert env["KAFKA_NODE_ID"] == int(name[-1])
        assert env["KAFKA_CONTROLLER_QUORUM_VOTERS"].count("@") == 3
        for key in ("offsets.topic.replication.factor", "transaction.state.log.replication.factor",
                    "transaction.state.log.min.isr", "default.replication.factor", "min.insync.replicas",
                    "unclean.leader.election.enable"):
            assert str(env["KAFKA_" + key.upper().replace(".", "_")]).lower() == CLUSTER_SETTINGS[key], key
        assert all(p.startswith("127.0.0.1:") for p in svc["ports"])


def test_an_acks_0_report_says_sent_never_acknowledged():
    from harness.reporting.summary import compose
    from harness.reporting.run_report import RunReport
    from tests.unit.hostile import full_report
    summarize = lambda d: " ".join([compose(d)[0], *compose(d)[1]])    # noqa: E731 (the sentence and its detail)
    d = full_report()
    d["params"]["acks"] = "1"
    rows = dict((r[0], r[1:]) for r in RunReport(d).scoreboard())
    assert "acknowledged" in rows and "sent with acks=0" not in rows
    assert "had 10 records acknowledged" in summarize(d)
    d["params"]["acks"] = "0"
    rows = dict((r[0], r[1:]) for r in RunReport(d).scoreboard())
    assert rows["sent with acks=0"][1] == "10" and "acknowledged" not in rows
    assert "sent 10 records with acks=0, none acknowledged" in summarize(d)
