"""The findings page's clients (examples/consumers/<client>/), built from their pinned versions and run for real
under `harness run custom` with random kills on the session's stack (SCRAM-SHA-512, the run's own login):
kafka-python and confluent-kafka (Python), franz-go and Sarama (Go), KafkaJS (Node), each with its defaults (auto-commit: every 5 s,
every 1 s of what was marked, after each fetched batch; one insert per payment with the worker and attempt that
applied it). They hold at-least-once, the report's counts are psql's, and every duplicate's witness is the
ledger's own word. Slow: the builds fetch the pinned packages, and each client's default session timeout
(10-45 s) is the group's stall after every kill."""

import shutil
import subprocess
import sys

import psycopg
import pytest

from tests.conftest import ROOT
from tests.integration.test_custom import run_custom

pytestmark = [pytest.mark.integration, pytest.mark.slow]

EXAMPLES = ROOT / "examples" / "consumers"


def python_venv(tmp_path_factory, client: str) -> str:
    """The example consumer in examples/consumers/<client>/ in a virtual environment of its pinned requirements;
    its command line."""
    venv = tmp_path_factory.mktemp(client) / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300)
    proc = subprocess.run([str(venv / "bin" / "pip"), "install", "-q", "-r",
                           str(EXAMPLES / client / "requirements.txt")], capture_output=True, text=True,
                          timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return f"{venv / 'bin' / 'python'} {EXAMPLES / client / 'consumer.py'}"


@pytest.fixture(scope="module")
def kafka_python(tmp_path_factory):
    return python_venv(tmp_path_factory, "kafka-python")


@pytest.fixture(scope="module")
def confluent_kafka(tmp_path_factory):
    return python_venv(tmp_path_factory, "confluent-kafka")


def go_build(tmp_path_factory, client: str) -> str:
    """The example consumer in examples/consumers/<client>/ built from its go.mod and go.sum; its binary's path."""
    if shutil.which("go") is None:
        pytest.skip(f"go is needed to build the {client} example consumer")
    binary = tmp_path_factory.mktemp(client) / f"{client}-consumer"
    proc = subprocess.run(["go", "build", "-o", str(binary), "."], cwd=EXAMPLES / client, capture_output=True,
                          text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return str(binary)


@pytest.fixture(scope="module")
def franz_go(tmp_path_factory):
    return go_build(tmp_path_factory, "franz-go")


@pytest.fixture(scope="module")
def sarama(tmp_path_factory):
    return go_build(tmp_path_factory, "sarama")


@pytest.fixture(scope="module")
def kafkajs(tmp_path_factory):
    if shutil.which("node") is None or shutil.which("npm") is None:
        pytest.skip("node and npm are needed to install the KafkaJS example consumer")
    here = tmp_path_factory.mktemp("kafkajs")
    for name in ("consumer.js", "package.json", "package-lock.json"):
        shutil.copy(EXAMPLES / "kafkajs" / name, here / name)
    proc = subprocess.run(["npm", "ci", "--no-audit", "--no-fund"], cwd=here, capture_output=True, text=True,
                          timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return f"{shutil.which('node')} {here / 'consumer.js'}"


def held_and_witnessed_by_the_ledger(stack, d: dict) -> None:
    c = d["consumer"]
    assert c["claim"] == "at-least-once" and c["claim_held"] is True and d["counts"]["lost"] == 0
    with psycopg.connect(stack["dsn"]) as conn:
        rows = conn.execute(f"select message_id, worker, attempt from {d['stack']['ledger_table']} "
                            f"order by id").fetchall()
    assert d["counts"]["duplicates"] == len(rows) - len({r[0] for r in rows}), "the report is not psql's count"
    first = {}
    for mid, worker, attempt in rows:
        first.setdefault(mid, (worker, attempt))
    for w in c["witnesses"]:
        assert all(e["by"] == "ledger" for e in w["effects"]), w
        if w["explained_by"] == "kill":
            assert (w["kills"][0]["worker"], w["kills"][0]["attempt"]) == first[w["id"]], w
    credited = sum(k["duplicates_explained"] or 0 for k in c["kills"])
    assert credited <= d["counts"]["duplicates"], "a kill credited with more effects than were applied again"


@pytest.mark.parametrize("client", ["kafka_python", "confluent_kafka", "franz_go", "sarama", "kafkajs"])
def test_a_real_client_with_its_defaults_holds_at_least_once_witnessed_by_its_ledger_rows(stack, tmp_path, client,
                                                                                          request):
    cmd = request.getfixturevalue(client)
    d = run_custom(stack, tmp_path, cmd, "--expect", "at-least-once", "--kills", "3", "--workers", "2",
                   "--partitions", "2", "--messages", "2000", "--seed", "1")
    held_and_witnessed_by_the_ledger(stack, d)
