"""What a run's Kafka user is allowed (workload.run_kafka_user), on hand-made names: its own and nothing else."""

from types import SimpleNamespace

from harness.workload import run_kafka_user, run_role
from harness.workload.naming import RunNames


def test_a_runs_user_is_allowed_only_its_own_names_and_never_to_write_its_input():
    names = RunNames("20261207T000000.000-offset-after-abc123")
    other = RunNames("20261207T000000.000-offset-after-abc124")
    allows = run_kafka_user.allows(names)
    own = {names.input_topic, names.output_topic, names.events_topic, names.group, names.downstream_group,
           names.share_group, f"harness-{names.run_id}-", "kafka-cluster"}
    assert {a.name for a in allows} <= own
    assert not any(a.name in (other.input_topic, other.group) or "*" in a.name or a.name == "" for a in allows)
    on_input = {a.operation for a in allows if a.kind == "TOPIC" and a.name == names.input_topic}
    assert on_input == {"READ", "DESCRIBE"}, "a consumer may not write its own input (the harness produces it)"
    assert {a.operation for a in allows if a.kind == "TOPIC" and a.name == names.output_topic} == {"WRITE", "DESCRIBE"}
    assert [a for a in allows if a.kind == "BROKER"] == [run_kafka_user.Allow("BROKER", "kafka-cluster",
                                                                                "IDEMPOTENT_WRITE")]
    assert all(a.prefixed == (a.name == f"harness-{names.run_id}-") for a in allows)


def test_the_user_is_named_as_the_runs_database_role_and_made_only_on_the_harnesss_scram_stack():
    run_id = "20261207T000000.000-" + "x" * 80
    assert run_kafka_user.user_name(run_id) == run_role.role_name(run_id)
    scram = {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "SCRAM-SHA-512", "sasl.username": "harness"}
    assert run_kafka_user.can_make_users(SimpleNamespace(owned=True, kafka_config=scram))
    assert not run_kafka_user.can_make_users(SimpleNamespace(owned=False, kafka_config=scram)), "an external cluster"
    assert not run_kafka_user.can_make_users(SimpleNamespace(owned=True, kafka_config={})), "a plaintext stack"
    fallback = run_kafka_user.create(SimpleNamespace(owned=True, kafka_config={}, bootstrap_servers="h:1"), run_id)
    assert fallback.user is None and "no user of its own" in fallback.said


def test_a_ctrl_c_while_the_user_is_being_made_retires_it(monkeypatch):
    """Only an error ended a half-made user: a Ctrl-C (or SIGTERM) during its ACLs or its wait left the user
    and its ACLs on the broker, though the report promises they go with the run."""
    import pytest
    from harness.workload import kafka_users
    removed = []

    def interrupted(*a, **k):
        raise KeyboardInterrupt
    monkeypatch.setattr(run_kafka_user, "can_make_users", lambda stack: True)
    monkeypatch.setattr(run_kafka_user.kafka_client, "settings_for", lambda b: {"sasl.username": "harness"})
    monkeypatch.setattr(kafka_users, "make", interrupted)
    monkeypatch.setattr(kafka_users, "retire", lambda bootstrap, user: removed.append(user))
    stack = SimpleNamespace(bootstrap_servers="127.0.0.1:1", owned=True, kafka_config={})
    with pytest.raises(KeyboardInterrupt):
        run_kafka_user.create(stack, "20261207T100000.000-eos-abcdef")
    assert removed == [run_kafka_user.user_name("20261207T100000.000-eos-abcdef")]


def test_a_retired_user_is_told_apart_by_its_iteration_count_alone():
    """A retired user is one whose every credential carries the retirement mark: a live user of ours (4096),
    a user someone made with other counts, or one with no credential at all is not."""
    from confluent_kafka.admin import ScramCredentialInfo, ScramMechanism, UserScramCredentialsDescription
    from harness.workload import kafka_users

    def described(*counts):
        return UserScramCredentialsDescription("u", [ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, n)
                                                     for n in counts])
    assert kafka_users.RETIRED_ITERATIONS != kafka_users.ITERATIONS
    assert 4096 <= kafka_users.RETIRED_ITERATIONS <= 16384, "Kafka refuses counts outside 4096..16384"
    assert kafka_users.is_retired(described(kafka_users.RETIRED_ITERATIONS))
    assert not kafka_users.is_retired(described(kafka_users.ITERATIONS))
    assert not kafka_users.is_retired(described(kafka_users.RETIRED_ITERATIONS, 8192))
    assert not kafka_users.is_retired(described())


def test_no_harness_module_deletes_a_scram_credential():
    """A credential deletion is the record that makes a restarted Kafka node lose every SCRAM user
    (stack/kafka_auth.py); the harness retires users instead (kafka_users.retire), so none of its modules may
    ask for one."""
    from pathlib import Path
    root = Path(__file__).resolve().parents[2] / "harness"
    asking = [str(f.relative_to(root)) for f in root.rglob("*.py") if "UserScramCredentialDeletion" in f.read_text()]
    assert asking == []
