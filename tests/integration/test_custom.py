"""`harness run custom` on the real stack, with real SIGKILLs: consumers the harness did not write.

The example consumers in examples/consumers/ are run as a user would run them:
the correct ones hold exactly-once, the subtly wrong one is caught with its
duplicated ids named and the kills that caused them. Bad commands end with one
line and exit 2, never a hang, and leave no process behind.
"""

import json
import shutil
import subprocess
import sys
import uuid

import psycopg
import pytest

from harness.run.runner import EXIT_CODES
from tests.conftest import ROOT, harness, pids_where
from tests.unit.sample_report import validate
from harness.reporting.summary import whole

pytestmark = pytest.mark.integration

EXAMPLES = ROOT / "examples" / "consumers"
JAVA = EXAMPLES / "java"
JAR = JAVA / "target" / "payments-consumer.jar"


def run_custom(stack, tmp_path, cmd, *args, verdict="as-predicted", env=None) -> dict:
    out = tmp_path / "report"
    proc = harness("run", "custom", "--worker-cmd", cmd, *args, "--quiet", "--out", str(out),
                   env={**stack["env"], **(env or {})}, timeout=600)
    assert proc.returncode == EXIT_CODES[verdict], proc.stderr[-3000:]
    d = json.loads((out / "report.json").read_text())
    validate(d)
    assert d["verdict"] == verdict, json.dumps(d["verdict_detail"], indent=1)
    password = stack["dsn"].split("@")[0].split(":")[-1]
    for name in ("report.json", "report.md", "report.html"):
        assert password not in (out / name).read_text(), f"password in {name}"
    assert not pids_where(lambda c: cmd in c), "a consumer process outlived the run"
    return d


def ledger_counts(stack, table: str) -> dict:
    with psycopg.connect(stack["dsn"]) as conn:
        return dict(conn.execute(f"select message_id, count(*) from {table} group by message_id").fetchall())


def python_example(name: str) -> str:
    return f"{sys.executable} {EXAMPLES / 'python' / name}"


def test_the_correct_python_consumer_holds_exactly_once_under_random_kills(stack, tmp_path):
    d = run_custom(stack, tmp_path, python_example("correct.py"), "--kills", "12", "--partitions", "2",
                   "--workers", "2", "--messages", "3000")
    c = d["consumer"]
    assert c["claim"] == "exactly-once" and c["claim_held"] is True
    assert c["kills_landed"] == len(d["crashes"]) > 0
    assert all(k["by"] == "random" and k["pid"] for k in c["kills"])
    assert {s["attempt"] for s in c["starts"]} >= {1, 2}
    counts = ledger_counts(stack, d["stack"]["ledger_table"])          # psql's view agrees with the report
    assert len(counts) == 3000 and set(counts.values()) == {1}
    assert d["counts"]["duplicates"] == d["counts"]["lost"] == 0
    assert d["kafka_output"] is None, "an output topic nobody wrote to is not audited"


def test_the_wrong_python_consumer_is_caught_with_the_duplicates_and_their_kills(stack, tmp_path):
    d = run_custom(stack, tmp_path, python_example("wrong.py"), "--kills", "12", "--partitions", "2",
                   "--workers", "2", "--messages", "3000", verdict="unexpected")
    c = d["consumer"]
    assert c["claim_held"] is False
    named = d["verdict_detail"]["differing_ids"]["duplicates"]
    counts = ledger_counts(stack, d["stack"]["ledger_table"])
    assert named and all(counts[i] > 1 for i in named)
    assert d["counts"]["duplicates"] == sum(n - 1 for n in counts.values())
    w = c["witnesses"][0]
    assert w["kind"] == "duplicated" and len(w["effects"]) >= 2 and w["kills"]
    first, last = w["effects"][0]["t"], w["effects"][-1]["t"]
    # (an insert sent just before its writer's kill may commit up to COMMIT_GRACE_S after it)
    from harness.experiments.custom.custom_witnesses import COMMIT_GRACE_S
    assert all(first - COMMIT_GRACE_S <= k["t"] <= last for k in w["kills"]), "a witness kill outside the id's effects"
    assert sum(k["duplicates_explained"] or 0 for k in c["kills"]) >= len({x["id"] for x in c["witnesses"]})
    assert "NOT as claimed" in whole(d) and "Witness:" in whole(d)


SESSION_MS, HEARTBEAT_MS = 2000, 2000 // 3            # the group example's settings in the test below


def test_a_consumer_in_a_real_group_is_killed_while_it_works_and_witnessed_by_the_member_that_applied(stack, tmp_path):
    """examples/consumers/python/group.py subscribes (classic protocol, 2 s session), so the group decides who
    reads what; it commits after every 20 payments, so a kill leaves applied work behind. Its ledger rows
    carry the worker and attempt that applied them: the consumer's own record, checked against what the
    harness placed from the group's timeline."""
    # 2 ms of work per payment: the pace is the consumer's, not the machine's. Unpaced, one full test run saw
    # only 4 of the 12 kills find a busy member (the 8,000 payments were done while the group waited out dead
    # members' fixed 2 s sessions); paced, they are at least 8 s of the two members' work
    d = run_custom(stack, tmp_path, python_example("group.py") + f" --session-timeout-ms {SESSION_MS} --commit-every 20"
                   " --work-ms 2", "--expect", "at-least-once", "--kills", "12", "--partitions", "2", "--workers", "2",
                   "--messages", "8000")
    c = d["consumer"]
    assert c["membership"] == "group" and c["protocol"] == "classic" and c["members_unidentified"] == 0
    # every attempt that joined was tied by its client.id (the last replacements may end before they join)
    assert c["members_tied"]["client.id"] >= 2 and c["members_tied"]["first appearance"] == 0
    with psycopg.connect(stack["dsn"]) as conn:
        rows = conn.execute(f"select message_id, worker, attempt from {d['stack']['ledger_table']} order by id").fetchall()
    applied_by: dict = {}
    for mid, worker, attempt in rows:
        applied_by.setdefault(mid, []).append((worker, attempt))
    workers = {wa for who in applied_by.values() for wa in who}
    # every kill counted as landed struck a member that owned partitions and had applied payments since its start
    # how many of the 12 land depends on how the machine paces the workers against their rejoins; at least
    # as many as the report needs to call them meaningful (FEW_KILLS), and it does not warn
    from harness.experiments.custom.custom_report import FEW_KILLS
    assert c["kills_landed"] >= FEW_KILLS and not any("kill(s) landed" in w for w in c["warnings"]), c["warnings"]
    for k in c["kills"]:
        # (a kill may still land just after the victim's own last commit, before a sample showed it)
        assert k["state"] in ("could do damage", "after its last commit") and k["partitions"], k
        assert (k["worker"], k["attempt"]) in workers, f"{k} applied nothing"
    # witnesses name the member that really applied each effect
    dups = [w for w in c["witnesses"] if w["kind"] == "duplicated"]
    assert dups, "commits every 20 payments: kills leave duplicates"
    for w in dups:
        named = [(e["worker"], e["attempt"]) for e in w["effects"]]
        truth = applied_by[w["id"]]
        assert len(named) == len(truth)
        for (worker, attempt), real, e in zip(named, truth, w["effects"]):
            assert (worker, attempt) == real or (worker is None and f"{real[0]} attempt {real[1]}" in e["owners"]), w
        if w["explained_by"] == "kill":
            k = w["kills"][0]
            assert (k["worker"], k["attempt"]) == truth[0], "the kill that explains it is of the first applier"
    assert sum(k["duplicates_explained"] for k in c["kills"]) >= 1
    # the restart per kill is the group's stall: the dead member's session must expire first (it heartbeat at
    # most HEARTBEAT_MS before its death)
    # (a kill that struck after its victim's last commit has no stall: nothing of its was left to commit)
    # (a kill another kill followed before its partitions recovered has no stall either: it would sum both)
    damaging = [k for k in c["kills"] if k["state"] == "could do damage"]
    stalls = [k["stall_seconds"] for k in damaging if not k["killed_again"]]
    assert len(damaging) >= len(c["kills"]) - 2 and stalls and None not in stalls, c["kills"]
    assert c["killed_again_before_recovery"] == sum(1 for k in c["kills"] if k["killed_again"])
    assert min(stalls) >= (SESSION_MS - HEARTBEAT_MS) / 1000, stalls
    assert c["restart_median_seconds"] >= SESSION_MS / 1000 * 0.9
    assert "the group's stall (classic protocol)" in whole(d)
    assert (tmp_path / "report" / "group.jsonl").exists()


def test_a_consumer_that_finishes_before_any_kill_can_strike_is_told_so(stack, tmp_path):
    """One payment: the consumer applies and commits it at once. Either no kill strikes, or one strikes a worker
    whose partition is committed to its end (the sample that showed its commit came a moment after the kill
    was due): each time the report says the kills could test nothing, in those words."""
    d = run_custom(stack, tmp_path, python_example("correct.py"), "--kills", "3", "--messages", "1")
    c = d["consumer"]
    assert c["claim_held"] is True
    if c["kills_landed"] == 0:
        said = "before any kill could strike"
    else:
        assert all(k["state"] == "after its last commit" for k in c["kills"]), c["kills"]
        said = f"{c['kills_landed']} of {c['kills_landed']} kill(s) struck a worker that could do no damage"
    assert any(said in w for w in c["warnings"]), c["warnings"]
    assert said in whole(d)


@pytest.fixture(scope="module")
def java_consumer():
    if shutil.which("mvn") is None or shutil.which("java") is None:
        pytest.skip("mvn and java are needed to build the Java example consumer")
    for offline in (["-o"], []):
        proc = subprocess.run(["mvn", "-B", "-q", *offline, "-f", str(JAVA / "pom.xml"), "package", "-DskipTests"],
                              capture_output=True, text=True, timeout=900)
        if proc.returncode == 0 and JAR.exists():
            return f"java -jar {JAR}"
    raise AssertionError("building the Java example failed:\n" + (proc.stdout + proc.stderr)[-3000:])


def test_the_java_consumer_holds_exactly_once_under_random_kills(stack, tmp_path, java_consumer):
    d = run_custom(stack, tmp_path, java_consumer, "--kills", "8", "--partitions", "2", "--workers", "2",
                   "--messages", "2000")
    assert d["consumer"]["claim_held"] is True and d["consumer"]["kills_landed"] > 0
    counts = ledger_counts(stack, d["stack"]["ledger_table"])
    assert len(counts) == 2000 and set(counts.values()) == {1}


# A consumer of the test's own: effects in a table of its own (audited with --audit-sql), each payment
# also produced to the output topic before its offset is committed (at-least-once there).
OWN_TABLES = r'''
import json, os, signal
import psycopg
from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition
env = os.environ
stop = []
signal.signal(signal.SIGTERM, lambda *a: stop.append(1))
topic, table = env["HARNESS_INPUT_TOPIC"], env["TEST_EFFECTS_TABLE"]
login = json.loads(env.get("HARNESS_KAFKA_CONFIG") or "{}")       # the run's own Kafka user
c = Consumer({**login, "bootstrap.servers": env["HARNESS_BOOTSTRAP_SERVERS"], "group.id": env["HARNESS_GROUP_ID"],
              "enable.auto.commit": False})
want = [TopicPartition(topic, int(p)) for p in env["HARNESS_PARTITIONS"].split(",")]
c.assign([TopicPartition(topic, t.partition, t.offset if t.offset >= 0 else OFFSET_BEGINNING)
          for t in c.committed(want, timeout=30)])
out = Producer({**login, "bootstrap.servers": env["HARNESS_BOOTSTRAP_SERVERS"]})
with psycopg.connect(env["HARNESS_POSTGRES_DSN"], autocommit=True) as db:
    while not stop:
        m = c.poll(0.5)
        if m is None or m.error():
            continue
        p = json.loads(m.value())
        db.execute(f"insert into {table} (pid, cents) values (%s, %s) on conflict do nothing", (p["id"], p["amount"]))
        out.produce(env["HARNESS_OUTPUT_TOPIC"], key=m.key(), value=m.value(), partition=m.partition())
        out.flush()
        c.commit(message=m, asynchronous=False)
'''


@pytest.fixture
def own_table(stack):
    # The run role may create tables only in the `harness` schema (and the read-only role reads only there).
    # A run's consumers connect as the run's own role: a table of the user's is the user's to grant them.
    table = f"harness.custom_test_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(stack["dsn"], autocommit=True) as conn:
        conn.execute(f"create table {table} (pid text primary key, cents bigint not null)")
        conn.execute(f"grant select, insert, update on {table} to public")
    yield table
    with psycopg.connect(stack["dsn"], autocommit=True) as conn:
        conn.execute(f"drop table {table}")


def test_audit_sql_counts_the_consumers_own_table_and_the_output_topic_is_audited(stack, tmp_path, own_table):
    script = tmp_path / "own_tables.py"
    script.write_text(OWN_TABLES)
    d = run_custom(stack, tmp_path, f"{sys.executable} {script}", "--expect", "at-least-once", "--kills", "4",
                   "--messages", "1500", "--audit-sql", f"select pid, cents from {own_table}",
                   env={"TEST_EFFECTS_TABLE": own_table})
    assert d["consumer"]["audit"] == "audit-sql" and d["consumer"]["claim"] == "at-least-once"
    assert (d["counts"]["effects"], d["counts"]["lost"]) == (1500, 0)
    ko = d["kafka_output"]
    assert ko is not None and ko["read_committed"]["lost"] == 0 and ko["read_committed"]["records"] >= 1500
    # `harness audit` runs no SQL from the report: without the query given again the ledger is not recounted.
    skipped = harness("audit", str(tmp_path / "report"), "--json", env=stack["env"])
    assert skipped.returncode == 2 and "the ledger is not recounted" in skipped.stderr, skipped.stderr
    rows = {(r["store"], r["metric"]): r for r in json.loads(skipped.stdout)["report"]}
    assert rows[("ledger", "effects (not recounted)")]["recounted"] is None
    # Given again, it recounts the same effects with that query (read-only, as the read-only role).
    audit = harness("audit", str(tmp_path / "report"), "--json", "--audit-sql", f"select pid, cents from {own_table}",
                    env=stack["env"])
    assert audit.returncode == 0, audit.stdout + audit.stderr
    rows = {(r["store"], r["metric"]): r for r in json.loads(audit.stdout)["report"]}
    assert rows[("ledger", "effects")]["recounted"] == d["counts"]["effects"]


def test_audit_sql_that_is_not_two_columns_or_writes_is_one_audit_error(stack, tmp_path, own_table):
    script = tmp_path / "own_tables.py"
    script.write_text(OWN_TABLES)
    smuggled = f"select pid, cents from {own_table}; commit; delete from {own_table}; select pid, cents from {own_table}"
    for i, (query, needle) in enumerate(((f"select pid, cents, 1 from {own_table}", "must return two columns"),
                                         (f"delete from {own_table} returning pid, cents", "read-only"),
                                         (smuggled, "multiple commands"))):
        d = run_custom(stack, tmp_path / str(i), f"{sys.executable} {script}", "--kills", "0", "--messages", "50",
                       "--audit-sql", query, env={"TEST_EFFECTS_TABLE": own_table}, verdict="audit-failed")
        assert any(needle in e for e in d["verdict_detail"]["audit_errors"]), d["verdict_detail"]
        assert d["counts"]["effects"] is None
    with psycopg.connect(stack["dsn"]) as conn:
        assert conn.execute(f"select count(*) from {own_table}").fetchone()[0] == 50, "the audit wrote"


def test_kill_every_keeps_killing_on_a_beat_and_the_correct_consumer_still_holds(stack, tmp_path):
    d = run_custom(stack, tmp_path, python_example("correct.py"), "--kill-every", "1.5", "--messages", "4000")
    assert [f["fault"] for f in d["faults_configured"]] == ["kill-every"]
    assert d["consumer"]["kills_landed"] >= 1 and {k["by"] for k in d["consumer"]["kills"]} == {"beat"}


@pytest.mark.parametrize("cmd, code", [("true", "0"), ("false", "1"), (f"{sys.executable} -c 'raise SystemExit(3)'", "3")])
def test_a_command_that_exits_at_once_ends_with_one_line_and_exit_2(stack, tmp_path, cmd, code):
    proc = harness("run", "custom", "--worker-cmd", cmd, "--messages", "50", "--time-limit", "120",
                   "--out", str(tmp_path / "r"), env=stack["env"], timeout=300)
    assert proc.returncode == 2, proc.stderr[-2000:]
    lines = [l for l in proc.stderr.splitlines() if l.startswith("error:")]
    assert len(lines) == 1 and f"(last exit {code}" in lines[0] and "never committed" in lines[0]
    assert "Traceback" not in proc.stderr
    assert (tmp_path / "r" / "report.json").exists(), "the evidence is kept"


def test_a_command_that_does_not_exist_is_refused_before_anything_starts(stack, tmp_path):
    proc = harness("run", "custom", "--worker-cmd", "/nonexistent/consumer", "--out", str(tmp_path / "r"),
                   env=stack["env"], timeout=60)
    assert proc.returncode == 2 and "is not an executable file" in proc.stderr
    assert not (tmp_path / "r").exists()


def test_consumers_die_with_a_sigkilled_harness(stack, tmp_path):
    import os
    import signal
    import time
    script = tmp_path / "lingering_consumer.py"            # a consumer that would never stop by itself
    script.write_text("import time\nwhile True:\n    time.sleep(1)\n")
    cmd = [sys.executable, "-m", "harness.cli", "run", "custom", "--worker-cmd", f"{sys.executable} {script}",
           "--workers", "2", "--partitions", "2", "--messages", "50", "--quiet", "--out", str(tmp_path / "r")]
    harness_proc = subprocess.Popen(cmd, cwd=ROOT, env={**os.environ, **stack["env"]},
                                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        # Judged on the snapshot that ends the wait: the seeded kills restart consumers meanwhile, so a second
        # look may catch one between its death and its successor (this test once failed on such a look).
        deadline, running = time.time() + 120, []
        while time.time() < deadline:
            running = pids_where(lambda c: str(script) in c and "harness.cli" not in c)
            if len(running) >= 2:
                break
            time.sleep(0.2)
        assert len(running) >= 2, "consumers never started"
    finally:
        harness_proc.send_signal(signal.SIGKILL)
        harness_proc.wait()
    deadline = time.time() + 30
    while pids_where(lambda c: str(script) in c) and time.time() < deadline:
        time.sleep(0.2)
    assert not pids_where(lambda c: str(script) in c), "a consumer outlived the SIGKILLed harness"


@pytest.mark.slow          # 31 s; the default run keeps test_leftovers.py's setsid and double-fork children
def test_children_a_consumer_forks_do_not_outlive_it(stack, tmp_path):
    """A consumer that starts a helper ignoring SIGTERM (a shell wrapper, a sidecar): every attempt's helper
    is gone after the run, whether its consumer was SIGKILLed by a fault or stopped at the end."""
    marker = f"helper-{uuid.uuid4().hex[:8]}"
    wrapper = tmp_path / "wrapper.sh"
    helper = "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(600)"
    wrapper.write_text(f"#!/bin/sh\n{sys.executable} -c '{helper}' {marker} &\n"
                       f"exec {sys.executable} {EXAMPLES / 'python' / 'correct.py'}\n")
    wrapper.chmod(0o755)
    d = run_custom(stack, tmp_path, str(wrapper), "--kill-every", "1.5", "--messages", "3000")
    assert d["consumer"]["kills_landed"] >= 1
    assert not pids_where(lambda c: marker in c), "a child of a consumer outlived the run"


def _advisory_lock_sql(path) -> str:
    """The example's advisory-lock statement, as a psycopg query (JDBC's `?` made `%s`)."""
    import re
    m = re.search(r'"(select pg_advisory_xact_lock\([^"]*\))"', path.read_text())
    assert m, f"no advisory lock in {path}"
    return m.group(1).replace("?", "%s")


@pytest.mark.parametrize("example", [EXAMPLES / "python" / "correct.py",
                                     JAVA / "src" / "main" / "java" / "example" / "PaymentsConsumer.java",
                                     EXAMPLES.parent / "pytest-user" / "consumer.py"],
                         ids=["python", "java", "pytest-user"])
def test_the_examples_lock_a_payment_per_run_so_runs_on_one_stack_never_wait_for_each_other(stack, example):
    lock = _advisory_lock_sql(example)
    keys = lambda ledger, pid: (ledger, pid) if lock.count("%s") == 2 else (pid,)   # noqa: E731 - (ledger, id) or id
    ledger_a, ledger_b = (f"harness.ledger_r{uuid.uuid4().hex[:8]}" for _ in range(2))
    with psycopg.connect(stack["dsn"]) as a, psycopg.connect(stack["dsn"], autocommit=True) as b:
        a.execute(lock, keys(ledger_a, "p-000001"))           # run A holds its payment's lock, in its transaction
        b.execute("set lock_timeout = '2s'")
        with b.transaction():
            b.execute(lock, keys(ledger_b, "p-000001"))       # run B, same payment id: not blocked by run A
        with pytest.raises(psycopg.errors.LockNotAvailable):  # the same run's lock still excludes
            with b.transaction():
                b.execute(lock, keys(ledger_a, "p-000001"))
        a.rollback()


def test_kills_aimed_at_the_gap_strike_between_an_effect_and_its_commit(stack, tmp_path):
    """random-kill:aim=gap holds a due kill until its worker has applied payments its partition's committed
    offset has not caught up with: with commits every 200 payments, every kill that lands finds applied,
    uncommitted work, and the report counts each one in the gap."""
    d = run_custom(stack, tmp_path, python_example("group.py") + f" --session-timeout-ms {SESSION_MS} --commit-every 200"
                   " --work-ms 2", "--expect", "at-least-once", "--fault", "random-kill:kills=5,aim=gap",
                   "--partitions", "2", "--workers", "2", "--messages", "8000")
    c = d["consumer"]
    assert [f for f in d["faults_configured"] if f["fault"] == "random-kill"][0]["aim"] == "gap"
    assert c["kills_landed"] >= 1 and c["kills_in_gap"] == c["kills_landed"], c["kills"]
    assert all(k["effects_since_commit"] for k in c["kills"]), c["kills"]
    assert d["counts"]["duplicates"] > 0
    assert not any("landed between an effect and its commit" in w for w in c["warnings"]), c["warnings"]


LEAKY = '''
import json, os, sys, time, uuid
from confluent_kafka import Producer
env = os.environ
if env["HARNESS_ATTEMPT"] == "1":   # its bug: a producer with a fresh transactional.id, its transaction never ended
    p = Producer({**json.loads(env.get("HARNESS_KAFKA_CONFIG") or "{}"),
                  "bootstrap.servers": env["HARNESS_BOOTSTRAP_SERVERS"], "transaction.timeout.ms": 600000,
                  "transactional.id": env["HARNESS_RUN_PREFIX"] + "leaky-" + uuid.uuid4().hex})
    p.init_transactions(60)
    p.begin_transaction()
    tag = {"worker": env["HARNESS_WORKER"], "attempt": int(env["HARNESS_ATTEMPT"]), "txn": 1}
    p.produce(env["HARNESS_OUTPUT_TOPIC"], key=b"leak", value=json.dumps(tag if env.get("TEST_TAG") else {}))
    p.flush(60)
    print("LEAKED", flush=True)
while True:
    time.sleep(1)
'''


@pytest.mark.parametrize("tagged", [pytest.param(False, marks=pytest.mark.slow), True],   # 35 s each
                         ids=["untied", "tagged-by-the-killed-attempt"])
def test_a_consumers_own_hanging_transaction_is_reported_though_the_stop_killed_a_worker(stack, tmp_path, tagged):
    """Ctrl-C SIGKILLs the consumer where it stands, and one transaction hangs: as many as the stop killed
    workers. Counting excused it as the stop's; nothing ties it to the killed worker (its transactional.id is
    the consumer's own, its record names no writer), so it is the consumer's forbidden anomaly, reported
    with its evidence: the partition, its offset and the transactional.id that holds it open. A consumer
    whose transaction's first record names its writer (worker and attempt), the attempt the stop killed,
    is excused by that identity."""
    import os
    import signal
    import time
    script = tmp_path / "leaky_consumer.py"
    script.write_text(LEAKY)
    out = tmp_path / "report"
    proc = subprocess.Popen([sys.executable, "-m", "harness.cli", "run", "custom", "--worker-cmd",
                             f"{sys.executable} {script}", "--messages", "50", "--kills", "0", "--quiet",
                             "--out", str(out)], cwd=ROOT, env={**os.environ, **stack["env"],
                                                                **({"TEST_TAG": "1"} if tagged else {})},
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    log = out / "workers" / "w0.log"
    deadline = time.monotonic() + 180
    while "LEAKED" not in (log.read_text(errors="replace") if log.exists() else ""):
        assert time.monotonic() < deadline and proc.poll() is None, proc.communicate()[1][-2000:] if proc.poll() else ""
        time.sleep(0.2)
    proc.send_signal(signal.SIGINT)
    proc.communicate(timeout=300)
    assert proc.returncode == 130
    d = json.loads((out / "report.json").read_text())
    validate(d)
    assert d["verdict"] == "interrupted"
    assert [(x["worker"], x["attempt"]) for x in d["verdict_detail"]["killed_at_stop"]] == [("w0", 1)]
    hanging = d["anomaly_classes"]["classes"]["hanging-transaction"]
    text, md = whole(d), (out / "report.md").read_text()
    (w,) = hanging["witnesses"]
    (held,) = w["producers"]
    try:
        assert hanging["count"] == 1 and not hanging["allowed"]
        if tagged:
            assert held["first_record_writer"] == w["writer"] == "w0/1", w
            assert "Forbidden anomalies" not in text and "were the stop's: tied to workers it SIGKILLed" in text
            assert "its first record names w0/1, killed by the stop" in md
        else:
            assert "Forbidden anomalies: hanging-transaction (1)" in text, text
            assert "tied to no worker the stop killed" in text
            assert "-leaky-" in held["transactional_id"], w         # ListTransactions named it
            assert f"transactional.id {held['transactional_id']}): not a worker the stop killed" in md
        assert not pids_where(lambda c: str(script) in c), "a consumer process outlived the run"
    finally:        # the test's own clean-up: the transaction it left open is aborted (fenced), not left to time out
        from confluent_kafka import Producer
        from harness.clients.kafka_client import config
        tid = held.get("transactional_id")
        if tid:
            Producer(config(stack["bootstrap_servers"], {"transactional.id": tid})).init_transactions(60)
