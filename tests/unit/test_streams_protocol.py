"""eos-streams --streams-protocol: only eos-streams takes it, a cluster without KIP-1071's streams groups refuses
it in one line naming what is missing, the Kafka Streams worker gets it on its command line, and the report
names the protocol with what it means for the workers' membership."""

from pathlib import Path
from types import SimpleNamespace

import pytest

from harness.core.errors import HarnessError
from harness.experiments import common_options, streams_jvm
from harness.reporting.run_report import RunReport
from harness.run.params import RunParams

# What Kafka 3.9.1, 4.1.1 and 4.4.0 clusters finalize at format (ApiVersions, as stack/broker_version.py reads it).
KAFKA_391 = {"metadata.version": 21}
KAFKA_411 = {"metadata.version": 27, "group.version": 1, "transaction.version": 2}
KAFKA_440 = {"metadata.version": 33, "group.version": 1, "transaction.version": 2, "streams.version": 1}


def test_eos_streams_takes_either_protocol_and_nothing_else_takes_it():
    for protocol in ("classic", "streams"):
        RunParams("eos-streams", streams_protocol=protocol).validate()
    with pytest.raises(HarnessError, match=r"--streams-protocol applies to eos-streams only; eos does not"):
        RunParams("eos", streams_protocol="streams").validate()
    with pytest.raises(HarnessError, match="must be one of classic, streams"):
        RunParams("eos-streams", streams_protocol="consumer").validate()
    with pytest.raises(HarnessError, match="--group-protocol applies to"):
        RunParams("eos-streams", group_protocol="consumer").validate()


@pytest.mark.parametrize("found, protocols, says", [
    (KAFKA_391, None, "needs a cluster that finalized streams.version 1 (Kafka 4.2 or later"),
    (KAFKA_391, None, "this one has metadata.version 3.9-IV0 and streams.version 0"),
    (KAFKA_411, "classic,consumer,streams", "metadata.version 4.1-IV1 and streams.version 0"),
    ({**KAFKA_440, "streams.version": 0}, None, "kafka-features.sh upgrade --feature streams.version=1"),
    (KAFKA_440, "classic,consumer", "group.coordinator.rebalance.protocols to list streams; this cluster's is "
                                    "'classic,consumer'"),
])
def test_a_cluster_without_streams_groups_is_refused_in_one_line_naming_what_is_missing(found, protocols, says):
    why = common_options.streams_protocol_refusal(found, protocols)
    assert says in why and "\n" not in why


@pytest.mark.parametrize("found, protocols", [(KAFKA_440, "classic,consumer,streams"), (KAFKA_440, "classic, streams"),
                                              (KAFKA_440, None), (None, None)])
def test_a_cluster_with_streams_groups_or_one_that_cannot_be_asked_is_not_refused(found, protocols):
    assert common_options.streams_protocol_refusal(found, protocols) is None


def test_classic_or_no_streams_protocol_never_asks_the_cluster():
    nowhere = SimpleNamespace(bootstrap_servers="127.0.0.1:1")     # nothing listens: asking would take seconds
    for protocol in (None, "classic"):
        common_options.refuse_group_protocol(SimpleNamespace(streams_protocol=protocol, group_protocol=None), nowhere)


def _command(**kw) -> list[str]:
    slot = SimpleNamespace(name="w0", attempt=1)
    return streams_jvm.command(Path("/x/eos-streams.jar"), slot, bootstrap="127.0.0.1:9092", input_topic="in",
                               output_topic="out", application_id="app", state_dir=Path("/s"),
                               crash_plan=Path("/p"), crash_log=Path("/l"), commit_interval_ms=None,
                               ledger_table=None, dsn="postgresql://u@127.0.0.1/db", **kw)


def test_the_worker_gets_the_protocol_only_when_asked():
    cmd = _command(group_protocol="streams")
    assert cmd[cmd.index("--group-protocol") + 1] == "streams"
    assert "--group-protocol" not in _command()


def test_the_report_names_the_protocol_and_what_it_means_for_membership():
    rows = dict(RunReport({"params": {"streams_protocol": "streams"}}).client_rows())
    said = rows["Kafka Streams group protocol of the workers"]
    assert said.startswith("group.protocol=streams") and "group.streams.session.timeout.ms" in said
    classic = dict(RunReport({"params": {"streams_protocol": "classic"}}).client_rows())
    assert "static members" in classic["Kafka Streams group protocol of the workers"]
    assert not RunReport({"params": {"streams_protocol": None}}).client_rows()
