"""--kafka-version on the local stack for real: Kafka 3.9.1 and 4.1.1 (beside the default 4.4.0) resolved with
mvn, formatted and started, a run on each as-predicted and naming the release the harness started and the
metadata.version the broker itself answers, and the Java client's epochs per transaction on each; another release on the same data refused in one line, a share-group experiment and eos-streams' streams protocol too; nothing left after
`down --purge`."""

import json

import pytest

from tests.conftest import harness, processes_of, searchable_dir

pytestmark = pytest.mark.integration

# (release, the metadata.version a fresh cluster of it finalizes, as its own MetadataVersion names it, and
# the transaction protocol Kafka's Java client is seen to speak there: KIP-890's version 2 from 4.0 on)
RELEASES = [("3.9.1", "3.9-IV0", "before 2"), ("4.1.1", "4.1-IV1", "2")]


# 4.1.1 is slow-marked (pytest -m slow): the default run keeps the oldest release, 3.9.1, beside the default 4.4.0.
@pytest.mark.parametrize("release, metadata, protocol",
                         [pytest.param(*r, marks=pytest.mark.slow) if r[0] == "4.1.1" else r for r in RELEASES],
                         ids=[r for r, _, _ in RELEASES])
def test_a_stack_of_another_release_starts_runs_and_says_so(release, metadata, protocol, tmp_path):
    home = searchable_dir(f"harness-kafka-{release}-")
    env = {"HARNESS_HOME": str(home), "HARNESS_BOOTSTRAP_SERVERS": "", "HARNESS_POSTGRES_DSN": "", "HARNESS_STACK": ""}
    try:
        up = harness("up", "--kafka-version", release, env=env, timeout=900)
        assert up.returncode == 0, up.stdout + up.stderr
        assert f"Starting Kafka {release} on" in up.stderr
        st = json.loads(harness("status", "--json", env=env).stdout)
        assert st["healthy"] and st["kafka_version"] == release
        assert json.loads((home / "stack.json").read_text())["kafka_version"] == release
        assert (home / "kafka" / "kafka_version").read_text().strip() == release     # beside the data it formatted
        out = tmp_path / "eos"
        run = harness("run", "eos", "--messages", "200", "--quiet", "--out", str(out), env=env, timeout=900)
        assert run.returncode == 0, run.stderr[-3000:]
        d = json.loads((out / "report.json").read_text())
        assert d["verdict"] == "as-predicted" and d["kafka_output"]["read_committed"]["duplicates"] == 0
        assert (d["environment"]["kafka_version"], d["environment"]["kafka_metadata_version"]) == (release, metadata)
        # the Java client: a new producer epoch at every transaction's end on 4.x, never on 3.9
        out = tmp_path / "eos-java"
        run = harness("run", "eos", "--client", "java", "--messages", "100", "--quiet", "--out", str(out), env=env,
                      timeout=900)
        assert run.returncode == 0, run.stderr[-3000:]
        tp = json.loads((out / "report.json").read_text())["transaction_protocol"]
        assert tp["version_seen"] == protocol and tp["transactions_ended"] == tp["commits_with_epoch_known"] > 0, tp
        assert tp["commits_epoch_bumped"] == (tp["transactions_ended"] if protocol == "2" else 0)
        if release.startswith("3."):       # no KIP-848 consumer protocol: refused before anything is created
            refused = harness("run", "eos", "--group-protocol", "consumer", "--messages", "10", env=env, timeout=300)
            assert refused.returncode == 2 and "Traceback" not in refused.stderr
            assert refused.stderr.strip().splitlines()[-1] == (
                f"error: --group-protocol consumer needs a cluster that finalized group.version 1 (Kafka 4.0 or "
                f"later); this one has metadata.version {metadata} and no group.version")
        # share groups (KIP-932) are production-ready from 4.2: an older broker is refused in one line naming it
        for client in ("python", "java"):
            refused = harness("run", "share-ack-after", "--client", client, "--messages", "10", env=env, timeout=300)
            assert refused.returncode == 2 and "Traceback" not in refused.stderr
            assert refused.stderr.strip().splitlines()[-1].startswith(
                f"error: share groups need Kafka 4.2 or later; this broker is {release} (metadata.version {metadata})")
        # KIP-1071's streams groups: streams.version 1 is finalized at format from 4.2 on; older clusters refuse it
        refused = harness("run", "eos-streams", "--streams-protocol", "streams", "--messages", "10", env=env,
                          timeout=300)
        assert refused.returncode == 2 and "Traceback" not in refused.stderr
        last = refused.stderr.strip().splitlines()[-1]
        assert last.startswith("error: --streams-protocol streams needs a cluster that finalized streams.version 1 "
                               "(Kafka 4.2 or later") and last.endswith(
            f"this one has metadata.version {metadata} and streams.version 0"), last
        other = "4.1.1" if release != "4.1.1" else "4.4.0"
        refused = harness("run", "offset-after", "--messages", "10", "--kafka-version", other, env=env, timeout=300)
        assert refused.returncode == 2 and "Traceback" not in refused.stderr
        assert refused.stderr.strip().splitlines()[-1] == (
            f"error: the Kafka data under {home} was written by Kafka {release}; to run Kafka {other}, run "
            f"`harness down --purge` first (it deletes that data)")
    finally:
        harness("down", "--purge", env=env, timeout=300)
    assert not processes_of(home)
