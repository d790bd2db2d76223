"""The findings page's example consumers (examples/consumers/<client>/) are built from pinned versions: every
row's numbers must be reproducible by the same client code. Exact versions in requirements.txt and package.json,
a lock file with an integrity hash per package, and go.sum entries for every module go.mod requires."""

import json
import re

import pytest

from tests.conftest import ROOT

EXAMPLES = ROOT / "examples" / "consumers"


@pytest.mark.parametrize("client", ["kafka-python", "quixstreams", "confluent-kafka"])
def test_python_requirements_are_exact_pins(client):
    lines = [ln.strip() for ln in (EXAMPLES / client / "requirements.txt").read_text().splitlines()
             if ln.strip() and not ln.startswith("#")]
    assert lines and all(re.fullmatch(r"[A-Za-z0-9_.\-\[\]]+==[0-9][0-9A-Za-z.]*", ln) for ln in lines), lines


def test_the_kafkajs_consumer_pins_exact_versions_and_locks_each_package_by_hash():
    here = EXAMPLES / "kafkajs"
    deps = json.loads((here / "package.json").read_text())["dependencies"]
    assert set(deps) == {"kafkajs", "pg"}
    assert all(re.fullmatch(r"\d+\.\d+\.\d+", v) for v in deps.values()), deps
    lock = json.loads((here / "package-lock.json").read_text())["packages"]
    for name, version in deps.items():
        assert lock[f"node_modules/{name}"]["version"] == version
    packages = {k: v for k, v in lock.items() if k}
    assert packages and all(v.get("integrity", "").startswith("sha512-") for v in packages.values())


@pytest.mark.parametrize("client", ["franz-go", "sarama"])
def test_each_go_module_the_consumer_requires_is_in_go_sum(client):
    mod = (EXAMPLES / client / "go.mod").read_text()
    required = re.findall(r"^\s*(?:require\s+)?([a-z0-9.\-]+\.[a-z]+/\S+)\s+(v\S+)", mod, re.M)
    assert required
    sums = (EXAMPLES / client / "go.sum").read_text()
    for path, version in required:
        assert f"{path} {version} h1:" in sums, f"{client}: {path} {version} not in go.sum"
