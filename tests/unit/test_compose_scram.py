"""SCRAM on the compose stack without an engine: the override files, the containers' entry point
(compose/kafka-scram.sh, run here under bash with a stand-in `java`), and how the harness chooses, records
and hands over the auth (harness/stack/compose_auth.py).

The security must be the local stack's (harness/stack/kafka_auth.py): the same mechanisms, super users,
authorizer and metadata snapshots, and the same JAAS text for the same password. No password may be in a
compose file, an argument of any process, or the output of the entry point.
"""

import os
import shutil
import stat
import subprocess
from pathlib import Path

import pytest
import yaml

from harness.core.errors import HarnessError
from harness.stack import compose, compose_auth, kafka_auth

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "compose" / "kafka-scram.sh"
PASSWORD, CONTROLLER_PASSWORD = "harness-pw_0123456789abcdef", "ctrl-pw_0123456789abcdefgh"
CLUSTER_MAP = "INTERNAL:PLAINTEXT,EXTERNAL:PLAINTEXT,PROXIED:PLAINTEXT,CONTROLLER:PLAINTEXT"


def _kafka_services(variant: str) -> dict:
    doc = yaml.safe_load(compose_auth.OVERRIDES[variant].read_text())
    base = yaml.safe_load(compose.FILES[variant].read_text())
    kafkas = {n: s for n, s in doc["services"].items() if n.startswith("kafka")}
    assert set(kafkas) == {n for n in base["services"] if n.startswith("kafka")}, \
        f"{variant}: the override does not cover exactly the base file's Kafka services"
    return kafkas


def _property(env_name: str) -> str:
    """A KAFKA_* variable's server property, as the images make it."""
    return env_name.removeprefix("KAFKA_").lower().replace("_", ".").replace("...", "-").replace("..", "_")


@pytest.mark.parametrize("variant", sorted(compose_auth.OVERRIDES))
def test_the_overrides_set_the_local_stacks_authorizer_users_and_snapshots(variant):
    want = {k: v for k, v in kafka_auth.scram_settings(1, 2, PASSWORD, CONTROLLER_PASSWORD, "h").items()
            if k in ("sasl.enabled.mechanisms", "sasl.mechanism.inter.broker.protocol", "sasl.mechanism.controller.protocol",
                     "listener.name.controller.sasl.enabled.mechanisms", "authorizer.class.name", "super.users",
                     "allow.everyone.if.no.acl.found")}
    want.update(kafka_auth.SNAPSHOT_SETTINGS)
    for name, svc in _kafka_services(variant).items():
        got = {_property(k): str(v) for k, v in svc["environment"].items()}
        assert got == want, f"{variant}: {name}"
        assert svc["entrypoint"] == ["bash", "/harness/kafka-scram.sh"]
        assert svc["configs"] == [{"source": "kafka-scram", "target": "/harness/kafka-scram.sh"}]
        assert sorted(svc["secrets"]) == ["harness-kafka-controller-password", "harness-kafka-password"]
        assert "--command-config /opt/kafka/config/harness-client.properties" in svc["healthcheck"]["test"][1]


@pytest.mark.parametrize("variant", sorted(compose_auth.OVERRIDES))
def test_the_passwords_come_from_the_environment_of_docker_compose_only(variant):
    doc = yaml.safe_load(compose_auth.OVERRIDES[variant].read_text())
    assert doc["secrets"] == {"harness-kafka-password": {"environment": compose_auth.PASSWORD_ENV},
                              "harness-kafka-controller-password": {"environment": compose_auth.CONTROLLER_PASSWORD_ENV}}
    assert (compose_auth.OVERRIDES[variant].parent / doc["configs"]["kafka-scram"]["file"]).resolve() == \
        compose_auth.START_SCRIPT.resolve()
    text = yaml.safe_dump(doc)          # what compose reads (the comments show the variables by name)
    assert "password=" not in text.lower() and "${" not in text, "a password, or a variable, written into the file"


def _docker_compose(*files: Path, env: dict) -> subprocess.CompletedProcess:
    if shutil.which("docker") is None:
        pytest.skip("the docker client is not on PATH")
    proc = subprocess.run(["docker", "compose", *(a for f in files for a in ("-f", str(f))), "config"], cwd=ROOT,
                          env=env, capture_output=True, text=True, timeout=120)
    if proc.returncode != 0 and ("is not a docker command" in proc.stderr or "unknown command" in proc.stderr):
        pytest.skip("the docker client has no compose plugin")
    return proc


@pytest.mark.parametrize("files", [("single",), ("cluster",), ("cluster", "proxies")], ids="+".join)
def test_docker_compose_accepts_every_combination_and_keeps_the_passwords_out_of_it(files):
    env = {**os.environ, "HARNESS_PG_PASSWORD": "dummy", compose_auth.PASSWORD_ENV: PASSWORD,
           compose_auth.CONTROLLER_PASSWORD_ENV: CONTROLLER_PASSWORD}
    paths = [compose.FILES[files[0]], *([compose.PROXIES_FILE] if "proxies" in files else []),
             compose_auth.OVERRIDES[files[0]]]
    proc = _docker_compose(*paths, env=env)
    assert proc.returncode == 0, proc.stderr
    merged = yaml.safe_load(proc.stdout)
    kafkas = {n: s for n, s in merged["services"].items() if n.startswith("kafka")}
    assert kafkas and all(s["entrypoint"] == ["bash", "/harness/kafka-scram.sh"] for s in kafkas.values())
    if "proxies" in files:      # the proxies' own settings survive the override
        assert all("PROXIED" in s["environment"]["KAFKA_LISTENER_SECURITY_PROTOCOL_MAP"] for s in kafkas.values())
    assert PASSWORD not in proc.stdout and CONTROLLER_PASSWORD not in proc.stdout


def _bash(code: str, tmp_path: Path, secrets: dict | None = None, env: dict | None = None):
    """Run `code` after sourcing the entry point, with its folders in tmp_path and a `java` that records what
    it was given (its arguments, the @file and the properties file it names) and says it formatted."""
    bin_dir, secret_dir, config = tmp_path / "bin", tmp_path / "secrets", tmp_path / "config"
    for d in (bin_dir, secret_dir, config):
        d.mkdir(exist_ok=True)
    for name, value in (secrets if secrets is not None else {"harness-kafka-password": PASSWORD,
                                                              "harness-kafka-controller-password": CONTROLLER_PASSWORD}).items():
        (secret_dir / name).write_text(value + "\n")
    (bin_dir / "java").write_text(f"""#!/bin/bash
printf '%s\\n' "$@" >> {tmp_path}/java.argv
for a in "$@"; do
  if [[ "$a" == @* ]]; then
    cp "${{a#@}}" {tmp_path}/format.args
    props="$(grep -A1 '^"-c"$' "${{a#@}}" | tail -n 1 | tr -d '"')"
    cp "$props" {tmp_path}/format.properties
  fi
done
echo "Bootstrap metadata: UserScramCredentialRecord(name='harness', salt=[1, 2], storedKey=[3, 4])"
echo "Formatting metadata directory /var/lib/kafka/data with metadata.version 4.4-IV2."
""")
    (bin_dir / "java").chmod(0o755)
    script = (f'source {SCRIPT}\nSECRETS={secret_dir}\nCONFIG_DIR={config}\n'
              f'start_image() {{ env | grep "^KAFKA_" | sort > {tmp_path}/started.env; }}\n' + code)
    base = {"PATH": f"{bin_dir}:{os.environ['PATH']}", "CLUSTER_ID": "JpZ8vElARoqotrDaiFHIQA",
            "KAFKA_NODE_ID": "2", "KAFKA_PROCESS_ROLES": "broker,controller", "KAFKA_HEAP_OPTS": "-Xmx1G",
            "KAFKA_CONTROLLER_LISTENER_NAMES": "CONTROLLER", "KAFKA_LISTENER_SECURITY_PROTOCOL_MAP": CLUSTER_MAP,
            "KAFKA_LOG_DIRS": "/var/lib/kafka/data"}
    return subprocess.run(["bash", "-c", script], env={**base, **(env or {})}, capture_output=True, text=True,
                          timeout=60)


def _started(tmp_path: Path) -> dict:
    return dict(line.split("=", 1) for line in (tmp_path / "started.env").read_text().splitlines())


def test_every_listener_becomes_sasl_with_the_local_stacks_jaas_text(tmp_path):
    proc = _bash("main", tmp_path)
    assert proc.returncode == 0, proc.stderr
    started = {_property(k): v for k, v in _started(tmp_path).items()}
    assert started["listener.security.protocol.map"] == \
        "INTERNAL:SASL_PLAINTEXT,EXTERNAL:SASL_PLAINTEXT,PROXIED:SASL_PLAINTEXT,CONTROLLER:SASL_PLAINTEXT"
    local = kafka_auth.scram_settings(1, 2, PASSWORD, CONTROLLER_PASSWORD, "h")
    scram = local["listener.name.sasl_plaintext.scram-sha-512.sasl.jaas.config"]
    for listener in ("internal", "external", "proxied"):
        assert started[f"listener.name.{listener}.scram-sha-512.sasl.jaas.config"] == scram, listener
    assert started["listener.name.controller.plain.sasl.jaas.config"] == \
        local["listener.name.controller.plain.sasl.jaas.config"]
    assert not [k for k in started if k.startswith("listener.name.controller.scram")], "SCRAM on the controllers"


def test_the_volume_is_formatted_with_the_harness_user_and_no_password_reaches_argv_or_output(tmp_path):
    proc = _bash("main", tmp_path)
    assert proc.returncode == 0, proc.stderr
    argv = (tmp_path / "java.argv").read_text()
    assert PASSWORD not in argv and CONTROLLER_PASSWORD not in argv
    args = [a.strip('"') for a in (tmp_path / "format.args").read_text().splitlines()]
    assert args[:4] == ["kafka.tools.StorageTool", "format", "-t", "JpZ8vElARoqotrDaiFHIQA"]
    assert args[args.index("--add-scram") + 1] == f"SCRAM-SHA-512=[name=harness,password={PASSWORD}]"
    assert "--ignore-formatted" in args         # a restarted container starts on its data as it is
    props = dict(line.split("=", 1) for line in (tmp_path / "format.properties").read_text().splitlines())
    assert props["node.id"] == "2" and props["log.dirs"] == "/var/lib/kafka/data"
    assert "heap.opts" not in props, "a variable the image does not make a property of"
    assert props["listener.security.protocol.map"].startswith("INTERNAL:SASL_PLAINTEXT")
    out = proc.stdout + proc.stderr
    assert PASSWORD not in out and CONTROLLER_PASSWORD not in out
    assert "storedKey" not in out and "Formatting metadata directory" in out
    health = tmp_path / "config" / "harness-client.properties"
    assert stat.S_IMODE(health.stat().st_mode) == 0o600
    assert health.read_text() == ("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=SCRAM-SHA-512\nsasl.jaas.config="
                                  + kafka_auth.scram_settings(1, 2, PASSWORD, CONTROLLER_PASSWORD, "h")[
                                      "listener.name.sasl_plaintext.scram-sha-512.sasl.jaas.config"] + "\n")


@pytest.mark.parametrize("secrets, said", [
    ({"harness-kafka-password": PASSWORD}, "no readable secret"),
    ({"harness-kafka-password": 'x" user_evil="x0123456789', "harness-kafka-controller-password": CONTROLLER_PASSWORD},
     "not a password the harness wrote"),
], ids=["missing", "forged"])
def test_a_missing_or_forged_secret_stops_the_container_in_one_line(tmp_path, secrets, said):
    proc = _bash("main", tmp_path, secrets=secrets)
    assert proc.returncode == 1 and not (tmp_path / "started.env").exists()
    assert proc.stderr.strip().count("\n") == 0 and said in proc.stderr, proc.stderr
    assert not (tmp_path / "java.argv").exists(), "formatted with a secret it did not check"


def test_a_failed_format_says_why_without_the_password(tmp_path):
    proc = _bash("main", tmp_path, env={"CLUSTER_ID": ""})
    assert proc.returncode == 1 and "CLUSTER_ID is not set" in proc.stderr
    (tmp_path / "bin").mkdir(exist_ok=True)
    (tmp_path / "bin" / "java").write_text(f"#!/bin/bash\necho 'bad config with password {PASSWORD}'\nexit 1\n")
    proc = subprocess.run(["bash", "-c", f"source {SCRIPT}\nformat {PASSWORD}"], capture_output=True, text=True,
                          env={"PATH": f"{tmp_path / 'bin'}:{os.environ['PATH']}", "CLUSTER_ID": "x"}, timeout=60)
    assert proc.returncode == 1 and "bad config with password ***" in proc.stderr and PASSWORD not in proc.stderr


# --- the harness's side: which auth, recorded where, handed over how ---------------------------------------------

def test_a_new_compose_stack_has_scram_unless_asked_and_keeps_what_its_volumes_were_made_with(tmp_path):
    assert compose_auth.choose(tmp_path, None, volumes=False) == compose_auth.DEFAULT_AUTH == "scram"
    assert compose_auth.choose(tmp_path, "none", volumes=False) == "none"
    # volumes an older harness made have no record: plaintext, and stay so
    assert compose_auth.choose(tmp_path, None, volumes=True) == "none"
    with pytest.raises(HarnessError, match="set up with --auth none.*harness down --purge"):
        compose_auth.choose(tmp_path, "scram", volumes=True)
    compose_auth.record(tmp_path, "scram")
    assert stat.S_IMODE((tmp_path / compose_auth.AUTH_FILE).stat().st_mode) == 0o600
    with pytest.raises(HarnessError, match="password of the harness's own .* is gone"):
        compose_auth.choose(tmp_path, None, volumes=True)
    kafka_auth.client_password(tmp_path)
    assert compose_auth.choose(tmp_path, None, volumes=True) == "scram"
    with pytest.raises(HarnessError, match="set up with --auth scram"):
        compose_auth.choose(tmp_path, "none", volumes=True)
    with pytest.raises(HarnessError, match="unknown --auth"):
        compose_auth.choose(tmp_path, "plain", volumes=False)


def test_up_hands_docker_compose_the_passwords_of_the_private_files_and_down_none(tmp_path, monkeypatch):
    monkeypatch.setattr(compose, "state_dir", lambda: tmp_path)
    monkeypatch.delenv("HARNESS_PG_PASSWORD", raising=False)
    env = compose._env(tmp_path, auth="scram")
    client = kafka_auth.client_password(tmp_path)
    assert env[compose_auth.PASSWORD_ENV] == client
    assert env[compose_auth.CONTROLLER_PASSWORD_ENV] == kafka_auth.controller_password(tmp_path) != client
    for name in (kafka_auth.CLIENT_FILE, kafka_auth.CONTROLLER_FILE):
        assert stat.S_IMODE((tmp_path / name).stat().st_mode) == 0o600
    assert compose_auth.PASSWORD_ENV not in compose._env(tmp_path)
    assert compose._files("cluster", True, "scram")[-2:] == ["-f", str(compose_auth.OVERRIDES["cluster"])]
    assert compose._files("single", False) == ["-f", str(compose.FILES["single"])]
    monkeypatch.setattr(compose, "proxy_container", lambda: False)
    assert str(compose_auth.OVERRIDES["single"]) not in compose._down_command("single", True)


def test_the_stack_logs_in_with_the_recorded_auth(tmp_path, monkeypatch):
    from harness.clients import kafka_client
    monkeypatch.setattr(compose, "state_dir", lambda: tmp_path)
    monkeypatch.setenv("HARNESS_PG_PASSWORD", "pg-password-for-the-test")
    monkeypatch.setenv(kafka_client.ENV, "{}")
    (tmp_path / "stack.json").write_text('{"kind": "compose", "variant": "single", "auth": "scram"}')
    pw = kafka_auth.client_password(tmp_path)
    st = compose._stack(tmp_path)
    assert st.kafka_auth == "SASL_PLAINTEXT SCRAM-SHA-512 as harness" and st.kafka_config["sasl.password"] == pw
    from harness.stack.local_record import client_properties_file
    assert client_properties_file(tmp_path) == tmp_path / kafka_auth.CLIENT_FILE      # `harness env`, `up`
    (tmp_path / "stack.json").write_text('{"kind": "compose", "variant": "single", "auth": "none"}')
    kafka_client.forget(f"127.0.0.1:{compose.KAFKA_PORT}")
    assert compose._stack(tmp_path).kafka_auth == "PLAINTEXT"


def test_purge_takes_the_passwords_unless_a_local_stacks_data_uses_them(tmp_path):
    from harness.stack.local_kafka import LocalKafka
    assert set(compose_auth.purged_files(tmp_path)) == {tmp_path / n for n in (
        compose_auth.AUTH_FILE, kafka_auth.CLIENT_FILE, kafka_auth.CONTROLLER_FILE, "shell-client.properties")}
    node = LocalKafka(tmp_path)
    node.data.mkdir(parents=True)
    (node.data / "meta.properties").write_text("cluster.id=x\n")
    assert compose_auth.purged_files(tmp_path) == [tmp_path / compose_auth.AUTH_FILE]
