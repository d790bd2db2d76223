"""--fault rolling-upgrade for real (slow: a 3-node cluster of its own, three node restarts, a feature bump):
the cluster started on Kafka 3.9.1, each node stopped cleanly and started on 4.4.0 under an eos run, the
features finalized while the workers still run, and the output exact under read_committed (an independent
reader agrees); a downgrade refused in one line; nothing left after `down --purge`."""

import json

import pytest

from tests.conftest import harness, processes_of, searchable_dir
from tests.integration.plain_reader import read_topic

pytestmark = [pytest.mark.integration, pytest.mark.slow]


@pytest.mark.parametrize("client, args", [("python", ["--messages", "3000"]),
                                          ("java", ["--messages", "2000", "--crash-rate", "0.01"])])
def test_eos_stays_exact_across_a_rolling_upgrade_and_the_feature_bump(tmp_path, client, args):
    home = searchable_dir("harness-upgrade-")
    env = {"HARNESS_HOME": str(home), "HARNESS_BOOTSTRAP_SERVERS": "", "HARNESS_POSTGRES_DSN": "", "HARNESS_STACK": ""}
    try:
        up = harness("up", "--brokers", "3", "--kafka-version", "3.9.1", env=env, timeout=900)
        assert up.returncode == 0, up.stdout + up.stderr
        down = harness("run", "eos", "--fault", "rolling-upgrade:from=4.4.0,to=3.9.1", "--messages", "10", env=env)
        assert down.returncode == 2 and "Traceback" not in down.stderr
        assert "a downgrade is refused" in down.stderr.strip().splitlines()[-1]
        out = tmp_path / "report"
        run = harness("run", "eos", "--client", client, "--fault", "rolling-upgrade:from=3.9.1,to=4.4.0,finalize=mid",
                      "--fault", "planned-crash", *args, "--quiet", "--out", str(out), env=env, timeout=1800)
        assert run.returncode == 0, run.stderr[-3000:]
        d = json.loads((out / "report.json").read_text())
        assert d["verdict"] == "as-predicted"
        rc = d["kafka_output"]["read_committed"]
        assert (rc["duplicates"], rc["lost"]) == (0, 0)
        seen, stable, ends = read_topic(d["stack"]["bootstrap_servers"], d["stack"]["output_topic"], "read_committed")
        assert len(seen) == int(args[1]) and len(set(seen.values())) == len(seen) and stable == ends
        rows = [f for f in d["faults"] if f["fault"] == "rolling-upgrade"]
        nodes, features = rows[:3], rows[3]
        assert [r["node"] for r in nodes] == [1, 2, 3] and all(r["release"] == "4.4.0" and r["back_at"] for r in nodes)
        assert features["exit_code"] == 0 and features["features_before"] == {"metadata.version": 21}
        assert features["features_after"]["transaction.version"] == 2
        marks = [f.get("mark") for f in d["timeline"]["faults"] if f["fault"] == "rolling-upgrade"]
        assert marks == [f"node {n} -> Kafka 4.4.0" for n in (1, 2, 3)] + [
            "features: metadata.version 4.4-IV2, transaction.version 2, group.version 1"]
        assert d["environment"]["kafka_transaction_version"] == "2"          # asked at the run's end
        if client == "java":     # its epochs: before 2 while the cluster ran 3.9 features, 2 after the bump
            assert d["transaction_protocol"]["version_seen"] in ("before 2", "mixed", "2")
        st = json.loads(harness("status", "--json", env=env).stdout)
        assert st["kafka_version"] == "4.4.0"                  # every node's folder names its new release
    finally:
        harness("down", "--purge", env=env, timeout=300)
    assert not processes_of(home)
