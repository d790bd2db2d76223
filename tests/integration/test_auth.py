"""A SASL/SCRAM stack (`harness up --auth scram`): a run with its client.properties, and a wrong password.

One stack for the module, in its own state folder: the only listener clients
can use is SASL_PLAINTEXT with SCRAM-SHA-512, so a run that finishes proves
that every Kafka client of the run (admin, producer, workers, auditors) got
the credentials. No password may reach any output, report or command line.
"""

import json
import stat
import threading
from pathlib import Path

import pytest

from tests.conftest import harness, own_stack, pids_where

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def scram_stack():
    with own_stack("harness-test-scram-", "--auth", "scram") as (st, env, up):
        home = Path(env["HARNESS_HOME"])
        from harness.stack.local_postgres import LocalPostgres
        st["dsn"] = LocalPostgres(home).dsn(json.loads((home / "stack.json").read_text())["postgres_port"])
        st.update(home=home, env=env, up=up)
        st["props"] = home / "client.properties"
        st["password"] = [line.split("=", 1)[1] for line in st["props"].read_text().splitlines()
                          if line.startswith("sasl.password=")][0]
        yield st


def test_up_writes_a_private_client_properties_and_status_names_the_auth(scram_stack):
    props = scram_stack["props"]
    assert stat.S_IMODE(props.stat().st_mode) == 0o600
    assert scram_stack["kafka_auth"] == "SASL_PLAINTEXT SCRAM-SHA-512 as harness"
    assert scram_stack["kafka_config"]["sasl.password"] == "***"
    text = harness("status", env=scram_stack["env"]).stdout
    assert "kafka auth:        SASL_PLAINTEXT SCRAM-SHA-512 as harness" in text
    from harness.cli.commands.up import NO_AUTH
    assert NO_AUTH not in scram_stack["up"].stdout + scram_stack["up"].stderr
    pw = scram_stack["password"]
    assert pw not in text + scram_stack["up"].stdout + scram_stack["up"].stderr
    assert pw not in json.dumps({k: v for k, v in scram_stack.items() if k in ("kafka_config", "notes")})


def test_dedupe_runs_with_the_settings_file_and_no_secret_leaks(scram_stack, tmp_path):
    pw, out = scram_stack["password"], tmp_path / "run"
    seen_in_argv = []
    stop = threading.Event()

    def watch():   # every process's command line, sampled while the run goes
        while not stop.is_set():
            seen_in_argv.extend(pids_where(lambda cmd: pw in cmd))
            stop.wait(0.2)

    t = threading.Thread(target=watch, daemon=True)
    t.start()
    try:
        proc = harness("run", "dedupe", "--messages", "40", "--quiet", "--out", str(out),
                       "--bootstrap-servers", scram_stack["bootstrap_servers"], "--postgres-dsn", scram_stack["dsn"],
                       "--kafka-config-file", str(scram_stack["props"]), env=scram_stack["env"], timeout=600)
    finally:
        stop.set()
        t.join()
    assert proc.returncode == 0, proc.stdout + proc.stderr
    report = json.loads((out / "report.json").read_text())
    assert report["verdict"] == "as-predicted"
    assert report["stack"]["kafka_auth"] == "SASL_PLAINTEXT SCRAM-SHA-512 as harness"
    assert not seen_in_argv, "the SCRAM password was on a command line"
    assert pw not in proc.stdout + proc.stderr
    for f in out.rglob("*"):
        if f.is_file():
            assert pw not in f.read_text(errors="replace"), f"the SCRAM password is in {f}"


def test_wrong_password_is_one_line_exit_2_without_the_secret(scram_stack):
    wrong = "Wrong-Pass-8c1f"
    proc = harness("run", "dedupe", "--messages", "10", "--quiet",
                   "--bootstrap-servers", scram_stack["bootstrap_servers"], "--postgres-dsn", scram_stack["dsn"],
                   "--kafka-config-file", str(scram_stack["props"]), "--kafka-config", f"sasl.password={wrong}",
                   env=scram_stack["env"], timeout=120)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "Traceback" not in proc.stderr, lines
    assert "refused the client settings" in lines[0] and "SASL authentication" in lines[0]
    assert wrong not in proc.stderr + proc.stdout and scram_stack["password"] not in proc.stderr + proc.stdout


def test_local_runs_on_the_scram_stack_use_its_file_by_themselves(scram_stack, tmp_path):
    """No settings given: the harness finds the stack's client.properties (offset-after, few messages)."""
    out = tmp_path / "run"
    proc = harness("run", "offset-after", "--messages", "30", "--quiet", "--out", str(out),
                   env=scram_stack["env"], timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert json.loads((out / "report.json").read_text())["stack"]["kind"] == "local"


def _config_command(stack, folder, settings: dict, *args):
    """Kafka's own kafka-configs (ConfigCommand) against the controller listener (`--bootstrap-controller`),
    with `settings` in a 0600 --command-config file: the cluster-wide broker defaults."""
    import os
    import subprocess
    from harness.stack import maven
    lib = maven.resolved_tools()
    assert lib is not None, "`harness up` resolves Kafka's command-line tools"
    f = folder / "admin.properties"
    fd = os.open(f, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with open(fd, "w") as out:
        out.write("".join(f"{k}={v}\n" for k, v in settings.items()))
    controller = json.loads((stack["home"] / "stack.json").read_text())["controller_port"]
    return subprocess.run(["java", "-Xmx128m", "-XX:TieredStopAtLevel=1", "-cp", f"{lib}/*",
                           "org.apache.kafka.tools.ConfigCommand", "--bootstrap-controller", f"127.0.0.1:{controller}",
                           "--command-config", str(f), "--entity-type", "brokers", "--entity-default", *args],
                          capture_output=True, text=True, timeout=300)


@pytest.mark.slow          # 36 s; the default run keeps test_kafka_users' local user refused at the controller listener
def test_the_controller_listener_refuses_a_client_without_the_controller_password(scram_stack, tmp_path):
    """Case 8 of issue 53: anyone on the machine could change a cluster-wide broker setting through the
    controller listener with `bootstrap.controllers`; now it takes the controller user's PLAIN login."""
    quick = {"request.timeout.ms": "10000", "default.api.timeout.ms": "15000"}
    anon = _config_command(scram_stack, tmp_path, quick, "--alter", "--add-config", "log.cleaner.threads=3")
    assert anon.returncode != 0, anon.stdout + anon.stderr
    pw = [line.split("=", 1)[1] for line in (scram_stack["home"] / "kafka-controller.properties").read_text()
          .splitlines() if line.startswith("password=")][0]
    assert stat.S_IMODE((scram_stack["home"] / "kafka-controller.properties").stat().st_mode) == 0o600
    login = {**quick, "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
             "sasl.jaas.config": 'org.apache.kafka.common.security.plain.PlainLoginModule required '
                                 f'username="controller" password="{pw}";'}
    described = _config_command(scram_stack, tmp_path, login, "--describe")
    assert described.returncode == 0, described.stdout + described.stderr
    assert "log.cleaner.threads=3" not in described.stdout, "the unauthenticated change went through"
    # The same tool with the controller's login changes it: the refusal above is the listener's.
    changed = _config_command(scram_stack, tmp_path, login, "--alter", "--add-config", "log.cleaner.threads=2")
    assert changed.returncode == 0, changed.stdout + changed.stderr
    assert "log.cleaner.threads=2" in _config_command(scram_stack, tmp_path, login, "--describe").stdout
    _config_command(scram_stack, tmp_path, login, "--alter", "--delete-config", "log.cleaner.threads")


def _stranger_produces(bootstrap: str, login: dict, topic: str):
    """One record from a producer logged in with `login`: its delivery error, or None when it was written."""
    from confluent_kafka import Producer
    got = []
    p = Producer({"bootstrap.servers": bootstrap, **login, "message.timeout.ms": 20000, "acks": "all",
                  "enable.idempotence": False})
    p.produce(topic, b"from a stranger", on_delivery=lambda err, msg: got.append(err))
    p.flush(60)
    assert got, "no delivery report within 60 s"
    return got[0]


def test_the_authorizer_lets_a_user_without_an_acl_write_nothing(scram_stack):
    """Issue 53 item 1, Kafka half: a SCRAM user that is not the harness's own (a super user) may write into a
    topic only once an ACL grants it; before, any user who could log in could write into any run's topics."""
    import secrets
    import time
    import uuid
    from confluent_kafka import KafkaError
    from confluent_kafka.admin import (AclBinding, AclOperation, AclPermissionType, AdminClient,
                                       NewTopic, ResourcePatternType, ResourceType, ScramCredentialInfo,
                                       ScramMechanism, UserScramCredentialUpsertion)
    from harness.clients.kafka_client import load_file
    from harness.workload import kafka_users
    from tests import kafka_login
    kafka_login.settings(scram_stack["bootstrap_servers"])      # kafka_users logs in as the harness
    bootstrap = scram_stack["bootstrap_servers"]
    admin = AdminClient({"bootstrap.servers": bootstrap, **load_file(scram_stack["props"])})
    topic, user, pw = f"authz-{uuid.uuid4().hex[:8]}", f"stranger-{uuid.uuid4().hex[:8]}", secrets.token_urlsafe(18)
    login = {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "SCRAM-SHA-512", "sasl.username": user,
             "sasl.password": pw}
    grant = AclBinding(ResourceType.TOPIC, topic, ResourcePatternType.LITERAL, f"User:{user}", "*",
                       AclOperation.WRITE, AclPermissionType.ALLOW)
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(60)
    admin.alter_user_scram_credentials([UserScramCredentialUpsertion(
        user, ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096), pw.encode())])[user].result(60)
    try:
        deadline = time.monotonic() + 60        # the new credentials reach the broker's cache a moment later
        while (err := _stranger_produces(bootstrap, login, topic)) is not None and \
                err.code() != KafkaError.TOPIC_AUTHORIZATION_FAILED and time.monotonic() < deadline:
            time.sleep(1)
        assert err is not None and err.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED, err
        admin.create_acls([grant])[grant].result(60)
        deadline = time.monotonic() + 60        # and so does the ACL
        while (err := _stranger_produces(bootstrap, login, topic)) is not None and time.monotonic() < deadline:
            time.sleep(1)
        assert err is None, f"the ACL did not let the user write: {err}"
    finally:
        kafka_users.retire(bootstrap, user)          # its ACLs go; never deleted: see kafka_users.retire
        admin.delete_topics([topic])


# Slow: a cluster of its own. Since SCRAM became the default, test_cluster's broker-kill runs and test_latency's
# proxied cluster run on SCRAM nodes in the default test run; this keeps the explicit `--auth scram --proxies` case.
@pytest.mark.slow
def test_a_three_node_scram_cluster_runs_through_a_broker_kill(tmp_path):
    """`--auth scram` was refused with `--brokers 3` and with `--proxies`. Now every node has the SASL listeners
    (the one its Toxiproxy proxy forwards to as well) and the authorizer, and a node a broker-kill fault restarts
    comes back with them (a plaintext restart would never rejoin)."""
    from harness.clients.kafka_client import parse_properties
    from harness.stack.local_kafka import LocalKafka
    from tests.integration.test_cluster import local_cluster, run_exp
    with local_cluster("harness-scram-cluster-", "--auth", "scram", "--proxies") as c:
        assert c["status"]["kafka_auth"] == "SASL_PLAINTEXT SCRAM-SHA-512 as harness"
        rec = json.loads((c["home"] / "stack.json").read_text())
        assert c["status"]["bootstrap_servers"] == ",".join(f"127.0.0.1:{rec[f'proxy-{n}_port']}" for n in (1, 2, 3))
        d = run_exp(c, tmp_path, "eos-dedupe", "--messages", "100",
                    "--fault", "broker-kill:count=1,every=1,down=2")
        assert (d["counts"]["duplicates"], d["counts"]["lost"]) == (0, 0)
        assert [f for f in d["faults"] if f["fault"] == "broker-kill"], "no broker was killed"
        for n in (1, 2, 3):
            props = parse_properties(LocalKafka(c["home"], n).props.read_text())
            assert props["listeners"].startswith("SASL_PLAINTEXT://") and "PROXIED:SASL_PLAINTEXT" in \
                props["listener.security.protocol.map"] and props["allow.everyone.if.no.acl.found"] == "false", \
                f"node {n}: {props['listeners']}"


def test_a_custom_consumer_gets_the_clusters_login_in_its_environment(scram_stack, tmp_path):
    """A --worker-cmd consumer had only HARNESS_BOOTSTRAP_SERVERS: on a cluster that wants a login it could not
    connect and the run ran out its time. HARNESS_KAFKA_CONFIG now holds the settings (the example reads it);
    the password stays out of the report and of every command line."""
    import sys
    from tests.conftest import ROOT
    out = tmp_path / "run"
    cmd = f"{sys.executable} {ROOT / 'examples' / 'consumers' / 'python' / 'correct.py'}"
    proc = harness("run", "custom", "--worker-cmd", cmd, "--messages", "30", "--time-limit", "180", "--quiet",
                   "--out", str(out), env=scram_stack["env"], timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr[-3000:]
    assert json.loads((out / "report.json").read_text())["verdict"] == "as-predicted"
    for f in out.rglob("*"):
        if f.is_file():
            assert scram_stack["password"] not in f.read_text(errors="replace"), f"the SCRAM password is in {f}"


def _walked_before_harness(name: str) -> bool:
    """Does a Java HashMap of at most 128 buckets walk `name` before `harness`? (bucket 0: the low 7 bits of
    String.hashCode ^ its upper half are 0; `harness` is in bucket 8 of 16, 56 of 64)."""
    from harness.stack.brokers import java_string_hash
    h = java_string_hash(name) & 0xFFFFFFFF
    return (h ^ (h >> 16)) & 127 == 0


def _run_ids_walked_first(count: int) -> list[str]:
    """`count` run ids whose Kafka user (harness_run_<slug>) a HashMap walks before `harness`."""
    from harness.workload.run_kafka_user import user_name
    found, i = [], 0
    while len(found) < count:
        run_id, i = f"20261207T000000.000-retired-{i}", i + 1
        if _walked_before_harness(user_name(run_id)):
            found.append(run_id)
    return found


def _login_error(bootstrap: str, settings: dict) -> str | None:
    """None when a client with `settings` gets the cluster's metadata, else why not (one line)."""
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AdminClient
    try:
        AdminClient({**settings, "bootstrap.servers": bootstrap, "log_level": 0}).list_topics(timeout=8)
        return None
    except KafkaException as e:
        return str(e)


# Last in the module: it restarts the module's stack.
def test_a_node_that_replays_its_log_after_runs_ended_their_users_still_lets_everyone_in(scram_stack):
    """The cause of the refused logins after a broker fault's restart and at the `up` after a run that started
    the stack alone (test_stack_ownership): a Kafka node that rebuilds its SCRAM users from its metadata log
    loses every user when the first changed user its HashMap walks was deleted (ScramDelta.apply,
    kafka_auth.py). Two runs' users that a HashMap walks first are made and ended by the harness's own path
    (run_kafka_user.let_go), the node is stopped, and the snapshots it wrote since it was formatted are taken
    away: it starts as a node stopped before its first snapshot, replaying its whole log. `up` must log in,
    and so must the harness and a new user; the ended users cannot. Before (users deleted), `up` failed with
    "invalid credentials"; now they are retired (overwritten, never deleted) and the log holds no removal."""
    from types import SimpleNamespace
    from harness.clients.kafka_client import load_file
    from harness.workload import kafka_users, run_kafka_user
    from harness.workload.naming import RunNames
    from tests import kafka_login
    home, env, bootstrap = scram_stack["home"], scram_stack["env"], scram_stack["bootstrap_servers"]
    kafka_login.settings(bootstrap)          # kafka_users logs in as the harness
    stack = SimpleNamespace(bootstrap_servers=bootstrap, owned=True, kafka_config=load_file(scram_stack["props"]))
    ended, said = {}, []
    for run_id in _run_ids_walked_first(2):
        user, pw = run_kafka_user.user_name(run_id), kafka_users.new_password()
        kafka_users.make(bootstrap, user, pw, run_kafka_user.allows(RunNames(run_id)))
        run = SimpleNamespace(kafka_user=run_kafka_user.KafkaGrant(user, "made"), stack=stack,
                              names=RunNames(run_id), log=said.append)
        run_kafka_user.let_go(run)
        assert run.kafka_user.removed and not said, said
        ended[user] = kafka_users.login(stack.kafka_config, user, pw)
    assert set(ended) <= set(kafka_users.retired(bootstrap)) and not set(ended) & set(kafka_users.users(bootstrap))
    harness("down", env=env, check=True, timeout=300)
    metadata = home / "kafka" / "data" / "__cluster_metadata-0"
    for f in metadata.glob("*.checkpoint"):
        if not f.name.startswith("0" * 20 + "-"):       # keep the one written when the node was formatted
            f.unlink()
    up = harness("up", env=env, timeout=300)
    assert up.returncode == 0, up.stdout + up.stderr
    st = json.loads(harness("status", "--json", env=env, check=True).stdout)
    assert st["healthy"], st
    again = st["bootstrap_servers"]          # the ports may have changed
    kafka_login.settings(again)
    try:
        user, login = next(iter(ended.items()))     # one is enough: each refusal waits out the client's timeout
        assert _login_error(again, login) is not None, f"the ended user {user} still logs in"
        user, pw = "after-restart-user", kafka_users.new_password()
        kafka_users.make(again, user, pw, [])       # waits until the new user is let in
        kafka_users.retire(again, user)
    finally:
        kafka_login.forget(again)
