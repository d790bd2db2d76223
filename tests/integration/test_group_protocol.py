"""--group-protocol consumer (KIP-848) on the session stack's Kafka 4.4.0, for real: the eos family's Python
and Java workers with the client protocol switched stay exact under read_committed, and workers that are
real members of a consumer-protocol group stay exact through the moves their crashes cause. A 3.9 cluster's
refusal is in test_kafka_versions.py. Kafka Streams' streams protocol (KIP-1071) too: eos-streams with
--streams-protocol streams stays exact under read_committed, its application a streams group on the broker."""

import pytest

from tests.integration.test_experiments import run_exp

pytestmark = pytest.mark.integration


# the Java leg starts a JVM per crash (about 34 s): nightly; the Python leg (about 8 s) runs in every test run
@pytest.mark.parametrize("client, messages", [("python", "200"),
                                              pytest.param("java", "100", marks=pytest.mark.slow)])
def test_eos_with_the_consumer_protocol_is_exact_under_read_committed(stack, tmp_path, client, messages):
    d = run_exp(stack, tmp_path, "eos", "--group-protocol", "consumer", "--client", client, "--messages", messages)
    assert d["params"]["group_protocol"] == "consumer" and d["params"]["client"] == client
    rc = d["kafka_output"]["read_committed"]
    assert (rc["duplicates"], rc["lost"]) == (0, 0) and len(d["crashes"]) > 0 and d["predicted"]["exact"]
    assert "group.protocol=consumer" in (tmp_path / "report" / "report.md").read_text()


def test_members_of_a_consumer_protocol_group_stay_exact_through_their_crashes(stack, tmp_path):
    d = run_exp(stack, tmp_path, "offset-after", "--assignment", "group", "--group-protocol", "consumer",
                "--partitions", "4", "--workers", "2", "--messages", "60", "--commit-every", "5")
    g = d["consumer_group"]
    assert g["protocol"] == "consumer" and g["assignments"] > len(d["crashes"]) > 0
    assert d["predicted"]["exact"] and d["counts"]["lost"] == 0
    assert d["counts"]["duplicates"] == d["predicted"]["duplicates"] > 0


def test_eos_streams_with_the_streams_protocol_is_exact_and_its_group_is_no_consumer_group(stack, tmp_path):
    from confluent_kafka import ConsumerGroupTopicPartitions
    from confluent_kafka.admin import AdminClient
    from tests import kafka_login
    # 20 records, crash rate 0.05: one planned crash, whose restart waits for the broker's 5 s streams session
    d = run_exp(stack, tmp_path, "eos-streams", "--streams-protocol", "streams", "--messages", "20",
                "--crash-rate", "0.05")
    rc = d["kafka_output"]["read_committed"]
    assert (rc["records"], rc["duplicates"], rc["lost"]) == (20, 0, 0) and len(d["crashes"]) == 1
    assert d["params"]["streams_protocol"] == "streams" and d["predicted"]["exact"]
    assert "group.protocol=streams (--streams-protocol)" in (tmp_path / "report" / "report.md").read_text()
    # The group exists on the broker (its committed offsets reach the input's end) but is no consumer group: the
    # listing of consumer groups leaves it out, where a classic-protocol run's group is listed as CLASSIC.
    admin = AdminClient(kafka_login.config(stack["bootstrap_servers"], {"log_level": 0}))
    group = f"harness-{d['run_id']}"
    listed = {g.group_id for g in admin.list_consumer_groups(request_timeout=20).result(30).valid}
    offsets = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)], request_timeout=20)
    committed = offsets[group].result(30).topic_partitions
    assert group not in listed and sum(tp.offset for tp in committed) == 20, (listed, committed)
