"""--client java: the eos family's declarations hand their runs to the Java worker, whose command line
carries what the Python worker's does and no secret."""

from pathlib import Path
from types import SimpleNamespace

import pytest

from harness.experiments.eos import txn_java
from harness.experiments.eos import EOS, EOS_BOUNDARY, EOS_DEDUPE, ZOMBIE
from harness.experiments.streams_jvm import WorkerStart


@pytest.mark.parametrize("exp", [EOS, EOS_BOUNDARY, EOS_DEDUPE, ZOMBIE], ids=lambda e: e.name)
def test_client_java_is_a_variant_of_each_with_the_java_launcher_and_no_client_faults(exp):
    java = exp.resolve(SimpleNamespace(client="java"))
    assert isinstance(java.launcher, txn_java.TxnJavaWorkers) and java.client_faults == () and java.warm_up is None
    assert java.predictors == exp.predictors and java.kill_points == exp.kill_points    # judged the same way
    python = exp.resolve(SimpleNamespace(client="python"))
    assert python.launcher is None and python.client_faults == ("abort", "client-pause")


def _run(exp, **params):
    p = dict(txn_stuck_after=None, commit_every=1, transaction_timeout_ms=None, commit_interval_ms=None,
             fresh_transactional_id=False, no_history=False)
    p.update(params)
    names = SimpleNamespace(group="g", input_topic="in", output_topic="out", ledger_table="harness.l",
                            dedupe_table="harness.d", transactional_id=lambda i: f"tid-{i}")
    stack = SimpleNamespace(bootstrap_servers="127.0.0.1:9092",
                            postgres_dsn="postgresql://harness:s3cret@127.0.0.1:5432/harness")
    return SimpleNamespace(params=SimpleNamespace(**p), names=names, exp=exp, stack=stack,
                           worker_dsn="postgresql://harness_run_r1:s3cret@127.0.0.1:5432/harness",
                           crash_plan=Path("/r/plan.json"), crash_log=Path("/r/crashes.jsonl"),
                           events=Path("/r/events.jsonl"), history=Path("/r/history"))


def _flags(cmd: list[str]) -> dict:
    i = cmd.index(txn_java.MAIN_CLASS)
    args = cmd[i + 1:]
    return dict(zip(args[::2], args[1::2]))


def test_the_command_line_names_the_slot_s_partitions_and_transactional_id_and_never_the_password():
    slot = SimpleNamespace(index=1, name="w1", attempt=3)
    cmd = txn_java.command(_run(EOS_DEDUPE, fresh_transactional_id=True, txn_stuck_after=2.5), slot, [1, 3],
                           Path("/j/eos-streams.jar"), WorkerStart("java", None, None, "plain"))
    f = _flags(cmd)
    assert (f["--experiment"], f["--partitions"], f["--worker"], f["--attempt"]) == ("eos-dedupe", "1,3", "w1", "3")
    assert f["--transactional-id"] == "tid-1-attempt-3"           # --fresh-transactional-id: one per attempt
    assert (f["--ledger"], f["--dedupe"], f["--jdbc-url"], f["--jdbc-user"]) == (
        "harness.l", "harness.d", "jdbc:postgresql://127.0.0.1:5432/harness", "harness_run_r1")   # the run's role
    assert f["--txn-stuck-after-ms"] == "2500" and f["--transaction-timeout-ms"] == "60000"
    assert not any("s3cret" in a for a in cmd) and f["--history"] == "/r/history"
    plain = _flags(txn_java.command(_run(EOS, no_history=True), slot, [0], Path("/j/x.jar"), WorkerStart("java", None, None, "")))
    assert "--ledger" not in plain and "--dedupe" not in plain and "--history" not in plain and plain["--transactional-id"] == "tid-1"


def test_the_jdbc_url_keeps_the_dsn_s_certificate_check_and_quotes_the_database():
    from harness.experiments.streams_jvm import jdbc
    url, user, password = jdbc("postgresql://u:pw@db.example:6543/my%20db?sslmode=verify-full&sslrootcert=/etc/ca.pem")
    assert url == "jdbc:postgresql://db.example:6543/my%20db?sslmode=verify-full&sslrootcert=%2Fetc%2Fca.pem"
    assert (user, password) == ("u", "pw") and "pw" not in url
    assert jdbc("host=127.0.0.1 port=5432 dbname=harness user=h password=x")[0] == \
        "jdbc:postgresql://127.0.0.1:5432/harness"
