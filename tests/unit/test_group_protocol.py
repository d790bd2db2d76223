"""--group-protocol beyond the consumer experiments: the eos family's workers (Python and Java) take it, a
cluster or client without KIP-848's consumer protocol refuses it in one line, and the report names it."""

from types import SimpleNamespace

import pytest

from harness.core.errors import HarnessError
from harness.experiments import common_options
from harness.reporting.run_report import RunReport
from harness.run.params import RunParams
from harness.runtime.context import consumer_settings
from harness.runtime.group import GROUP_SETTINGS

# What Kafka 3.9.1 and 4.4.0 brokers finalize (ApiVersions, as harness/stack/broker_version.py reads it).
KAFKA_391 = {"metadata.version": 21}
KAFKA_440 = {"metadata.version": 33, "group.version": 1, "transaction.version": 2, "streams.version": 1}


@pytest.mark.parametrize("experiment", ["eos", "eos-boundary", "eos-dedupe", "zombie"])
def test_the_eos_family_takes_it_with_either_client(experiment):
    for client in ("python", "java"):
        RunParams(experiment, group_protocol="consumer", client=client).validate()


def test_the_consumer_experiments_take_it_with_fixed_partitions_too_as_the_client_protocol():
    RunParams("offset-after", group_protocol="consumer").validate()           # refused once: now a column
    RunParams("dedupe", assignment="group", group_protocol="consumer").validate()


def test_an_experiment_without_a_consumer_group_of_its_own_refuses_it_naming_who_takes_it():
    with pytest.raises(HarnessError, match=r"--group-protocol applies to .*eos.* only; key-after-effect does not"):
        RunParams("key-after-effect", group_protocol="consumer").validate()
    with pytest.raises(HarnessError, match="must be one of classic, consumer"):
        RunParams("eos", group_protocol="streams").validate()


def test_fixed_partitions_set_the_client_protocol_alone_and_group_members_the_whole_membership():
    args = SimpleNamespace(bootstrap="127.0.0.1:9092", group="g", isolation="read_committed")
    fixed = consumer_settings(args, {"group_protocol": "consumer"}, None)
    assert fixed["group.protocol"] == "consumer" and "session.timeout.ms" not in fixed
    assert "group.protocol" not in consumer_settings(args, {}, None)        # not given: the client's default
    member = consumer_settings(args, {"assignment": "group", "group_protocol": "classic"}, None)
    assert {k: member[k] for k in GROUP_SETTINGS["classic"]} == GROUP_SETTINGS["classic"]


@pytest.mark.parametrize("found, librdkafka, says", [
    (KAFKA_391, "2.16.0", "needs a cluster that finalized group.version 1 (Kafka 4.0 or later); this one has "
                          "metadata.version 3.9-IV0"),
    (KAFKA_391, None, "group.version 1"),                          # the Java client: the broker still lacks it
    (KAFKA_440, "2.11.1", "needs librdkafka 2.12 or later in the Python workers; this one has 2.11.1"),
    (KAFKA_440, "2.3.0", "librdkafka 2.12 or later"),
])
def test_a_release_or_client_without_the_consumer_protocol_is_refused_in_one_line(found, librdkafka, says):
    why = common_options.consumer_protocol_refusal(found, librdkafka)
    assert says in why and "\n" not in why


@pytest.mark.parametrize("found, librdkafka", [(KAFKA_440, "2.12.0"), (KAFKA_440, "2.16.0"), (KAFKA_440, None),
                                               (None, "2.16.0")])
def test_a_cluster_and_client_that_have_it_or_a_cluster_that_cannot_be_asked_are_not_refused(found, librdkafka):
    assert common_options.consumer_protocol_refusal(found, librdkafka) is None


def test_classic_or_no_protocol_never_asks_the_cluster():
    nowhere = SimpleNamespace(bootstrap_servers="127.0.0.1:1")     # nothing listens: asking would say None
    for protocol in (None, "classic"):
        common_options.refuse_group_protocol(SimpleNamespace(group_protocol=protocol, client="python"), nowhere)


def test_the_report_names_the_protocol_and_what_fixed_partitions_mean_for_the_group():
    rows = dict(RunReport({"params": {"group_protocol": "consumer", "assignment": None}}).client_rows())
    said = rows["consumer group protocol of the workers"]
    assert said.startswith("group.protocol=consumer") and "simple one" in said
    member = dict(RunReport({"params": {"group_protocol": "classic", "assignment": "group"}}).client_rows())
    assert "members of the run's group" in member["consumer group protocol of the workers"]
    assert not RunReport({"params": {"group_protocol": None}}).client_rows()
