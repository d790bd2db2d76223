"""Who may do what on the default local stack's Kafka, on the real broker (issue 53, item 1, the Kafka half).

The default stack has SCRAM and an authorizer. A client with no login cannot write into a running run's
input topic (before, another local user wrote one record there and turned a correct consumer's run
`unexpected`); each run's consumers log in as a user of that run, which may not write another run's input
nor use another run's group, and which loses its ACLs and is retired (it can never log in again, and is
never deleted: workload/kafka_users.py says why) once the run has ended; the shell of
`harness env` has a user that reads and never writes.
"""

import json
import threading
import time

import pytest
from confluent_kafka import KafkaError, Producer
from confluent_kafka.admin import (AclBindingFilter, AclOperation, AclPermissionType, AdminClient,
                                   ResourcePatternType, ResourceType)

from harness.clients.kafka_client import load_file
from tests import kafka_login
from tests.conftest import harness
from tests.integration.test_custom import python_example, run_custom
from tests.integration.test_run_roles import probed_run

pytestmark = pytest.mark.integration


def _produce_once(bootstrap: str, settings: dict, topic: str, wait_s: float = 8.0):
    """One record from a producer with `settings`: its delivery error, or None when it was written."""
    got = []
    p = Producer({**settings, "bootstrap.servers": bootstrap, "message.timeout.ms": int(wait_s * 1000),
                  "acks": "all", "enable.idempotence": False, "log_level": 0})
    p.produce(topic, key=b"forged", value=b'{"id": "forged", "amount": 1}', on_delivery=lambda e, m: got.append(e))
    p.flush(wait_s + 20)
    assert got, "no delivery report"
    return got[0]


def _new_input_topic(bootstrap: str, before: set, within_s: float = 120) -> str:
    admin = AdminClient(kafka_login.config(bootstrap))
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        new = [t for t in admin.list_topics(timeout=10).topics if t.endswith(".input") and t not in before]
        if new:
            return new[0]
        time.sleep(0.2)
    raise AssertionError("no run's input topic appeared")


def _broker_setting(bootstrap: str, name: str) -> str:
    """The value of a broker setting on the stack's node, as the harness's login sees it."""
    from confluent_kafka.admin import ConfigResource
    admin = AdminClient(kafka_login.config(bootstrap))
    node = ConfigResource(ConfigResource.Type.BROKER, str(next(iter(admin.list_topics(timeout=10).brokers))))
    return admin.describe_configs([node])[node].result(timeout=30)[name].value


def test_a_client_without_a_login_cannot_write_into_a_running_runs_input(stack, stack_home, tmp_path, local_user):
    """Cases 7 and 8 of issue 53: besides a client of this test, another local user the test makes, with nothing
    but the system's python3 (tests/raw_kafka_produce.py), can neither produce into a running run's input topic
    nor change every broker's default setting through the controller listener (Kafka's own admin client does
    that with `bootstrap.controllers`); on an `--auth none` stack both go through."""
    from tests.conftest import ROOT, as_user
    raw = ["/usr/bin/python3", str(ROOT / "tests" / "raw_kafka_produce.py")]
    boot = stack["bootstrap_servers"]
    controller = f"127.0.0.1:{json.loads((stack_home / 'stack.json').read_text())['controller_port']}"
    before = set(AdminClient(kafka_login.config(boot)).list_topics(timeout=10).topics)
    out, done = tmp_path / "run", {}
    t = threading.Thread(target=lambda: done.update(proc=harness(
        "run", "offset-after", "--messages", "2000", "--quiet", "--out", str(out), env=stack["env"], timeout=600)))
    t.start()
    try:
        topic = _new_input_topic(boot, before)
        err = _produce_once(boot, {}, topic)         # a plaintext client, as any local user's
        stranger = as_user(local_user, *raw, boot, topic, "forged", '{"id": "forged", "amount": 1}')
        altered = as_user(local_user, *raw, "--alter-broker-default", controller, "log.cleaner.threads", "3")
    finally:
        t.join()
    assert err is not None, "a client without a login wrote into the run's input topic"
    assert stranger.returncode != 0 and "closed the connection" in stranger.stderr, \
        f"another local user wrote into the run's input topic: {stranger.stdout}"
    assert altered.returncode != 0 and "closed the connection" in altered.stderr, \
        f"another local user changed a broker setting through the controller listener: {altered.stdout}"
    assert _broker_setting(boot, "log.cleaner.threads") != "3"
    assert done["proc"].returncode == 0, done["proc"].stderr[-3000:]
    d = json.loads((out / "report.json").read_text())
    assert d["verdict"] == "as-predicted" and d["stack"]["input_topic"] == topic
    assert d["stack"]["kafka_auth"].startswith("SASL_PLAINTEXT SCRAM-SHA-512")


# Tries what no run's consumer may do with the login it was handed, writes what happened (a line of JSON per
# attempt), then becomes the correct example consumer.
PROBE = r'''
import json, os, sys
from confluent_kafka import ConsumerGroupTopicPartitions, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient
env = os.environ
login = json.loads(env.get("HARNESS_KAFKA_CONFIG") or "{}")
boot = env["HARNESS_BOOTSTRAP_SERVERS"]
seen = {"user": login.get("sasl.username"), "super_user_in_env": "HARNESS_KAFKA_CLIENT_SETTINGS" in env and
        '"harness"' in env["HARNESS_KAFKA_CLIENT_SETTINGS"]}
got = []
p = Producer({**login, "bootstrap.servers": boot, "message.timeout.ms": 8000, "enable.idempotence": False})
p.produce(env["TEST_OTHER_TOPIC"], key=b"forged", value=b"{}", on_delivery=lambda e, m: got.append(e))
p.flush(30)
seen["write_other_input"] = got[0].name() if got and got[0] is not None else "done"
admin = AdminClient({**login, "bootstrap.servers": boot})
group, topic = env["TEST_OTHER_GROUP"], env["TEST_OTHER_TOPIC"]
for name, call, part in (("read_other_group", admin.list_consumer_group_offsets, TopicPartition(topic, 0)),
                         ("commit_in_other_group", admin.alter_consumer_group_offsets, TopicPartition(topic, 0, 1))):
    try:
        call([ConsumerGroupTopicPartitions(group, [part])])[group].result(timeout=30)
        seen[name] = "done"
    except KafkaException as e:
        seen[name] = e.args[0].name()
with open(env["TEST_PROBE_OUT"], "a") as f:
    f.write(json.dumps(seen) + "\n")
os.execv(sys.executable, [sys.executable, sys.argv[1]])
'''


def _acls_of(admin, user: str) -> list:
    return admin.describe_acls(AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY, f"User:{user}",
                                                None, AclOperation.ANY, AclPermissionType.ANY)).result(timeout=30)


def test_a_runs_consumer_may_not_write_another_runs_input_nor_use_its_group_and_its_user_goes(stack, tmp_path):
    other, d, attempts = probed_run(stack, tmp_path, PROBE, lambda other: {
        "TEST_OTHER_TOPIC": other["stack"]["input_topic"], "TEST_OTHER_GROUP": other["stack"]["consumer_group"]})
    user = attempts[0]["user"]
    assert user and user.startswith("harness_run_") and user != "harness", attempts
    for a in attempts:
        assert a["user"] == user and not a["super_user_in_env"], a
        assert a["write_other_input"] == "TOPIC_AUTHORIZATION_FAILED", a
        assert a["read_other_group"] == a["commit_in_other_group"] == "GROUP_AUTHORIZATION_FAILED", a
    assert d["stack"]["consumers_kafka_user"].startswith(user + " ")
    # After the run: its ACLs are gone and the user is retired, not deleted (the harness's own user stays).
    from harness.workload import kafka_users
    admin = AdminClient(kafka_login.config(stack["bootstrap_servers"]))
    assert user in kafka_users.retired(stack["bootstrap_servers"]), "the run's user was not retired"
    assert "harness" in kafka_users.users(stack["bootstrap_servers"])
    assert user not in kafka_users.users(stack["bootstrap_servers"])
    assert _acls_of(admin, user) == []
    # The other run is untouched: nothing was written into its input, and it audits as before.
    again = harness("audit", str(tmp_path / "other" / "report"), env=stack["env"], timeout=300)
    assert again.returncode == 0, again.stdout + again.stderr


def test_harness_envs_user_reads_but_cannot_write(stack, tmp_path):
    done = run_custom(stack, tmp_path / "run", python_example("correct.py"), "--kills", "0", "--messages", "20")
    proc = harness("env", "--json", env=stack["env"], check=True)
    values = json.loads(proc.stdout)
    settings = load_file(values["HARNESS_KAFKA_CONFIG_FILE"])
    assert settings["sasl.username"] == "harness_shell"
    assert settings["sasl.password"] not in proc.stdout + proc.stderr
    boot, topic = values["HARNESS_BOOTSTRAP_SERVERS"], done["stack"]["input_topic"]
    md = AdminClient({**settings, "bootstrap.servers": boot}).list_topics(topic, timeout=15)
    assert md.topics[topic].error is None, "the shell's user cannot even see the topic"
    err = _produce_once(boot, settings, topic)
    assert err is not None and err.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED, err
    # A `harness` command in that shell still logs in as the harness (the file is not taken as its settings).
    st = harness("status", "--json", env={**stack["env"], "HARNESS_KAFKA_CONFIG_FILE": values[
        "HARNESS_KAFKA_CONFIG_FILE"]}, check=True)
    assert json.loads(st.stdout)["kafka_auth"] == "SASL_PLAINTEXT SCRAM-SHA-512 as harness"


def test_clean_all_retires_the_kafka_users_of_runs_not_live_and_keeps_a_live_runs_and_strangers(stack):
    """A killed harness leaves its run's user and ACLs behind: `harness clean --all` takes the ACLs away and
    retires the user, never a live run's nor a user the harness did not make; a second `clean --all` knows
    the retired user for what it is (not one the harness did not make) and leaves it."""
    import uuid
    from harness.workload import kafka_users, registry, run_kafka_user
    from harness.workload.naming import RunNames
    boot = stack["bootstrap_servers"]
    admin = AdminClient(kafka_login.config(boot))
    live, orphan = (f"20261207T000000.000-probe-{uuid.uuid4().hex[:6]}" for _ in range(2))
    stranger = f"stranger_{uuid.uuid4().hex[:6]}"
    # named like a run's user, but made by someone else (no ACL on a run's own prefix): `clean --all` took it
    impostor = run_kafka_user.user_name(f"20261207T000000.000-probe-{uuid.uuid4().hex[:6]}")
    users = {r: run_kafka_user.user_name(r) for r in (live, orphan)}
    registry.register(stack["dsn"], live)              # this process: a live run
    try:
        for r, user in users.items():
            kafka_users.make(boot, user, kafka_users.new_password(), run_kafka_user.allows(RunNames(r)))
        kafka_users.make(boot, stranger, kafka_users.new_password(), [])
        kafka_users.make(boot, impostor, kafka_users.new_password(), [])
        cleaned = harness("clean", "--all", env=stack["env"], timeout=180)
        assert cleaned.returncode == 0, cleaned.stdout + cleaned.stderr
        left = kafka_users.users(boot)          # those that can log in
        assert users[orphan] in kafka_users.retired(boot) and _acls_of(admin, users[orphan]) == []
        assert users[orphan] not in left
        assert users[live] in left and _acls_of(admin, users[live]), "a live run's user was removed"
        assert stranger in left, "a user the harness did not make was removed"
        assert impostor in left, "a user named like a run's that the harness did not make was removed"
        assert f"kept {impostor}: a Kafka user named like a run's that the harness did not make" in \
            cleaned.stdout + cleaned.stderr
        again = harness("clean", "--all", env=stack["env"], timeout=180)
        assert again.returncode == 0 and users[orphan] not in again.stdout + again.stderr, again.stdout
    finally:
        for user in (*users.values(), stranger, impostor):
            kafka_users.retire(boot, user)
        registry.forget(stack["dsn"], [live])
