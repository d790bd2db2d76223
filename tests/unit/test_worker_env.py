"""A run's workers inherit no other login than the run's: the harness's own libpq user and password file
(put there by `eval "$(harness env)"`) and its Kafka login file are left out; restricting settings stay."""

import json
from types import SimpleNamespace

from harness.clients import kafka_client
from harness.experiments.launch import worker_env


def test_a_shell_of_harness_env_lends_the_workers_none_of_its_logins(monkeypatch):
    shell = {"PGHOST": "127.0.0.1", "PGPORT": "5999", "PGUSER": "harness", "PGDATABASE": "harness",
             "PGPASSFILE": "/state/pgpass", "PGPASSWORD": "hunter2", "HARNESS_KAFKA_CONFIG_FILE": "/state/client.properties",
             "HARNESS_HOME": "/state", "HARNESS_POSTGRES_DSN": "host=127.0.0.1 user=harness",
             "PGREQUIREAUTH": "scram-sha-256", "PGCHANNELBINDING": "prefer", "PATH": "/usr/bin"}
    for k, v in shell.items():
        monkeypatch.setenv(k, v)
    run = SimpleNamespace(stack=SimpleNamespace(bootstrap_servers="127.0.0.1:9092"),
                          kafka_login={"sasl.username": "harness_run_x"})
    env = worker_env(run)
    for gone in ("PGUSER", "PGDATABASE", "PGPASSFILE", "PGPASSWORD", "HARNESS_KAFKA_CONFIG_FILE", "HARNESS_HOME",
                 "HARNESS_POSTGRES_DSN"):
        assert gone not in env, gone
    assert env["PGREQUIREAUTH"] == "scram-sha-256" and env["PGCHANNELBINDING"] == "prefer"
    assert env["PATH"] == "/usr/bin" and env["PGHOST"] == "127.0.0.1"
    assert json.loads(env[kafka_client.ENV]) == {"127.0.0.1:9092": {"sasl.username": "harness_run_x"}}
