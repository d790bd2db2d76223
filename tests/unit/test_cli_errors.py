"""Bad input gets one clear line and a non-zero exit, never a traceback or a hang."""

import os
import time

import pytest

from tests.conftest import harness


def one_clear_line(proc, *needles):
    assert proc.returncode != 0
    assert "Traceback" not in proc.stderr + proc.stdout
    lines = [l for l in proc.stderr.splitlines() if l.strip()]
    assert lines, "no error message"
    for n in needles:
        assert n in lines[0], f"{n!r} not in {lines[0]!r}"
    return lines[0]


@pytest.fixture
def isolated(tmp_path):
    """A state folder and cache of our own, so nothing here touches a running stack."""
    return {"HARNESS_HOME": str(tmp_path / "state"), "HARNESS_CACHE": str(tmp_path / "cache"),
            "HARNESS_BOOTSTRAP_SERVERS": "", "HARNESS_POSTGRES_DSN": ""}


def test_unknown_experiment_lists_the_valid_ones(isolated):
    line = one_clear_line(harness("run", "nope", env=isolated), "unknown experiment 'nope'")
    for name in ("offset-before", "offset-after", "dedupe", "eos", "eos-boundary", "eos-dedupe"):
        assert name in line


@pytest.mark.parametrize("rate", ["1.5", "-0.1"])
def test_crash_rate_outside_0_1(isolated, rate):
    one_clear_line(harness("run", "dedupe", "--crash-rate", rate, env=isolated), "--crash-rate must be between 0 and 1")


def test_messages_must_be_positive(isolated):
    one_clear_line(harness("run", "dedupe", "--messages", "0", env=isolated), "--messages must be at least 1")


def test_unknown_stack(isolated):
    one_clear_line(harness("up", "--stack", "kubernetes", env=isolated), "unknown --stack 'kubernetes'", "local, compose")


def test_compose_without_engine_says_so(isolated):
    proc = harness("up", "--stack", "compose", env={**isolated, "DOCKER_HOST": "unix:///nonexistent.sock"})
    one_clear_line(proc, "needs a Docker engine")


def test_unreachable_external_broker_fails_fast(isolated):
    t0 = time.monotonic()
    proc = harness("run", "dedupe", "--bootstrap-servers", "127.0.0.1:1",
                   "--postgres-dsn", "postgresql://u:topsecret@127.0.0.1:1/db", env=isolated)
    elapsed = time.monotonic() - t0
    one_clear_line(proc, "Kafka at 127.0.0.1:1 is unreachable")
    # The probes give up after EXTERNAL_PROBE_S and 4 s; this only catches a wait with no limit (a client
    # retrying forever), with room for a loaded machine, where 15 s was once too tight for an honest run.
    assert elapsed < 120, f"took {elapsed:.1f} s"
    assert "topsecret" not in proc.stderr + proc.stdout


def test_external_stack_needs_both_addresses(isolated):
    one_clear_line(harness("run", "dedupe", "--bootstrap-servers", "127.0.0.1:1", env=isolated),
                   "--postgres-dsn is missing")


def _path_without(*tools):
    dirs = []
    for d in os.environ["PATH"].split(os.pathsep):
        if not any(os.path.exists(os.path.join(d, t)) for t in tools):
            dirs.append(d)
    return os.pathsep.join(dirs)


def test_java_missing(isolated):
    # The CLI runs as sys.executable (an absolute path), so a PATH without java's folders is enough.
    path = _path_without("java", "mvn")
    one_clear_line(harness("up", env={**isolated, "PATH": path}), "java not found")


def test_mvn_missing(tmp_path, isolated):
    # java present, mvn absent: a PATH with only a link to java and to python's own folder.
    import shutil
    import sys
    bindir = tmp_path / "bin"
    bindir.mkdir()
    os.symlink(shutil.which("java"), bindir / "java")
    path = os.pathsep.join([str(bindir), os.path.dirname(sys.executable), "/usr/sbin", "/usr/bin", "/bin"])
    path = os.pathsep.join(d for d in path.split(os.pathsep) if not os.path.exists(os.path.join(d, "mvn")))
    one_clear_line(harness("up", env={**isolated, "PATH": path}), "mvn not found")


def test_postgres_binaries_missing_names_the_debian_package(isolated):
    one_clear_line(harness("up", env={**isolated, "HARNESS_PG_BIN": "/nonexistent"}), "postgresql", "apt-get install")


def test_help_ends_with_an_example():
    for cmd in ("up", "down", "status", "run", "clean", "suite", "compare", "report", "bench"):
        out = harness(cmd, "--help").stdout
        assert "Example" in out, cmd


@pytest.mark.parametrize("args, needles", [
    (["offset-after", "--kill-point", "bogus"], ["unknown --kill-point 'bogus' for offset-after", "after-commit", "any"]),
    (["offset-after", "--kill-point", "after-efect-before-commit"], ["for offset-after; did you mean 'after-effect-before-commit'?"]),
    (["eos", "--kill-point", "after-commit-before-effect"], ["for eos", "after-send-offsets-before-txn-commit"]),
    (["zombie", "--kill-point", "any"], ["applies to planned crashes"]),
    (["dedupe", "--fault", "nope"], ["unknown --fault 'nope'", "random-kill"]),
    (["dedupe", "--fault", "zombie"], ["--fault zombie needs a worker of ours", "dedupe has none"]),
    (["dedupe", "--effect", "postgres"], ["--effect applies to eos-streams only"]),
])
def test_kill_points_and_faults_are_checked_before_anything_starts(isolated, args, needles):
    proc = harness("run", *args, env=isolated)
    assert proc.returncode == 2
    one_clear_line(proc, *needles)
    assert not os.path.exists(isolated["HARNESS_HOME"]), "a refused run started something"


def test_experiments_lists_every_kill_point_as_text_and_json():
    import json
    text = harness("experiments", check=True).stdout
    assert "kill point inside-effect-txn" in text and "--kill-point any" in text
    data = json.loads(harness("experiments", "--json", check=True).stdout)
    assert {e["name"] for e in data} >= {"offset-before", "dedupe", "eos", "zombie"}
    eos = next(e for e in data if e["name"] == "eos")
    assert eos["kill_points"][-1] == {"name": "after-txn-commit", "after": "commit transaction", "before": None,
                                      "damage": ["aborted"], "says": eos["kill_points"][-1]["says"]}


# Every check below must fire before any stack is touched: the external addresses point at closed
# ports, so a check that came too late would print "Kafka at 127.0.0.1:1 is unreachable" instead.
NO_STACK = ("--bootstrap-servers", "127.0.0.1:1", "--postgres-dsn", "postgresql://u:p@127.0.0.1:1/db")


def run_fast(isolated, *args, experiment="dedupe"):
    proc = harness("run", experiment, *args, env=isolated)
    assert proc.returncode == 2, (proc.returncode, proc.stderr)
    # Refused before any network wait: a check that came after the stack would have met the closed ports.
    # (Not timed: a loaded machine made a bound of 6 s fail once, the check itself being right.)
    assert "unreachable" not in proc.stderr, "the check came after a network wait"
    return proc


@pytest.mark.parametrize("option,value,needle", [
    ("--time-limit", "nan", "--time-limit must be a positive number"),
    ("--time-limit", "inf", "--time-limit must be a positive number"),
    ("--time-limit", "-inf", "--time-limit must be a positive number"),
    ("--kills", "-3", "--kills must be 0 or more"),
    ("--payload-bytes", "-5", "--payload-bytes must be 0 or more"),
    ("--zombie-pause", "-1", "--zombie-pause must be"),
    ("--zombie-pause", "nan", "--zombie-pause must be"),
    ("--zombie-pause", "inf", "--zombie-pause must be"),
    ("--commit-interval-ms", "-5", "--commit-interval-ms must be at least 1"),     # eos: it takes them
    ("--commit-interval-ms", "0", "--commit-interval-ms must be at least 1"),
    ("--transaction-timeout-ms", "0", "--transaction-timeout-ms must be at least 1"),
    ("--crash-rate", "nan", "--crash-rate must be between 0 and 1"),
    ("--messages", str(10**12), "--messages must be at most 1,000,000"),
])
def test_bad_numbers_are_rejected_before_any_stack(isolated, option, value, needle):
    experiment = "eos" if option in ("--commit-interval-ms", "--transaction-timeout-ms") else "dedupe"
    proc = run_fast(isolated, option, value, *NO_STACK, experiment=experiment)
    assert one_clear_line(proc, needle).startswith("error: ")
    assert "MemoryError" not in proc.stderr


def test_a_negative_seed_is_fine(isolated):
    proc = harness("run", "dedupe", "--seed", "-5", *NO_STACK, env=isolated)
    one_clear_line(proc, "Kafka at 127.0.0.1:1 is unreachable")


@pytest.mark.parametrize("where", ["under-a-file", "proc", "used"])
def test_unusable_out_folders_are_one_line_before_any_stack(tmp_path, isolated, where):
    (tmp_path / "f").write_text("x")
    (tmp_path / "used").mkdir()
    (tmp_path / "used" / "crash-log.jsonl").write_text("{}\n")
    out = {"under-a-file": tmp_path / "f" / "run", "proc": "/proc/harness-out-test", "used": tmp_path / "used"}[where]
    proc = run_fast(isolated, "--out", str(out), *NO_STACK)
    line = one_clear_line(proc, str(out))
    assert line.startswith("error: ")
    assert (tmp_path / "used" / "crash-log.jsonl").read_text() == "{}\n"


def test_unusable_reports_folder_is_one_line(tmp_path, isolated):
    (tmp_path / "f").write_text("x")
    proc = run_fast({**isolated, "HARNESS_REPORTS": str(tmp_path / "f" / "reports")}, *NO_STACK)
    one_clear_line(proc, "error: cannot create the folder", str(tmp_path / "f" / "reports"))


SECRET_PIECES = ("S3cret", "PWzz9", "zz9")


@pytest.mark.parametrize("dsn", [
    "postgresql://harness:S3cret PWzz9@127.0.0.1:1/db",
    "postgresql://harness:S3cret%zzPWzz9@127.0.0.1:1/db",
    "postgresql://harness:S3cret@PW/zz9?x@127.0.0.1:1/db",
    "host=127.0.0.1 port=1 password=S3cret PWzz9 dbname=d",
    "host=127.0.0.1 port=1 password='S3cret PW\\'zz9 dbname=d",
    "harness:S3cret@PWzz9@127.0.0.1:1/x",
    "postgresql:harness:S3cret PWzz9@127.0.0.1:1/x",
])
def test_a_malformed_dsn_is_reported_without_its_password(isolated, dsn):
    proc = run_fast(isolated, "--bootstrap-servers", "127.0.0.1:1", "--postgres-dsn", dsn)
    line = one_clear_line(proc, "--postgres-dsn", "is not a valid connection string")
    for piece in SECRET_PIECES:
        assert piece not in proc.stderr + proc.stdout, line


def test_a_dsn_error_after_parsing_is_scrubbed_too(monkeypatch):
    """libpq accepts `harness:S3cret@PWzz9@host` and then fails on host 'PWzz9@host': hide that piece."""
    from harness.stack import health, resolve
    from harness.core.errors import HarnessError
    monkeypatch.setattr(health, "kafka_probe", lambda *_a, **_k: None)
    with pytest.raises(HarnessError) as e:
        resolve.external("127.0.0.1:1", "postgresql://harness:S3cret@PWzz9@127.0.0.1:1/db")
    assert "is unreachable" in str(e.value)
    for piece in SECRET_PIECES:
        assert piece not in str(e.value), str(e.value)


@pytest.mark.parametrize("args, needle", [
    (["run", "offset-after", "--messages", "abc"], "Invalid value for '--messages'"),
    (["run"], "Missing argument 'EXPERIMENT'"),
    (["experiments", "--json", "extra"], "unexpected extra argument"),
    (["suite", "--experiments", ",,"], "--experiments names no experiment"),
    (["run", "offset-before", "--fresh-transactional-id"], "applies to experiments with Kafka transactions"),
    (["run", "offset-after", "--commit-interval-ms", "100"], "applies to experiments with Kafka transactions"),
    (["run", "offset-after", "--kills", "3"], "--kills applies to random kills"),
    (["run", "eos", "--zombie-pause", "2"], "--zombie-pause applies to the zombie fault"),
    (["run", "eos", "--transaction-timeout-ms", "1000000"], "--transaction-timeout-ms must be at most 900,000"),
    (["run", "offset-before", "--payload-bytes", "2000000"], "--payload-bytes must be at most 100,000"),
    (["run", "offset-after", "--amount", "99999999999999999999"], "--amount must be at most"),
    (["run", "offset-after", "--workers", "1000"], "--workers must be at most 64"),
    (["run", "dedupe", "--fault", "planned-crash:rate=0.1,rate=0.2"], "rate is given twice"),
    (["run", "offset-before", "--kill-mode", "random", "--kills", "1000000000000"], "--kills must be at most 100,000"),
    (["run", "zombie", "--zombie-pause", "1e9"], "--zombie-pause must be at most 3,600"),
])
def test_usage_and_inapplicable_options_are_one_line(isolated, args, needle):
    proc = harness(*args, env=isolated)
    assert proc.returncode == 2
    line = one_clear_line(proc, needle)
    assert len([x for x in proc.stderr.splitlines() if x.strip()]) == 1, proc.stderr
    assert line.startswith("error: ")


def test_a_broker_fault_on_a_one_broker_folder_is_refused_before_a_stack_starts(isolated):
    proc = harness("run", "eos", "--fault", "broker-kill", env=isolated)
    one_clear_line(proc, "--fault broker-kill needs the 3-broker cluster", "harness up --brokers 3")
    home = __import__("pathlib").Path(isolated["HARNESS_HOME"])
    assert not (home / "kafka").exists() and not (home / "postgres").exists(), "a stack was started first"


def test_the_audit_hint_names_a_folder_outside_the_reports_folder_by_its_path(tmp_path, monkeypatch):
    """`harness audit NAME` finds only ids under the reports folder: an --out elsewhere needs its path."""
    from harness.cli.commands.stack_options import audit_target
    monkeypatch.setenv("HARNESS_REPORTS", str(tmp_path / "reports"))
    assert audit_target(tmp_path / "reports" / "20261130T120000-suite") == "20261130T120000-suite"
    assert audit_target(tmp_path / "elsewhere" / "suite") == str(tmp_path / "elsewhere" / "suite")
    assert audit_target(tmp_path / "it's here") == "'" + str(tmp_path) + "/it'\"'\"'s here'"


def test_postgres_refusals_that_no_wait_mends_are_named_in_one_line():
    from harness.stack.health import postgres_refusal
    dsn = "postgresql://u:secret@db.example:6543/pay"
    missing = postgres_refusal('connection failed: connection to server at "10.0.0.1", port 6543 failed: '
                               'FATAL:  database "pay" does not exist', dsn)
    assert missing.startswith('PostgreSQL at db.example:6543 has no database "pay": create it first')
    assert 'CREATE DATABASE "pay"' in missing and "secret" not in missing
    refused = postgres_refusal('FATAL:  password authentication failed for user "u"', dsn)
    assert refused == 'PostgreSQL at db.example:6543 refused the password of user "u"'
    assert postgres_refusal("connection refused", dsn) is None      # a server not up yet: worth waiting for
    # a name the server quotes back is shown escaped: no terminal escape reaches the user's terminal
    odd = postgres_refusal('FATAL:  database "x\x1b[31m" does not exist', dsn)
    assert "\x1b" not in odd


def test_up_says_each_note_once(monkeypatch):
    """A note said while the stack starts (a port replaced) was said again from the stack's notes."""
    from click.testing import CliRunner
    import harness.stack.resolve as resolve
    from harness.cli.commands.up import up
    from harness.stack.stack import Stack

    def get_stack(*args, log=print, **kwargs):
        log("kafka: port 19092 is taken on 127.0.0.1; using 48029")
        st = Stack(kind="external", bootstrap_servers="127.0.0.1:1", postgres_dsn="postgresql://u@127.0.0.1:2/db",
                   owned=False)
        st.notes = ["kafka: port 19092 is taken on 127.0.0.1; using 48029", "reused the running stack"]
        return st, None
    monkeypatch.setattr(resolve, "get_stack", get_stack)
    out = CliRunner().invoke(up, [], standalone_mode=False).output
    assert out.count("is taken on 127.0.0.1") == 1 and out.count("reused the running stack") == 1


def test_up_says_a_replaced_port_once_when_its_port_is_taken(tmp_path, monkeypatch):
    """`harness up` through the local stack's own start, with the Kafka port it recorded held by a socket of
    this test: the line saying the port is taken and another used appears once. Only the services' start
    and wait are faked (no Kafka, no PostgreSQL, no jars)."""
    import socket
    from pathlib import Path
    from click.testing import CliRunner
    from harness.cli.commands.up import up
    from harness.stack import health, local_kafka, local_postgres, local_record, local_services, marker, ports
    state = tmp_path / "state"
    for k, v in {"HARNESS_HOME": str(state), "HARNESS_CACHE": str(tmp_path / "cache"),
                 "HARNESS_BOOTSTRAP_SERVERS": "", "HARNESS_POSTGRES_DSN": ""}.items():
        monkeypatch.setenv(k, v)
    monkeypatch.setattr(local_services, "_tools", lambda log, release: (Path("/absent/bin"), Path("/absent/lib")))
    monkeypatch.setattr(local_kafka.LocalKafka, "start", lambda self, *a, **k: None)
    monkeypatch.setattr(local_postgres.LocalPostgres, "start", lambda self, *a, **k: None)
    monkeypatch.setattr(local_postgres.LocalPostgres, "ensure_roles", lambda self, port: [])
    monkeypatch.setattr(local_services, "_wait_ready", lambda *a, **k: None)
    monkeypatch.setattr(health, "postgres_version", lambda dsn: "15")
    with socket.socket() as held:
        held.bind((ports.HOST, 0))
        held.listen(1)
        kafka_port = held.getsockname()[1]
        state.mkdir()
        marker.mark(state, in_the_way=[])
        local_record.write_record(state, {"kind": "local", "kafka_port": kafka_port, "controller_port": ports.any_free(),
                                          "postgres_port": ports.any_free()})
        result = CliRunner().invoke(up, [])
    assert result.exit_code == 0, result.output
    said = [line for line in result.output.splitlines() if f"port {kafka_port} is taken" in line]
    assert len(said) == 1, result.output


@pytest.mark.parametrize("args, near", [
    (["run", "offset-befor"], "did you mean 'offset-before'?"),
    (["run", "offset-before", "--fault", "planed-crash"], "did you mean 'planned-crash'?"),
    (["suite", "--experiments", "eos,eos-boundry"], "did you mean 'eos-boundary'?"),
])
def test_a_mistyped_experiment_or_fault_name_gets_a_did_you_mean(args, near):
    proc = harness(*args)
    assert proc.returncode == 2 and near in proc.stderr and len(proc.stderr.strip().splitlines()) == 1, proc.stderr


def test_auditing_a_suite_none_of_whose_runs_wrote_a_report_says_so(tmp_path, capsys, monkeypatch):
    """A suite stopped while its runs set up: `harness audit` said 'the report and the recount agree (0 runs)',
    exit 0, and the suite's last lines suggested that audit."""
    from click.testing import CliRunner
    from harness.cli.commands.audit import audit
    from harness.cli.commands.stack_options import last_lines
    suite = tmp_path / "suite"
    suite.mkdir()
    (suite / "suite.json").write_text("{}")
    result = CliRunner().invoke(audit, [str(suite)])
    assert result.exit_code != 0 and "agree" not in result.output
    assert "has no run report to recount: none of its runs wrote one" in str(result.exception or result.output)
    last_lines(suite, "suite.html", [])
    err = capsys.readouterr().err
    assert "report: " in err and "harness audit" not in err
    (suite / "eos").mkdir()
    (suite / "eos" / "report.json").write_text("{}")
    last_lines(suite, "suite.html", [])
    assert "recount it from the stack: `harness audit" in capsys.readouterr().err
