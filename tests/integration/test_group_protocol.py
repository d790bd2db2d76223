"""--group-protocol consumer (KIP-848) on the session stack's Kafka 4.4.0, for real: the eos family's Python
and Java workers with the client protocol switched stay exact under read_committed, and workers that are
real members of a consumer-protocol group stay exact through the moves their crashes cause. A 3.9 cluster's
refusal is in test_kafka_versions.py."""

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
