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
    assert elapsed < 15, f"took {elapsed:.1f} s"
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
    (["eos", "--kill-point", "after-commit-before-effect"], ["for eos", "after-send-offsets-before-txn-commit"]),
    (["zombie", "--kill-point", "any"], ["applies to planned crashes"]),
    (["dedupe", "--fault", "nope"], ["unknown --fault 'nope'", "random-kill"]),
    (["dedupe", "--fault", "zombie"], ["--fault zombie needs a Python worker", "dedupe has none"]),
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
