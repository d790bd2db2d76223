"""The Compose stack on a real Docker engine: real containers, real volumes, broker faults through the
Docker SDK on real containers, the nightly workflow's own commands, and the README's first command on a
stock Debian 12 in a container of that engine (tests/integration/stock_debian.py).

The module uses an engine that answers, or starts a private one with `scripts/docker-engine.sh` (root
only), and uses the official images when the engine has them, else builds local ones from Debian's
packages (`scripts/build-images.sh`). It skips, with one stated reason, only where no engine can be had.
Whatever it started it stops; every test checks that nothing of the harness's compose project is left.
"""

import json
import os
import re
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from harness.run.runner import EXIT_CODES
from harness.stack import compose, compose_images
from tests.conftest import ROOT, harness, searchable_dir
from tests.unit.sample_report import validate
from tests import kafka_login

pytestmark = [pytest.mark.integration, pytest.mark.compose]

PROJECT = "harness"
ENGINE_SCRIPT = ROOT / "scripts" / "docker-engine.sh"


def _docker(env, *args, timeout=120) -> subprocess.CompletedProcess:
    return subprocess.run(["docker", *args], env=env, capture_output=True, text=True, timeout=timeout)


def _answers(env) -> bool:
    try:
        return _docker(env, "info", timeout=20).returncode == 0
    except (OSError, subprocess.SubprocessError):
        return False


@pytest.fixture(scope="module")
def docker_engine():
    """{env} with DOCKER_HOST of an engine that answers; the engine stopped at the end if we started it. Alone,
    for a test that makes no compose stack (the stock-Debian one): it builds no compose image and removes no
    compose container."""
    env = dict(os.environ)
    started = False
    if not _answers(env):
        if os.geteuid() != 0:
            pytest.skip("no Docker engine answers and only root can start one (scripts/docker-engine.sh)")
        proc = subprocess.run(["bash", str(ENGINE_SCRIPT), "start"], capture_output=True, text=True, timeout=1500)
        last = proc.stdout.strip().splitlines()[-1] if proc.stdout.strip() else ""
        if proc.returncode != 0 or not last.startswith("export DOCKER_HOST="):
            pytest.skip(f"no Docker engine could be started here: {(proc.stderr.strip().splitlines() or ['?'])[-1]}")
        env["DOCKER_HOST"] = shlex.split(last.split("=", 1)[1])[0]
        started = True
    try:
        yield env
    finally:
        if started:
            subprocess.run(["bash", str(ENGINE_SCRIPT), "stop"], env=env, capture_output=True, timeout=300)


@pytest.fixture(scope="module")
def engine(docker_engine):
    """{env} with DOCKER_HOST and the images to use; the compose project's containers, volumes and networks
    removed at the end."""
    env = dict(docker_engine)
    try:
        env.update(compose_images.build_images(env, only=tuple(compose_images.IMAGE_VARS)))  # the harness's own builder
        assert env.get("HARNESS_KAFKA_IMAGE") and env.get("HARNESS_POSTGRES_IMAGE") and env.get("HARNESS_TOXIPROXY_IMAGE")
        yield env
    finally:
        left = leftovers(env)
        for kind, names in left.items():        # never leave our project behind, even after a failure
            if names:
                _docker(env, kind, "rm", "-f", *names) if kind == "container" else \
                    _docker(env, kind, "rm", *names)


def leftovers(env) -> dict:
    """The containers, volumes and networks of the harness's compose project that exist now."""
    label = f"label=com.docker.compose.project={PROJECT}"
    out = {}
    for kind, args in (("container", ["ps", "-a", "--filter", label, "--format", "{{.Names}}"]),
                       ("volume", ["volume", "ls", "--filter", label, "--format", "{{.Name}}"]),
                       ("network", ["network", "ls", "--filter", label, "--format", "{{.Name}}"])):
        out[kind] = _docker(env, *args).stdout.split()
    return out


def home(prefix: str) -> dict:
    return {"HARNESS_HOME": str(searchable_dir(prefix)), "HARNESS_BOOTSTRAP_SERVERS": "", "HARNESS_POSTGRES_DSN": "",
            "HARNESS_STACK": "compose"}


def run(env, tmp_path: Path, *args, verdict="as-predicted", name="report") -> dict:
    out = tmp_path / name
    proc = harness("run", *args, "--stack", "compose", "--quiet", "--out", str(out), env=env, timeout=900)
    assert proc.returncode == EXIT_CODES[verdict], proc.stderr[-3000:]
    d = json.loads((out / "report.json").read_text())
    validate(d)
    assert d["verdict"] == verdict, json.dumps(d["verdict_detail"], indent=1)
    return d


def down_purge(env) -> None:
    proc = harness("down", "--purge", env=env, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_the_single_node_stack_runs_audits_and_leaves_nothing(engine, tmp_path):
    """The default compose stack, with SCRAM and the authorizer (tests/integration/compose_checks.py says
    what holds): runs whose consumers log in as a user of their own, an audit, `harness env`'s read-only
    user, and nothing left after `down --purge`, the passwords included."""
    from tests.integration.compose_checks import ArgvWatch, scram_holds
    env = {**engine, **home("harness-compose-single-")}
    state = Path(env["HARNESS_HOME"])
    try:
        watch = ArgvWatch(state)
        try:
            up = harness("up", "--stack", "compose", env=env, timeout=900)
        finally:
            in_argv = watch.stop()
        assert up.returncode == 0, up.stdout + up.stderr
        assert watch.sampled and in_argv == [], f"a Kafka password was on the command line of pids {in_argv}"
        assert engine["HARNESS_KAFKA_IMAGE"] in up.stdout + up.stderr       # it says which images it uses
        st = json.loads(harness("status", "--json", env=env).stdout)
        assert st["kind"] == "compose" and st["healthy"], st
        scram_holds(env, state, up.stdout + up.stderr)
        d = run(env, tmp_path, "offset-after", "--messages", "300")
        assert d["counts"]["duplicates"] == len(d["crashes"]) > 0 and d["counts"]["lost"] == 0
        assert d["stack"]["kind"] == "compose"
        assert d["stack"]["consumers_kafka_user"].startswith("harness_run_") and \
            "retired when the run ends" in d["stack"]["consumers_kafka_user"], d["stack"]["consumers_kafka_user"]
        audit = harness("audit", str(tmp_path / "report"), env=env, timeout=300)
        assert audit.returncode == 0 and "agree" in audit.stdout + audit.stderr, audit.stdout + audit.stderr
        e = run(env, tmp_path, "eos", "--messages", "200", name="eos")
        assert e["kafka_output"]["read_committed"]["duplicates"] == 0
        shell = harness("env", env=env, timeout=120)
        assert shell.returncode == 0 and f"HARNESS_KAFKA_CONFIG_FILE={state / 'shell-client.properties'}" in \
            shell.stdout, shell.stdout + shell.stderr
        assert "sasl.username=harness_shell" in (state / "shell-client.properties").read_text()
    finally:
        kafka_login.forget(f"127.0.0.1:{compose.KAFKA_PORT}")     # its login must not reach the next stack's commands
        down_purge(env)
    assert leftovers(engine) == {"container": [], "volume": [], "network": []}
    kept = {"client.properties", "kafka-controller.properties", "shell-client.properties", "compose.auth",
            "compose.password", "pgpass"} & {f.name for f in state.iterdir()}
    assert not kept, f"down --purge left the passwords of deleted volumes: {kept}"


@pytest.mark.slow          # 43 s; the default run keeps the single-node stack and the README's stock-Debian test
def test_a_volume_with_another_password_is_one_line_naming_it(engine):
    """(On a plaintext stack, `--auth none`, which is still there for those who ask: `up` says what it gives
    up, a client needs no login, and another auth on its volumes is refused.)"""
    from tests.integration.compose_checks import _refused_without_login
    from harness.cli.commands.up import no_auth
    first, second = {**engine, **home("harness-compose-pw1-")}, {**engine, **home("harness-compose-pw2-")}
    try:
        up = harness("up", "--stack", "compose", "--auth", "none", env=first, timeout=900)
        assert up.returncode == 0, up.stdout + up.stderr
        assert no_auth("compose") in up.stderr and "harness up --stack compose --auth scram" in up.stderr
        assert not _refused_without_login(f"127.0.0.1:{compose.KAFKA_PORT}")
        assert not (Path(first["HARNESS_HOME"]) / "client.properties").exists()
        refused = harness("up", "--stack", "compose", "--auth", "scram", env=first, timeout=300)
        assert refused.returncode == 2 and "set up with --auth none" in refused.stderr, refused.stderr[-2000:]
        assert harness("down", env=first, timeout=300).returncode == 0        # the volume stays, its password too
        proc = harness("up", "--stack", "compose", env=second, timeout=900)
        assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr[-2000:]
        line = proc.stderr.strip().splitlines()[-1]
        assert "refused the password" in line and f"{PROJECT}_postgres-data" in line and "docker volume rm" in line
    finally:
        harness("down", "--purge", env=second, timeout=300)
        down_purge(first)
    assert leftovers(engine) == {"container": [], "volume": [], "network": []}


# about 250 s (a 3-node cluster of containers, three broker faults): nightly; the single-node compose tests run every time
@pytest.mark.slow
def test_the_cluster_takes_broker_faults_on_real_containers_and_purge_removes_both_variants(engine, tmp_path):
    from tests.integration.test_cluster import sigkill_mid_fault
    env = {**engine, **home("harness-compose-cluster-")}
    try:
        # a single-node stack first, stopped without purge: its kafka-data volume stays (defect: it was left)
        assert harness("up", "--stack", "compose", env=env, timeout=900).returncode == 0
        assert harness("down", env=env, timeout=300).returncode == 0
        up = harness("up", "--stack", "compose", "--brokers", "3", env=env, timeout=900)
        assert up.returncode == 0, up.stdout + up.stderr
        for fault in ("broker-kill", "broker-pause", "leader-kill"):
            d = run(env, tmp_path, "eos", "--messages", "200", "--fault", "planned-crash", "--fault", fault,
                    name=fault)
            struck = [f for f in d["faults"] if f["fault"] == fault]
            assert struck and all(f["target"].startswith("kafka-") for f in struck), d["faults"]
            # answering is the broker's own answer: never before the container was started again
            assert all(f["back_at"] and f["back_at"] > f["recovered_at"] for f in struck), struck
            assert d["kafka_output"]["read_committed"]["duplicates"] == 0
            assert d["kafka_output"]["read_committed"]["lost"] == 0
        # network faults: iptables rules inside the broker containers' own namespaces, healed after each
        for name, fault in (("partition", "partition:of=coordinator,count=1,down=3"),
                            ("halves", "partition:mode=halves,count=1,down=3"),
                            ("client-cut", "client-cut:count=1,down=2")):
            d = run(env, tmp_path, "eos", "--messages", "200", "--fault", "planned-crash", "--fault", fault, name=name)
            struck = [f for f in d["faults"] if f["fault"] == fault.split(":")[0]]
            assert len(struck) == 1 and struck[0]["back_at"] and "rules in container" in struck[0]["process"], struck
            assert (d["kafka_output"]["read_committed"]["duplicates"], d["kafka_output"]["read_committed"]["lost"]) \
                == (0, 0)
            assert container_rules(engine) == {1: [], 2: [], 3: []}
        # a harness SIGKILLed mid-partition leaves its rules: named, a new network fault refused, down removes them
        sigkill_mid_fault(env, tmp_path / "killed", ["offset-after", "--stack", "compose", "--messages", "3000",
                                                     "--fault", "partition:count=1,every=0,down=120"],
                          lambda: {n: r for n, r in container_rules(engine).items() if r})
        refused = harness("run", "eos", "--stack", "compose", "--messages", "10", "--fault", "client-cut", env=env,
                          timeout=600)
        assert refused.returncode == 2 and "is cut off by network rules" in refused.stderr, refused.stderr[-2000:]
    finally:
        down_purge(env)
    assert leftovers(engine) == {"container": [], "volume": [], "network": []}


@pytest.mark.slow          # a compose cluster with proxies; the local cluster's proxies are tested in test_latency
def test_the_cluster_with_its_proxies_takes_latency_and_nothing_of_a_delay_outlives_down(engine, tmp_path):
    """`harness up --stack compose --brokers 3 --proxies`: a Toxiproxy container in front of every node.
    A producer under a leader's delay past its request timeout duplicates only without idempotence (an
    independent reader on the direct listeners agrees), eos stays exact under a delay with loss, a client
    cut reaches the proxied clients too, and a toxic a SIGKILLed harness left is named, refused, and gone
    with `harness down`."""
    from confluent_kafka.admin import AdminClient
    from harness.stack import toxiproxy
    from tests.integration.test_cluster import read_keys, sigkill_mid_fault
    env = {**engine, **home("harness-compose-proxies-")}
    api = toxiproxy.Api(compose.TOXIPROXY_API_PORT)
    direct = ",".join(f"127.0.0.1:{p}" for p in compose.CLUSTER_KAFKA_PORTS)
    try:
        up = harness("up", "--stack", "compose", "--brokers", "3", "--proxies", env=env, timeout=900)
        assert up.returncode == 0, up.stdout + up.stderr
        st = json.loads(harness("status", "--json", env=env).stdout)
        proxies = [f"127.0.0.1:{p}" for p in compose.CLUSTER_PROXY_PORTS]
        assert st["healthy"] and st["bootstrap_servers"] == ",".join(proxies), st
        md = AdminClient(kafka_login.config(st["bootstrap_servers"])).list_topics(timeout=10)
        assert sorted(f"{b.host}:{b.port}" for b in md.brokers.values()) == proxies     # every later connection too
        assert api.toxics() == {}
        fault = "latency:of=leader,ms=2500,jitter=200,count=2,every=1,down=4"
        runs = {idem: run(env, tmp_path, "producer", "--messages", "400", "--idempotence", idem, "--fault", fault,
                          name=f"producer-{idem}") for idem in ("on", "off")}
        for d in runs.values():
            rows = [f for f in d["faults"] if f["fault"] == "latency"]
            assert len(rows) == 2 and all(r["back_at"] and r["process"] == f"toxic on proxy kafka-{r['node']}"
                                          for r in rows), rows
            keys = read_keys(direct, d["stack"]["output_topic"], "read_committed")
            assert len(keys) == 400 and sum(n - 1 for n in keys.values()) == d["counts"]["duplicates"]
            assert d["counts"]["lost"] == 0
        assert runs["on"]["counts"]["duplicates"] == 0
        e = run(env, tmp_path, "eos", "--messages", "200", "--fault", "planned-crash",
                "--fault", "latency:of=coordinator,ms=1200,loss=0.1,count=1,down=4", name="eos")
        (row,) = [f for f in e["faults"] if f["fault"] == "latency"]
        assert row["back_at"] and "rules in container" in row["process"] and "transaction coordinator" in row["target"]
        assert (e["kafka_output"]["read_committed"]["duplicates"], e["kafka_output"]["read_committed"]["lost"]) == (0, 0)
        assert api.toxics() == {} and container_rules(engine) == {1: [], 2: [], 3: []}
        c = run(env, tmp_path, "eos", "--messages", "200", "--fault", "planned-crash",
                "--fault", "client-cut:count=1,down=2", name="cut")
        assert (c["kafka_output"]["read_committed"]["duplicates"], c["kafka_output"]["read_committed"]["lost"]) == (0, 0)
        # a harness SIGKILLed mid-delay leaves its toxic: named, refused, and gone with the container
        delayed = sigkill_mid_fault(env, tmp_path / "killed", ["offset-after", "--stack", "compose", "--messages",
                                                               "3000", "--fault", "latency:count=1,every=0,down=120"],
                                    api.toxics)
        (proxy,) = delayed
        status = harness("status", env=env, timeout=120)
        assert f"{proxy} delayed by Toxiproxy" in status.stdout + status.stderr
        refused = harness("run", "offset-after", "--stack", "compose", "--messages", "10", env=env, timeout=300)
        assert refused.returncode == 2 and "is delayed by Toxiproxy" in refused.stderr, refused.stderr[-2000:]
        assert harness("down", env=env, timeout=300).returncode == 0
        assert leftovers(engine)["container"] == []              # the toxic went with the Toxiproxy container
    finally:
        down_purge(env)
    assert leftovers(engine) == {"container": [], "volume": [], "network": []}


@pytest.mark.slow          # builds a second Kafka image
def test_another_kafka_release_on_compose_gets_its_own_image_and_its_data_keeps_it(engine, tmp_path):
    """`--kafka-version 4.1.1`: the official image of that release, or one built here for it (never the
    pinned release's image the engine fixture names); the broker says 4.1; another release on its volumes is
    refused; `down --purge` forgets the release with the volumes."""
    env = {**{k: v for k, v in engine.items() if k != "HARNESS_KAFKA_IMAGE"}, **home("harness-compose-release-")}
    try:
        up = harness("up", "--stack", "compose", "--kafka-version", "4.1.1", env=env, timeout=1200)
        assert up.returncode == 0, up.stdout + up.stderr
        st = json.loads(harness("status", "--json", env=env).stdout)
        assert st["healthy"] and st["kafka_version"] == "4.1.1", st
        image = _docker(env, "inspect", "-f", "{{.Config.Image}}", f"{PROJECT}-kafka-1").stdout.strip()
        assert image.endswith(":4.1.1"), image
        d = run(env, tmp_path, "eos", "--messages", "200", name="eos")
        assert (d["environment"]["kafka_version"], d["environment"]["kafka_metadata_version"]) == ("4.1.1", "4.1-IV1")
        assert d["kafka_output"]["read_committed"]["duplicates"] == 0
        refused = harness("up", "--stack", "compose", "--kafka-version", "4.4.0", env=env, timeout=300)
        assert refused.returncode == 2 and "was written by Kafka 4.1.1; to run Kafka 4.4.0" in refused.stderr, \
            refused.stderr[-2000:]
    finally:
        down_purge(env)
    assert not (Path(env["HARNESS_HOME"]) / compose_images.RELEASE_FILE).exists()
    assert leftovers(engine) == {"container": [], "volume": [], "network": []}


def test_the_readmes_first_command_runs_as_written_on_a_stock_debian_12(docker_engine, tmp_path):
    """A stock Debian 12 (debootstrap minbase), the README's apt line and nothing else, a clean copy of the
    checkout: `./scripts/setup.sh && .venv/bin/harness run offset-before` exits 0 and says as-predicted
    (tests/integration/stock_debian.py says what the container gets and why)."""
    from tests.integration import stock_debian
    stock_debian.build_base(docker_engine)
    proc, name = stock_debian.run(docker_engine, tmp_path / "reports")
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-6000:]
    assert re.search(r"^offset-before: as-predicted\s*$", out, re.M), out[-6000:]
    (report,) = tmp_path.glob("reports/*/report.json")
    d = json.loads(report.read_text())
    assert d["verdict"] == "as-predicted" and d["counts"]["lost"] == len(d["crashes"]) > 0, d["verdict_detail"]
    left = _docker(docker_engine, "ps", "-a", "--filter", f"name=^{name}$", "--format", "{{.Names}}")
    assert left.returncode == 0 and left.stdout.split() == [], left.stdout + left.stderr      # removed
    print("\n".join(line for line in out.splitlines() if line.startswith(("stock-debian:", "setup:"))))


def container_rules(env) -> dict:
    """{node: the iptables rules inside its broker container's network namespace}."""
    out = {}
    for n in (1, 2, 3):
        pid = _docker(env, "inspect", "-f", "{{.State.Pid}}", f"{PROJECT}-kafka-{n}-1").stdout.strip()
        proc = subprocess.run(["nsenter", "--target", pid, "--net", "iptables", "-S"], capture_output=True, text=True,
                              timeout=30)
        assert proc.returncode == 0, proc.stderr
        out[n] = [line for line in proc.stdout.splitlines() if not line.startswith("-P ")]
    return out


def test_ctrl_c_of_a_run_on_compose_leaves_no_worker_and_down_leaves_nothing(engine, tmp_path):
    env = {**engine, **home("harness-compose-int-")}
    try:
        assert harness("up", "--stack", "compose", env=env, timeout=900).returncode == 0
        out = tmp_path / "r"
        proc = subprocess.Popen([sys.executable, "-m", "harness.cli", "run", "offset-after", "--stack", "compose",
                                 "--messages", "2000", "--restart-delay", "0.5", "--quiet", "--out", str(out)],
                                cwd=ROOT, env={**os.environ, **env}, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True)
        deadline = time.time() + 300         # until a worker writes its log: the run is mid-way then
        while time.time() < deadline and proc.poll() is None and not list((out / "workers").glob("w*.log")):
            time.sleep(0.2)
        assert proc.poll() is None, "the run ended before it could be interrupted"
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=300)
        assert proc.returncode in (EXIT_CODES["incomplete"], 130), err[-2000:]
        assert "Traceback" not in err
        workers = subprocess.run(["pgrep", "-f", f"harness.workers.worker.*{out}"], capture_output=True, text=True)
        assert workers.stdout.strip() == "", "workers outlived the interrupted run"
    finally:
        down_purge(env)
    assert leftovers(engine) == {"container": [], "volume": [], "network": []}


def _nightly_inputs() -> dict:
    """The inputs the nightly gives the action (through the reusable workflow, which passes each on)."""
    wf = yaml.safe_load((ROOT / ".github" / "workflows" / "nightly.yml").read_text())
    (job,) = wf["jobs"].values()
    inputs = {k: str(v) for k, v in job["with"].items()}
    inputs["worker-cmd"] = ""           # the repository variable HARNESS_CONSUMER_CMD: unset here
    return inputs


@pytest.mark.slow          # the whole default suite on the compose stack
def test_the_nightly_runs_through_the_action_against_the_engine(engine, tmp_path):
    """The action's own shell steps, in order, as a runner would run them (tests/action_steps.py), with
    the nightly's inputs: `harness up --stack compose` with the password the action generates, the
    whole suite on it, the job summary, and the comparison with a previous night (here: the same
    night's report, standing in for the artifact), then the action's teardown. Steps that use other
    actions (setup-python, the artifacts) are GitHub's part; `install: false` uses this interpreter."""
    from tests.action_steps import run_composite
    state = home("harness-compose-action-")
    bin_dir = tmp_path / "bin"          # `python3` on PATH: this test's interpreter, which has the harness
    bin_dir.mkdir()
    (bin_dir / "python3").write_text(f"#!/bin/sh\nexec {shlex.quote(sys.executable)} \"$@\"\n")
    (bin_dir / "python3").chmod(0o755)
    env = {**engine, **state, "HARNESS_STACK": "", "PYTHONPATH": str(ROOT),
           "PATH": f"{bin_dir}:{engine.get('PATH', os.environ['PATH'])}"}
    work, temp = tmp_path / "checkout", tmp_path / "runner-temp"
    work.mkdir()
    temp.mkdir()

    def same_night(with_):
        subprocess.run(["cp", "-r", str(Path(with_["path"]).parent / "reports"), with_["path"]], check=True)
        return {"found_artifact": "true"}
    try:
        run = run_composite(ROOT / "action.yml", {**_nightly_inputs(), "install": "false"}, work, temp, env,
                            stand_ins={"previous": same_night})
        log = "\n".join(f"--- {s.name}: {s.outcome}\n{s.stdout[-2000:]}{s.stderr[-3000:]}" for s in run.steps)
        assert not run.failed, log
        ran = [s.name for s in run.steps if s.outcome == "success"]
        assert ran == ["Install the harness", "Prepare the state and report folders", "Start Kafka and PostgreSQL",
                       "Run the suite", "Write the job summary", "Download the previous report", "Judge the runs",
                       "Stop the stack"], ran
        suite = json.loads(next(temp.glob("crash-test.*/reports/suite/suite.json")).read_text())
        assert suite["experiments"] and all(e["verdict"] == "as-predicted" for e in suite["experiments"]), \
            [(e["experiment"], e["verdict"]) for e in suite["experiments"]]
        assert "compared with the previous successful run" in run.summary
    finally:
        harness("down", "--purge", env=env, timeout=300)     # after a failure mid-way; a no-op after the action's
    assert leftovers(engine) == {"container": [], "volume": [], "network": []}


@pytest.mark.slow
def test_the_wheel_starts_the_compose_stack_from_its_own_files(engine, tmp_path):
    """`harness up --stack compose` from a wheel in a fresh virtual environment, run from an empty folder: the
    containers' compose files are the wheel's (the labels compose gives them), not a checkout's."""
    from tests.integration.installed_wheel import data_folder, install, ok, run as run_wheel
    script, clean, venv = install(tmp_path / "wheel")
    work = tmp_path / "work"
    work.mkdir()
    engine_env = {k: v for k, v in engine.items() if k == "DOCKER_HOST" or k in compose_images.IMAGE_ENV}
    env = {**clean, **engine_env, **home("harness-compose-wheel-")}
    try:
        ok(run_wheel([script, "up", "--stack", "compose"], work, env), "harness up --stack compose")
        label = "com.docker.compose.project.config_files"
        listed = _docker(env, "ps", "--filter", f"label=com.docker.compose.project={PROJECT}",
                         "--format", f'{{{{.Label "{label}"}}}}').stdout.split()
        files = {f for line in listed for f in line.split(",") if f}
        assert files and all(Path(f).is_relative_to(data_folder(venv)) for f in files), files
    finally:
        down = run_wheel([script, "down", "--purge"], work, env, timeout=300)
    assert down.returncode == 0, down.stdout + down.stderr
    assert leftovers(engine) == {"container": [], "volume": [], "network": []}
