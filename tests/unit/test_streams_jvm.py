"""The Kafka Streams worker's launch: when its class-data archive must be retrained, and its command line."""

import os
from pathlib import Path
from types import SimpleNamespace

from harness.experiments import streams_jvm


def _touch(path: Path, mtime: float) -> Path:
    path.write_bytes(b"x")
    os.utime(path, (mtime, mtime))
    return path


def test_archive_missing_is_stale(tmp_path):
    jar = _touch(tmp_path / "w.jar", 1000)
    assert streams_jvm.archive_stale(tmp_path / "w.jsa", jar)


def test_archive_older_than_jar_is_stale(tmp_path):
    jar = _touch(tmp_path / "w.jar", 2000)
    assert streams_jvm.archive_stale(_touch(tmp_path / "w.jsa", 1999), jar)


def test_archive_as_new_as_jar_or_newer_is_fresh(tmp_path):
    jar = _touch(tmp_path / "w.jar", 2000)
    assert not streams_jvm.archive_stale(_touch(tmp_path / "w.jsa", 2000), jar)
    assert not streams_jvm.archive_stale(_touch(tmp_path / "w.jsa", 3000), jar)


def _command(archive):
    return streams_jvm.command(Path("/x/eos-streams.jar"), SimpleNamespace(name="w0", attempt=3),
                               bootstrap="127.0.0.1:9092", input_topic="in", output_topic="out",
                               application_id="app", state_dir=Path("/s"), crash_plan=Path("/p"),
                               crash_log=Path("/c"), commit_interval_ms=None, ledger_table=None,
                               dsn="postgresql://u@127.0.0.1:5432/db", archive=archive)


def test_command_maps_the_archive_before_the_jar_only_when_there_is_one():
    with_archive = _command(Path("/x/eos-streams.jsa"))
    jar = with_archive.index("-jar")
    assert "-XX:SharedArchiveFile=/x/eos-streams.jsa" in with_archive[:jar]
    assert with_archive[jar + 1] == "/x/eos-streams.jar"
    without = _command(None)
    assert not any("SharedArchiveFile" in a for a in without)
    assert [a for a in with_archive if "SharedArchiveFile" not in a] == without


def test_a_harness_killed_while_it_probes_the_archive_leaves_nothing_in_the_temporary_folder(tmp_path):
    """The probe's working folder (where a crashing JVM writes hs_err) sits beside the jar: a harness SIGKILLed
    mid-probe, which cannot remove it, leaves it in the build folder, not in /tmp for ever."""
    import signal
    import subprocess
    import sys
    import tempfile
    import time
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "java").write_text("#!/bin/sh\nexec sleep 30\n")          # a JVM that takes its time
    (bin_dir / "java").chmod(0o755)
    jar = _touch(tmp_path / "w.jar", 1000)
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    code = f"from pathlib import Path; from harness.experiments import streams_jvm; " \
           f"streams_jvm._probe(Path({str(tmp_path / 'w.jsa')!r}), Path({str(jar)!r}))"
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "TMPDIR": str(tmp)}
    proc = subprocess.Popen([sys.executable, "-c", code], env=env, cwd=Path(__file__).resolve().parents[2])
    try:
        deadline = time.time() + 30
        while time.time() < deadline and not list(tmp_path.glob("cds-work-probe-*")):
            time.sleep(0.05)
        assert list(tmp_path.glob("cds-work-probe-*")), "the probe never started"
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    assert list(tmp.iterdir()) == [] and tempfile.gettempdir() != str(tmp)


def test_working_folders_a_killed_harness_left_are_cleared_later_and_a_fresh_one_is_kept(tmp_path):
    old = tmp_path / f"{streams_jvm.WORK_PREFIX}probe-old"
    fresh = tmp_path / f"{streams_jvm.WORK_PREFIX}probe-fresh"
    other = tmp_path / "not-ours"
    for d in (old, fresh, other):
        d.mkdir()
    long_ago = 1000.0
    os.utime(old, (long_ago, long_ago))
    os.utime(other, (long_ago, long_ago))
    streams_jvm._clear_stale(tmp_path)
    assert not old.exists() and fresh.exists() and other.exists()


def test_a_build_folder_it_cannot_write_in_makes_the_probe_fail_not_the_run(tmp_path):
    jar = _touch(tmp_path / "w.jar", 1000)
    assert streams_jvm._probe(tmp_path / "w.jsa", tmp_path / "missing-folder" / "w.jar") is False
    assert streams_jvm._probe(tmp_path / "w.jsa", jar) is False     # no archive there: refused, no traceback
