"""--fault rolling-upgrade on the compose cluster for real (slow: minutes): three broker containers on the
local image of Kafka 3.9.1, each stopped by SIGTERM and recreated on the 4.4.0 image with its volume and
settings under an eos run, the features finalized mid-run, the output exact under read_committed (an
independent reader agrees), the state folder then naming 4.4.0, and nothing of the project left after
`down --purge`."""

import json
import subprocess

import pytest

from harness.stack import compose_images
from tests.conftest import harness
from tests.integration.plain_reader import read_topic
from tests.integration.test_compose_engine import docker_engine, down_purge, engine, home, leftovers, run  # noqa: F401

pytestmark = [pytest.mark.integration, pytest.mark.compose, pytest.mark.slow]


def test_eos_stays_exact_across_a_rolling_upgrade_of_the_compose_cluster(engine, tmp_path):  # noqa: F811
    old = compose_images.build_images({**engine, "HARNESS_KAFKA_VERSION": "3.9.1"}, only=("kafka",))
    assert old == {"HARNESS_KAFKA_IMAGE": "harness-kafka:3.9.1"}
    env = {**engine, **old, **home("harness-compose-upgrade-")}
    try:
        up = harness("up", "--stack", "compose", "--brokers", "3", "--kafka-version", "3.9.1", env=env, timeout=900)
        assert up.returncode == 0, up.stdout + up.stderr
        d = run(env, tmp_path, "eos", "--fault", "rolling-upgrade:from=3.9.1,to=4.4.0,finalize=mid", "--fault",
                "planned-crash", "--messages", "1000", name="upgrade")
        rc = d["kafka_output"]["read_committed"]
        assert (rc["records"], rc["duplicates"], rc["lost"]) == (1000, 0, 0)
        seen, stable, ends = read_topic(d["stack"]["bootstrap_servers"], d["stack"]["output_topic"], "read_committed")
        assert len(seen) == 1000 and len(set(seen.values())) == 1000 and stable == ends
        rows = [f for f in d["faults"] if f["fault"] == "rolling-upgrade"]
        nodes, features = rows[:3], rows[3]
        assert [r["node"] for r in nodes] == [1, 2, 3] and all(r["release"] == "4.4.0" and r["back_at"] for r in nodes)
        assert features["exit_code"] == 0 and features["features_before"] == {"metadata.version": 21}
        assert features["features_after"]["transaction.version"] == 2
        images = subprocess.run(["docker", "ps", "--filter", "label=com.docker.compose.project=harness", "--format",
                                 "{{.Label \"com.docker.compose.service\"}} {{.Image}}"], env=engine,
                                capture_output=True, text=True, timeout=60).stdout.split("\n")
        assert sorted(line for line in images if line.startswith("kafka-")) == [
            f"kafka-{n} harness-kafka:4.4.0" for n in (1, 2, 3)]
        st = json.loads(harness("status", "--json", env=env).stdout)
        assert st["kafka_version"] == "4.4.0"                 # the state folder names the new release and image
    finally:
        down_purge(env)
    assert leftovers(engine) == {"container": [], "volume": [], "network": []}
