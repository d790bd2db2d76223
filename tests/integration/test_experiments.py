"""Core and EOS experiments on the real stack, with real SIGKILLs: observed == predicted."""

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from harness.runtime.crashplan import CrashPlan
from harness.run.runner import EXIT_CODES
from tests.conftest import ROOT, harness, pids_where
from tests.unit.sample_report import validate, validate_suite
from harness.reporting.summary import whole

pytestmark = pytest.mark.integration


def run_exp(stack, tmp_path, *args, verdict="as-predicted", env=None) -> dict:
    out = tmp_path / "report"
    proc = harness("run", *args, "--quiet", "--out", str(out), env={**stack["env"], **(env or {})}, timeout=600)
    assert proc.returncode == EXIT_CODES[verdict], proc.stderr[-3000:]
    assert proc.stdout.strip().splitlines()[-1] == str(out)
    d = json.loads((out / "report.json").read_text())
    validate(d)
    assert d["verdict"] == verdict, json.dumps(d["verdict_detail"], indent=1)
    assert stack["dsn"].split("@")[0].split(":")[-1] not in (out / "report.json").read_text(), "password in report"
    return d


def worker_pids(marker: str) -> list[int]:
    return pids_where(lambda cmd: "harness" in cmd and "worker" in cmd and marker in cmd)


def test_offset_before_loses_what_crashed(stack, tmp_path):
    d = run_exp(stack, tmp_path, "offset-before", "--messages", "200")
    c = d["counts"]
    assert len(d["crashes"]) == 20
    assert c["lost"] == d["predicted"]["lost"] == 20 and c["duplicates"] == 0
    assert d["ledger"]["actual_total"] == 18_000 < d["ledger"]["expected_total"]
    assert set(d["anomalies"]["lost_ids"]) <= {x["message_id"] for x in d["crashes"]}


def test_offset_after_duplicates_what_was_not_committed(stack, tmp_path):
    d = run_exp(stack, tmp_path, "offset-after", "--messages", "200")
    c = d["counts"]
    assert c["duplicates"] == d["predicted"]["duplicates"] == 20 and c["lost"] == 0
    assert d["ledger"]["actual_total"] == 22_000 > d["ledger"]["expected_total"]
    assert c["deliveries"] == 220


def test_dedupe_is_exact_and_counts_hits(stack, tmp_path):
    d = run_exp(stack, tmp_path, "dedupe", "--messages", "200")
    c = d["counts"]
    assert (c["lost"], c["duplicates"]) == (0, 0)
    assert d["ledger"]["actual_total"] == d["ledger"]["expected_total"] == 20_000
    assert c["dedupe_hits"] == d["predicted"]["dedupe_hits"] == 20 == c["deliveries"] - c["sent"]


def test_same_seed_same_crashes_across_modes(stack, tmp_path):
    a = run_exp(stack, tmp_path / "a", "offset-after", "--messages", "100", "--seed", "7")
    b = run_exp(stack, tmp_path / "b", "dedupe", "--messages", "100", "--seed", "7")
    assert sorted(x["message_id"] for x in a["crashes"]) == sorted(x["message_id"] for x in b["crashes"])


def test_offset_after_commit_every_10(stack, tmp_path):
    d = run_exp(stack, tmp_path, "offset-after", "--messages", "200", "--commit-every", "10")
    assert d["counts"]["duplicates"] == d["predicted"]["duplicates"] > 20   # each crash redelivers up to 10
    assert d["counts"]["lost"] == 0


def test_offset_before_commit_every_10(stack, tmp_path):
    d = run_exp(stack, tmp_path, "offset-before", "--messages", "200", "--commit-every", "10")
    assert d["counts"]["lost"] == d["predicted"]["lost"] >= 20 and d["counts"]["duplicates"] == 0


def test_several_partitions_and_workers(stack, tmp_path):
    d = run_exp(stack, tmp_path, "offset-after", "--messages", "300", "--partitions", "3", "--workers", "2")
    assert d["counts"]["duplicates"] == d["predicted"]["duplicates"] == 30
    assert {c["worker"] for c in d["crashes"]} == {"w0", "w1"}
    assert {c["partition"] for c in d["crashes"]} == {0, 1, 2}


def test_random_kills_by_the_supervisor(stack, tmp_path):
    # Each kill strikes 0.05-0.6 s into a worker's busy time: enough payments that the worker is still busy.
    d = run_exp(stack, tmp_path, "dedupe", "--messages", "2000", "--kill-mode", "random", "--kills", "3",
                "--commit-every", "5")
    assert d["predicted"]["exact"] is False
    assert (d["counts"]["lost"], d["counts"]["duplicates"]) == (0, 0)
    assert 1 <= len(d["crashes"]) <= 3 and all(c["point"] == "random" and c["by"] == "supervisor" for c in d["crashes"])
    assert [f["fault"] for f in d["faults"]] == ["random-kill"] * len(d["crashes"])
    assert d["counts"]["deliveries"] is None      # a supervisor's kill leaves no delivery count: unknown


def test_eos_output_exact_and_aborted_copies_predicted(stack, tmp_path):
    d = run_exp(stack, tmp_path, "eos", "--messages", "100", "--commit-every", "5")
    rc, ru = d["kafka_output"]["read_committed"], d["kafka_output"]["read_uncommitted"]
    assert (rc["records"], rc["duplicates"], rc["lost"]) == (100, 0, 0)
    assert ru["duplicates"] == d["predicted"]["kafka_output"]["read_uncommitted"]["duplicates"] >= 10
    assert d["ledger"]["actual_total"] is None


def test_eos_boundary_duplicates_in_postgres_only(stack, tmp_path):
    d = run_exp(stack, tmp_path, "eos-boundary", "--messages", "100")
    assert d["kafka_output"]["read_committed"]["duplicates"] == 0
    assert d["counts"]["duplicates"] == len(d["crashes"]) == 10
    assert "not the database" in whole(d)


def cache_kinds():
    """The class-data archive always; a JDK 25's AOT cache where one is installed."""
    from harness.experiments import streams_jvm
    java25 = streams_jvm.aot_java()
    return [pytest.param(streams_jvm.CDS, id="cds"),
            pytest.param(streams_jvm.aot_kind(java25 or "java"), id="aot",
                         marks=pytest.mark.skipif(java25 is None, reason="no JDK 25 installed"))]


@pytest.mark.parametrize("kind", cache_kinds())
def test_streams_class_archive_damaged_or_stale_is_retrained(tmp_path, kind):
    """A truncated archive crashes a JVM even under -Xshare:auto: the probe must catch it and retrain."""
    from harness.experiments import streams_jvm
    jar = tmp_path / "eos-streams.jar"
    jar.write_bytes(streams_jvm.build(lambda *_: None).read_bytes())
    archive = jar.with_suffix(kind.suffix)
    assert streams_jvm.class_archive(jar, lambda *_: None, kind) == archive      # missing: trained
    good = archive.read_bytes()
    archive.write_bytes(good[: len(good) // 3])                           # damaged, and newer than the jar
    assert not streams_jvm._probe(archive, jar, kind)
    assert streams_jvm.class_archive(jar, lambda *_: None, kind) == archive and streams_jvm._probe(archive, jar, kind)
    os.utime(archive, (jar.stat().st_mtime - 10,) * 2)                    # older than the jar: stale
    assert streams_jvm.class_archive(jar, lambda *_: None, kind) == archive
    assert not streams_jvm.archive_stale(archive, jar)
    assert not list(tmp_path.glob("*.part*")) and not list(tmp_path.glob("hs_err*"))


@pytest.mark.parametrize("kind", cache_kinds())
def test_streams_class_archive_damaged_inside_fails_the_probe_and_is_retrained(tmp_path, kind):
    """Bytes flipped inside an archive of the right size: a JVM mapping it passes `-version` but
    crashes once it loads the worker's classes. The probe must refuse it, and the run retrain it."""
    from harness.experiments import streams_jvm
    jar = tmp_path / "eos-streams.jar"
    jar.write_bytes(streams_jvm.build(lambda *_: None).read_bytes())
    archive = streams_jvm.class_archive(jar, lambda *_: None, kind)
    data = bytearray(archive.read_bytes())
    for start in (len(data) // 2, len(data) * 3 // 4):
        data[start:start + 4096] = bytes(b ^ 0xFF for b in data[start:start + 4096])
    archive.chmod(0o644)
    archive.write_bytes(bytes(data))                                      # same size, newer than the jar
    assert not streams_jvm._probe(archive, jar, kind), "a damaged archive passed the probe"
    assert streams_jvm.class_archive(jar, lambda *_: None, kind) == archive and archive.read_bytes() != bytes(data)


@pytest.mark.parametrize("kind", cache_kinds())
def test_a_training_jvm_dies_with_a_sigkilled_harness(tmp_path, kind):
    """The harness SIGKILLed while it trains the class-data archive (or the AOT cache): the training JVM must
    die with it, not train on and leave its archive (tens of MB) beside the jar."""
    from harness.experiments import streams_jvm
    jar = tmp_path / "eos-streams.jar"
    jar.write_bytes(streams_jvm.build(lambda *_: None).read_bytes())
    make = "s.CDS" if kind.name == "cds" else "s.aot_kind(s.aot_java())"
    code = (f"from pathlib import Path; from harness.experiments import streams_jvm as s; "
            f"s.class_archive(Path({str(jar)!r}), kind={make})")
    proc = subprocess.Popen([sys.executable, "-c", code], cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    marker = f"-XX:ArchiveClassesAtExit={tmp_path}" if kind.name == "cds" else f"-XX:AOTConfiguration={tmp_path}"

    def training():
        return pids_where(lambda c: marker in c and "java" in c)
    try:
        deadline = time.time() + 120
        while not training() and time.time() < deadline:
            time.sleep(0.05)
        assert training(), "the training JVM never started"
    finally:
        proc.kill()
        proc.wait()
    deadline = time.time() + 120
    while training() and time.time() < deadline:
        time.sleep(0.2)
    assert not training()
    assert not list(tmp_path.glob("*.part*")) and not list(tmp_path.glob(f"*{kind.suffix}")), \
        "a training JVM outlived the SIGKILLed harness and left its archive"


def test_streams_class_archive_cannot_be_written_then_workers_start_without(tmp_path):
    from harness.experiments import streams_jvm
    jar = tmp_path / "eos-streams.jar"
    jar.write_bytes(streams_jvm.build(lambda *_: None).read_bytes())
    jar.with_suffix(".jsa").mkdir()        # a directory where the archive belongs: it cannot be replaced
    said = []
    assert streams_jvm.class_archive(jar, said.append) is None
    assert "workers start without one" in said[-1]
    assert not list(tmp_path.glob("*.part"))


def test_streams_run_with_a_damaged_class_archive_is_exact(stack, tmp_path):
    """The archive beside the real jar, damaged: the run retrains it (or goes without) and stays exact."""
    from harness.experiments import streams_jvm
    jar = streams_jvm.build(lambda *_: None)
    archive = streams_jvm.class_archive(jar, lambda *_: None)
    assert archive is not None
    archive.write_bytes(archive.read_bytes()[:1_000_000])
    d = run_exp(stack, tmp_path, "eos-streams", "--messages", "40", "--crash-rate", "0.05", "--streams-jvm", "cds")
    rc = d["kafka_output"]["read_committed"]
    assert (rc["records"], rc["duplicates"], rc["lost"]) == (40, 0, 0) and len(d["crashes"]) == 2
    assert streams_jvm._probe(archive, jar)


def test_streams_jvms_die_with_a_sigkilled_harness(stack, tmp_path):
    """`harness run eos-streams` SIGKILLed mid-run (no clean-up at all): its Kafka Streams JVMs, which
    run until told to stop, must die with it as Python workers do."""
    out = tmp_path / "report"
    marker = str(out / "streams-state")          # on every worker JVM's command line (--state-dir)
    cmd = [sys.executable, "-m", "harness.cli", "run", "eos-streams", "--messages", "5000", "--workers", "2",
           "--partitions", "2", "--crash-rate", "0", "--quiet", "--out", str(out)]
    run = subprocess.Popen(cmd, cwd=ROOT, env={**os.environ, **stack["env"]},
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline, running = time.time() + 300, []
        while time.time() < deadline:           # judged on the snapshot that ends the wait, not a second look
            running = pids_where(lambda c: marker in c and "java" in c)
            if len(running) >= 2:
                break
            time.sleep(0.2)
        assert len(running) >= 2, "the JVMs never started"
    finally:
        run.send_signal(signal.SIGKILL)
        run.wait()
    deadline = time.time() + 30
    while pids_where(lambda c: marker in c) and time.time() < deadline:
        time.sleep(0.2)
    left = pids_where(lambda c: marker in c)
    for pid in left:                             # do not leave them to the next test
        os.kill(pid, signal.SIGKILL)
    assert not left, "a Kafka Streams JVM outlived the SIGKILLed harness"


def test_eos_dedupe_exact_on_both_sides(stack, tmp_path):
    d = run_exp(stack, tmp_path, "eos-dedupe", "--messages", "100", "--kill-point", "after-send-offsets-before-txn-commit",
                "--commit-every", "4")
    assert (d["counts"]["duplicates"], d["counts"]["lost"]) == (0, 0)
    assert d["kafka_output"]["read_committed"]["duplicates"] == 0
    assert d["counts"]["dedupe_hits"] == d["predicted"]["dedupe_hits"] > 0


def _start_run(stack, out, *args):
    return subprocess.Popen([sys.executable, "-m", "harness.cli", "run", *args, "--quiet", "--out", str(out)],
                            env={**os.environ, **stack["env"]}, cwd=ROOT, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def _wait_for_workers(out: Path, marker: str, timeout=60) -> list[int]:
    deadline = time.time() + timeout
    while time.time() < deadline:
        pids = worker_pids(marker)
        if pids and (out / "crash-log.jsonl").exists():
            return pids
        time.sleep(0.1)
    raise AssertionError("workers never started")


def test_ctrl_c_stops_workers_and_writes_an_interrupted_report(stack, tmp_path):
    out = tmp_path / "interrupted"
    proc = _start_run(stack, out, "offset-after", "--messages", "3000", "--crash-rate", "0.05")
    _wait_for_workers(out, str(out))
    proc.send_signal(signal.SIGINT)
    _stdout, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 130, stderr
    assert "Traceback" not in stderr
    d = json.loads((out / "report.json").read_text())
    assert d["verdict"] == "interrupted" and d["status"] == "interrupted"
    assert worker_pids(str(out)) == []


def test_killed_harness_takes_its_workers_along(stack, tmp_path):
    out = tmp_path / "killed"
    proc = _start_run(stack, out, "offset-after", "--messages", "3000", "--crash-rate", "0.05")
    _wait_for_workers(out, str(out))
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=10)
    deadline = time.time() + 30         # they die with it (PR_SET_PDEATHSIG); a loaded machine is slow to say so
    while worker_pids(str(out)) and time.time() < deadline:
        time.sleep(0.1)
    assert worker_pids(str(out)) == []


def test_clean_removes_topics_and_tables(stack, tmp_path):
    d = run_exp(stack, tmp_path, "dedupe", "--messages", "20")
    proc = harness("clean", d["run_id"], env=stack["env"], check=True)
    assert "removed 1 topics and 2 tables" in proc.stdout
    import psycopg
    with psycopg.connect(stack["dsn"]) as conn:
        assert conn.execute("select to_regclass(%s)", (d["stack"]["ledger_table"],)).fetchone()[0] is None


def test_zombie_is_fenced_and_output_stays_exact(stack, tmp_path):
    d = run_exp(stack, tmp_path, "zombie", "--messages", "1500", "--zombie-pause", "1.5")
    z = d["fault_details"]["zombie"]
    assert [f["fault"] for f in d["faults"]] == ["zombie"] and d["crashes"] == []
    assert z["fenced"] is True and z["zombie_exit_code"] == 3 and "fenced" in z["fenced_error"].lower()
    t = z["times_since_pause"]
    assert t["paused"] < t["replacement_started"] < t["resumed"] <= t["zombie_fenced"]
    assert d["kafka_output"]["read_committed"]["duplicates"] == 0 and d["kafka_output"]["read_committed"]["lost"] == 0


def test_fresh_transactional_id_stalls_read_committed_readers(stack, tmp_path):
    d = run_exp(stack, tmp_path, "eos", "--messages", "100", "--crash-rate", "0.02", "--fresh-transactional-id",
                "--transaction-timeout-ms", "5000")
    stalls = [c["read_committed_stall_seconds"] for c in d["crashes"]]
    assert len(stalls) == 2 and min(stalls) >= 4.0    # the dead transactions lived until their 5 s timeout
    assert d["kafka_output"]["read_committed"]["lost"] == 0


def test_eos_streams_exact_output_and_postgres_duplicates(stack, tmp_path):
    d = run_exp(stack, tmp_path, "eos-streams", "--messages", "60", "--crash-rate", "0.05", "--effect", "postgres",
                "--streams-spare", "on")
    rc = d["kafka_output"]["read_committed"]
    assert (rc["records"], rc["duplicates"], rc["lost"]) == (60, 0, 0)
    assert len(d["crashes"]) == 3 and d["counts"]["duplicates"] == d["predicted"]["duplicates"] >= 3
    assert "not the database" in whole(d)
    # Every attempt ran under one Streams process id, so one transactional.id that fenced the halted one.
    log = (tmp_path / "report" / "workers" / "w0.log").read_text()
    ids = re.findall(r"eos-streams RUNNING worker=w0 attempt=\d+ time=\S+ process-id=(\S+)", log)
    assert len(ids) == 4 and len(set(ids)) == 1 and ids[0] != "unknown"
    # Each restart was a warm spare (--streams-spare on), activated only after the halted
    # attempt's crash line (the supervisor hands it its command line once that JVM has exited), with the
    # JVM settings of its real command line (no "started without" warning).
    assert [c["attempt"] for c in d["crashes"]] == [1, 2, 3]
    for attempt in (2, 3, 4):
        activated = log.index(f"eos-streams STANDBY activated worker=w0 attempt={attempt} ")
        assert log.rindex("eos-streams CRASH ", 0, activated) > log.find(f"eos-streams MAIN worker=w0 attempt={attempt - 1} ")
    assert "this JVM was started without" not in log


def test_small_suite_end_to_end(stack, tmp_path):
    out = tmp_path / "suite"
    proc = harness("suite", "--messages", "60", "--experiments", "offset-before,offset-after,dedupe,eos-boundary",
                   "--parallel", "2", "--quiet", "--out", str(out), env=stack["env"], timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.strip().splitlines()[-1] == str(out)
    s = json.loads((out / "suite.json").read_text())
    validate_suite(s)
    by = {r["experiment"]: r for r in s["experiments"]}
    assert {r["verdict"] for r in s["experiments"]} == {"as-predicted"}
    # The same seed crashed the same payments everywhere.
    crashed = {name: sorted(c["message_id"] for c in json.loads((out / name / "report.json").read_text())["crashes"])
               for name in by}
    assert len({tuple(v) for v in crashed.values()}) == 1
    assert by["offset-before"]["counts"]["lost"] == 6 and by["offset-after"]["counts"]["duplicates"] == 6
    assert "eos-boundary kept an exact topic and a duplicated ledger" in s["conclusion"]
    assert (out / "suite.md").exists() and (out / "suite.html").exists()
    # compare a suite with itself: no rule fires; a rule that must fire does.
    assert harness("compare", str(out), str(out), "--fail-on", "unexpected", env=stack["env"]).returncode == 0
    assert harness("compare", str(out), str(out), "--fail-on", "offset-after:duplicates>0", env=stack["env"]).returncode == 1


def test_kill_point_any_strikes_every_gap_and_stays_exact(stack, tmp_path):
    a = run_exp(stack, tmp_path / "a", "offset-after", "--messages", "200", "--kill-point", "any", "--commit-every", "3")
    assert {c["point"] for c in a["crashes"]} == {"after-poll-before-effect", "after-effect-before-commit", "after-commit"}
    assert a["counts"]["duplicates"] == a["predicted"]["duplicates"] > 0
    e = run_exp(stack, tmp_path / "e", "eos", "--messages", "200", "--kill-point", "any", "--commit-every", "3")
    assert len({c["point"] for c in e["crashes"]}) == 4
    ko = e["kafka_output"]
    assert (ko["read_committed"]["duplicates"], ko["read_committed"]["lost"]) == (0, 0)
    assert ko["read_uncommitted"]["duplicates"] == e["predicted"]["kafka_output"]["read_uncommitted"]["duplicates"]


# A worker changed to commit its offsets outside the transaction (consumer.commit where
# send_offsets_to_transaction belongs): no longer exactly-once. Loaded into every worker by sitecustomize.
OFFSETS_OUTSIDE_TXN = """
import harness.experiments.eos.eos_loops as eos
_make = eos.make_producer
class _OffsetsOutsideTxn:
    def __init__(self, producer, ctx):
        self._p, self._ctx = producer, ctx
    def __getattr__(self, name):
        return getattr(self._p, name)
    def send_offsets_to_transaction(self, offsets, metadata, timeout):
        self._ctx.consumer.commit(offsets=offsets, asynchronous=False)
eos.make_producer = lambda ctx, *a, **kw: _OffsetsOutsideTxn(_make(ctx, *a, **kw), ctx)
"""


def test_offsets_committed_outside_the_transaction_are_caught_by_any_point(stack, tmp_path):
    patch = tmp_path / "patch"
    patch.mkdir()
    (patch / "sitecustomize.py").write_text(OFFSETS_OUTSIDE_TXN)
    ids = [f"pay-{i:06d}" for i in range(1, 201)]
    plan = CrashPlan.make(ids, 0.1, 25, [p for p in ("after-poll-before-produce", "after-produce-before-txn-commit",
                                                      "after-send-offsets-before-txn-commit", "after-txn-commit")])
    assert "after-send-offsets-before-txn-commit" in dict(plan.points).values()   # the window that matters is hit
    env = {"PYTHONPATH": f"{patch}:{ROOT}"}
    d = run_exp(stack, tmp_path / "any", "eos", "--messages", "200", "--kill-point", "any", verdict="unexpected", env=env)
    assert d["kafka_output"]["read_committed"]["lost"] > 0
    assert d["verdict_detail"]["differing_ids"]["kafka.read_committed.lost"]
    # The experiment's default point never reaches that window: the same broken worker passes there.
    run_exp(stack, tmp_path / "default", "eos", "--messages", "200", env=env)


def _ledger_of(out: Path) -> str:
    """This run's own ledger table, quoted, from a worker's command line (its --ledger)."""
    deadline = time.time() + 60
    while time.time() < deadline:
        for pid in _wait_for_workers(out, str(out)):
            try:
                # A forked worker's title is its command line as one string (setproctitle).
                argv = Path(f"/proc/{pid}/cmdline").read_bytes().decode().replace("\0", " ").split()
            except OSError:
                continue        # a worker that crashed meanwhile
            if "--ledger" in argv:
                return ".".join(f'"{part}"' for part in argv[argv.index("--ledger") + 1].split("."))
        time.sleep(0.1)
    raise AssertionError("no worker named its ledger")


def test_a_stray_row_and_a_changed_amount_during_the_run_are_unexpected_and_named(stack, tmp_path):
    import psycopg
    out = tmp_path / "tampered"
    proc = _start_run(stack, out, "dedupe", "--messages", "3000", "--crash-rate", "0.02")
    table = _ledger_of(out)
    deadline = time.time() + 60
    with psycopg.connect(stack["dsn"], autocommit=True) as conn:
        # The row to change must be there already: a later insert would carry the right amount.
        while conn.execute(f"select count(*) from {table} where message_id = %s", ("pay-000002",)).fetchone()[0] == 0:
            assert time.time() < deadline, "pay-000002 never reached the ledger"
            time.sleep(0.1)
        conn.execute(f"insert into {table} (message_id, amount, worker, attempt) values ('pay-999999', 100, 'x', 1)")
        conn.execute(f"update {table} set amount = 250 where message_id = 'pay-000002'")
    _stdout, stderr = proc.communicate(timeout=300)
    d = json.loads((out / "report.json").read_text())
    assert proc.returncode == 1, stderr[-2000:]
    assert d["verdict"] == "unexpected"
    named = {i for ids in d["verdict_detail"]["differing_ids"].values() for i in ids}
    assert {"pay-999999", "pay-000002"} <= named
    assert "pay-999999" in d["anomalies"]["unexpected_ids"]


def test_with_two_workers_each_stall_is_measured_on_its_own_worker(stack, tmp_path):
    d = run_exp(stack, tmp_path, "eos", "--messages", "400", "--partitions", "4", "--workers", "2")
    measured = [c for c in d["crashes"] if c["read_committed_stall_seconds"] is not None
                and c["restart_seconds"] is not None]
    assert len(measured) >= 0.8 * len(d["crashes"]) and {c["worker"] for c in measured} == {"w0", "w1"}
    for c in measured:
        # A crashed worker's records cannot become visible before that worker is back.
        assert c["read_committed_stall_seconds"] >= c["restart_seconds"], c


def _jsonl(path: Path) -> list[dict]:
    try:
        lines = path.read_text().splitlines()
    except FileNotFoundError:
        return []
    return [json.loads(x) for x in lines if x.endswith("}")]


def _process_state(pid: int) -> str | None:
    """The kernel's one-letter state of a process (R, S, T, Z...), None once it is gone."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, IndexError, ProcessLookupError):
        return None


def _hold_a_busy_worker(out: Path, timeout=60) -> dict:
    """Freeze (SIGSTOP) a worker that is busy and has not crashed, and return its event: from then on
    the run's stop is certain to find it running, whatever the timing of crashes and restarts."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        crashed = {(c["worker"], c["attempt"]) for c in _jsonl(out / "crash-log.jsonl")}
        busy = [e for e in _jsonl(out / "events.jsonl") if e["event"] == "first_message"
                and (e["worker"], e["attempt"]) not in crashed and "pid" in e]
        if busy:
            ev = busy[-1]
            try:
                os.kill(ev["pid"], signal.SIGSTOP)
            except ProcessLookupError:
                continue
            # Stopped, still this run's worker, and it had not logged its crash before the stop landed.
            for _ in range(50):
                if _process_state(ev["pid"]) in ("T", "t", None, "Z"):
                    break
                time.sleep(0.01)
            alive = _process_state(ev["pid"]) in ("T", "t") and \
                str(out) in Path(f"/proc/{ev['pid']}/cmdline").read_bytes().decode(errors="replace")
            if alive and (ev["worker"], ev["attempt"]) not in \
                    {(c["worker"], c["attempt"]) for c in _jsonl(out / "crash-log.jsonl")}:
                return ev
            if alive:
                os.kill(ev["pid"], signal.SIGCONT)      # it had logged its crash: let it die as planned
        time.sleep(0.05)
    raise AssertionError("no busy worker to hold")


def test_an_interrupt_that_kills_a_busy_worker_makes_its_numbers_bounds_and_names_it(stack, tmp_path):
    out = tmp_path / "stopped-busy"
    proc = _start_run(stack, out, "offset-before", "--messages", "5000", "--crash-rate", "0.01")
    held = _hold_a_busy_worker(out)
    proc.send_signal(signal.SIGINT)
    proc.communicate(timeout=120)
    d = json.loads((out / "report.json").read_text())
    validate(d)
    assert d["verdict"] == "interrupted" and proc.returncode == 130
    # The held worker was SIGKILLed where it stood: what it did since its last commit is undescribed,
    # so the loss it may add is bounded (commit-every records), not predicted exactly.
    stopped = d["verdict_detail"]["killed_at_stop"]
    assert [(x["worker"], x["attempt"], x["pid"]) for x in stopped] == [(held["worker"], held["attempt"], held["pid"])]
    assert f"{held['worker']} attempt {held['attempt']}" in whole(d)
    assert d["predicted"]["exact"] is False
    c = d["counts"]
    assert c["unprocessed"] > 0 and c["lost"] <= d["predicted"]["lost"] < 100
    assert c["effects"] + c["lost"] + c["unprocessed"] == 5000
    assert _process_state(held["pid"]) is None


def _interrupt_once_the_first_crashed_worker_died(out: Path, proc, timeout=90) -> dict:
    """SIGINT the run once its first planned crash is logged and that worker is dead (its successor held back
    by --restart-delay); the crash record."""
    deadline = time.time() + timeout
    while not _jsonl(out / "crash-log.jsonl"):
        assert time.time() < deadline and proc.poll() is None, "no crash was logged"
        time.sleep(0.05)
    crash = _jsonl(out / "crash-log.jsonl")[0]
    pids = [e["pid"] for e in _jsonl(out / "events.jsonl")
            if (e["worker"], e["attempt"]) == (crash["worker"], crash["attempt"]) and "pid" in e]
    while pids and _process_state(pids[0]) not in (None, "Z"):
        assert time.time() < deadline, "the crashed worker did not die"
        time.sleep(0.05)
    proc.send_signal(signal.SIGINT)
    return crash


def _report_of_a_stop_that_killed_no_worker(out: Path, proc) -> dict:
    proc.communicate(timeout=120)
    d = json.loads((out / "report.json").read_text())
    validate(d)
    assert d["verdict"] == "interrupted" and proc.returncode == 130
    assert d["verdict_detail"]["killed_at_stop"] == []
    return d


def test_an_interrupt_while_no_worker_runs_keeps_the_prediction_exact(stack, tmp_path):
    """The stop lands between a crash and its successor (held back a minute by --restart-delay): no
    worker was running, so every crash is described and the prediction stays exact."""
    out = tmp_path / "stopped-idle"
    proc = _start_run(stack, out, "offset-before", "--messages", "2000", "--crash-rate", "0.01",
                      "--restart-delay", "120")
    crash = _interrupt_once_the_first_crashed_worker_died(out, proc)
    d = _report_of_a_stop_that_killed_no_worker(out, proc)
    assert len(d["crashes"]) == 1 and d["predicted"]["exact"] is True
    c = d["counts"]
    assert c["lost"] == d["predicted"]["lost"] == 1 and d["anomalies"]["lost_ids"] == [crash["message_id"]]
    assert c["unprocessed"] > 0 and c["effects"] + c["lost"] + c["unprocessed"] == 2000


def test_an_interrupt_before_a_crashed_transactional_workers_successor_fences_what_it_left_open(stack, tmp_path):
    """eos's worker killed at its point inside a transaction (after its produce, before the commit); its
    successor, held back by --restart-delay, would fence that transaction, but the interrupt comes first.
    CI once reported such a transaction as the system's hanging transaction: the run fences it instead."""
    out = tmp_path / "stopped-txn"
    proc = _start_run(stack, out, "eos", "--messages", "2000", "--crash-rate", "0.01", "--workers", "1",
                      "--kill-point", "after-produce-before-txn-commit", "--restart-delay", "120")
    crash = _interrupt_once_the_first_crashed_worker_died(out, proc)
    d = _report_of_a_stop_that_killed_no_worker(out, proc)
    (ended,) = d["verdict_detail"]["unrestarted_at_stop"]
    assert (ended["worker"], ended["attempt"], ended["transaction"]) == (crash["worker"], crash["attempt"], "fenced")
    assert d["anomaly_classes"]["classes"]["hanging-transaction"]["count"] == 0
    assert "Forbidden anomalies: hanging-transaction" not in whole(d)


def test_ctrl_c_on_a_suite_leaves_every_started_run_its_report(stack, tmp_path):
    out = tmp_path / "suite-int"
    # A terminal's Ctrl-C reaches the whole foreground process group: the suite, its runs and their workers.
    proc = subprocess.Popen([sys.executable, "-m", "harness.cli", "suite", "--messages", "4000", "--crash-rate", "0.01",
                             "--experiments", "offset-after,dedupe", "--parallel", "2", "--quiet", "--out", str(out)],
                            env={**os.environ, **stack["env"]}, cwd=ROOT, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)
    for name in ("offset-after", "dedupe"):
        _wait_for_workers(out / name, str(out / name))
    os.killpg(proc.pid, signal.SIGINT)
    _stdout, stderr = proc.communicate(timeout=300)
    assert proc.returncode == 130, stderr[-2000:]
    s = json.loads((out / "suite.json").read_text())
    validate_suite(s)
    for name in ("offset-after", "dedupe"):
        d = json.loads((out / name / "report.json").read_text())
        validate(d)
        assert d["verdict"] == "interrupted"
    assert {r["verdict"] for r in s["experiments"]} == {"interrupted"}
    assert "states no finding" in s["conclusion"] and "held in" not in s["conclusion"]
    assert s["exit_code"] == 130
    assert worker_pids(str(out)) == []


def test_an_audit_that_cannot_read_the_ledger_reports_unknown_not_zeros(stack, tmp_path):
    """The ledger vanishes between the workers' end and the audit (here: renamed during the wait for
    the broker to abort unfenced transactions); the report must say unknown, not 0 effects and all lost."""
    import psycopg
    out = tmp_path / "audit-failed"
    proc = subprocess.Popen([sys.executable, "-m", "harness.cli", "run", "eos-boundary", "--messages", "100",
                             "--crash-rate", "0.02", "--fresh-transactional-id", "--transaction-timeout-ms", "6000",
                             "--out", str(out)], env={**os.environ, **stack["env"]}, cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 120
    while time.time() < deadline:
        events = (out / "events.jsonl").read_text() if (out / "events.jsonl").exists() else ""
        if '"event": "done"' in events:
            break
        time.sleep(0.05)
    report = {}
    with psycopg.connect(stack["dsn"], autocommit=True) as conn:
        table = conn.execute("select table_name from information_schema.tables where table_schema = 'harness' "
                             "and table_name like 'ledger_%' order by table_name desc limit 1").fetchone()[0]
        conn.execute(f'alter table harness."{table}" rename to "{table}_away"')
        try:
            _stdout, stderr = proc.communicate(timeout=120)
            report = json.loads((out / "report.json").read_text())
        finally:
            conn.execute(f'alter table harness."{table}_away" rename to "{table}"')
    validate(report)
    assert proc.returncode == 3, stderr[-2000:]
    assert report["verdict"] == "audit-failed"
    c = report["counts"]
    assert (c["effects"], c["duplicates"], c["lost"], report["ledger"]["actual_total"]) == (None, None, None, None)
    assert report["kafka_output"]["read_committed"]["records"] == 100     # what could be read is still reported
    assert "does not exist" in report["verdict_detail"]["audit_errors"][0]
    assert "Audit error" in stderr and "unknown" in stderr
    md = (out / "report.md").read_text()
    assert "| lost | database: ledger table | unknown |" in md and "Audit error" in md
    assert "Audit error" in (out / "report.html").read_text() or "audit error" in (out / "report.html").read_text()
