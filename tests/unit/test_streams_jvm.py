"""The Kafka Streams worker's launch: when its class-data archive must be retrained, and its command line."""

import os
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

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


def _command(start):
    return streams_jvm.command(Path("/x/eos-streams.jar"), SimpleNamespace(name="w0", attempt=3),
                               bootstrap="127.0.0.1:9092", input_topic="in", output_topic="out",
                               application_id="app", state_dir=Path("/s"), crash_plan=Path("/p"),
                               crash_log=Path("/c"), commit_interval_ms=None, ledger_table=None,
                               dsn="postgresql://u@127.0.0.1:5432/db", start=start)


def test_command_maps_the_archive_before_the_jar_only_when_there_is_one():
    cds = streams_jvm.WorkerStart("java", streams_jvm.CDS, Path("/x/eos-streams.jsa"), "")
    with_archive = _command(cds)
    jar = with_archive.index("-jar")
    assert "-XX:SharedArchiveFile=/x/eos-streams.jsa" in with_archive[:jar]
    assert with_archive[jar + 1] == "/x/eos-streams.jar"
    without = _command(None)
    assert not any("SharedArchiveFile" in a for a in without)
    assert [a for a in with_archive if "SharedArchiveFile" not in a] == without


# The JVM settings every measurement of streams-worker/README.md ("Timings") and docs/numbers.md was made with.
MEASURED_JVM_OPTIONS = ["-XX:TieredStopAtLevel=1", "-XX:CompileThresholdScaling=5", "-XX:+UseSerialGC", "-Xmx512m",
                        "-XX:-UsePerfData"]


def test_a_worker_jvm_starts_with_the_measured_settings_and_its_archive_and_nothing_else():
    """A setting added to (or dropped from) the workers' JVMs without measuring it again fails here: the
    documented restart figures would no longer be of the JVM that runs."""
    archive = Path("/x/eos-streams.jsa")
    cmd = _command(streams_jvm.WorkerStart("java", streams_jvm.CDS, archive, ""))
    assert cmd[0] == "java"
    assert cmd[1:cmd.index("-jar")] == [*MEASURED_JVM_OPTIONS, f"-XX:SharedArchiveFile={archive}",
                                        "-Dharness.worker=true"]


def test_the_warm_spare_is_an_eos_streams_option_off_by_default():
    from harness.experiments.kafka_streams import EOS_STREAMS, STREAMS_SPARE
    assert STREAMS_SPARE in EOS_STREAMS.options
    assert (STREAMS_SPARE.default, STREAMS_SPARE.choices) == ("off", ("off", "on"))


def test_an_aot_start_runs_the_newer_java_with_its_cache():
    java = "/usr/lib/jvm/jdk-25/bin/java"
    aot = streams_jvm.WorkerStart(java, streams_jvm.aot_kind(java), Path("/x/eos-streams.aot"), "")
    cmd = _command(aot)
    assert cmd[0] == java and "-XX:AOTCache=/x/eos-streams.aot" in cmd[:cmd.index("-jar")]
    assert not any("SharedArchiveFile" in a for a in cmd)


def _jdk(homes: Path, name: str, version: str, java=True) -> Path:
    home = homes / name
    (home / "bin").mkdir(parents=True)
    (home / "release").write_text(f'IMPLEMENTOR="x"\nJAVA_VERSION="{version}"\n')
    if java:
        (home / "bin" / "java").write_text("#!/bin/sh\n")
        (home / "bin" / "java").chmod(0o755)
    return home / "bin" / "java"


def test_the_aot_java_is_the_newest_jdk_of_release_25_or_later(tmp_path, monkeypatch):
    monkeypatch.delenv("JAVA_HOME", raising=False)
    _jdk(tmp_path, "java-17-openjdk-amd64", "17.0.13")
    assert streams_jvm.aot_java(tmp_path) is None
    j25 = _jdk(tmp_path, "temurin-25-jdk-amd64", "25.0.3")
    _jdk(tmp_path, "jdk-26-broken", "26", java=False)          # no java in it: not a choice
    assert streams_jvm.aot_java(tmp_path) == str(j25)
    j26 = _jdk(tmp_path, "jdk-26", "26.0.1")
    assert streams_jvm.aot_java(tmp_path) == str(j26)


def test_asking_for_aot_without_a_jdk_25_is_one_clear_error(tmp_path, monkeypatch):
    import pytest
    from harness.core.errors import HarnessError
    monkeypatch.setattr(streams_jvm, "aot_java", lambda: None)
    with pytest.raises(HarnessError, match="needs a JDK 25 or later"):
        streams_jvm.worker_start(tmp_path / "w.jar", "aot", log=lambda _: None)
    plain = streams_jvm.worker_start(tmp_path / "w.jar", "plain", log=lambda _: None)
    assert (plain.java, plain.flags()) == ("java", [])


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


def _sources(root: Path, java: str) -> Path:
    (root / "src" / "main" / "java").mkdir(parents=True)
    (root / "pom.xml").write_text("<project/>")
    (root / "src" / "main" / "java" / "A.java").write_text(java)
    return root


def test_the_module_is_copied_into_a_cache_folder_named_by_its_sources(tmp_path, monkeypatch):
    src = _sources(tmp_path / "pkg", "class A {}")
    monkeypatch.setattr(streams_jvm, "SOURCES", src)
    monkeypatch.setenv("HARNESS_CACHE", str(tmp_path / "cache"))
    folder = streams_jvm.build_folder()
    assert folder.parent == tmp_path / "cache" / "streams-worker"
    streams_jvm._stage(folder)
    assert (folder / "src" / "main" / "java" / "A.java").read_text() == "class A {}"
    assert (folder / "pom.xml").read_text() == "<project/>"
    assert [p.name for p in folder.parent.iterdir()] == [folder.name], "a staging copy was left behind"
    assert streams_jvm.build_folder() == folder
    (src / "src" / "main" / "java" / "A.java").write_text("class A { int x; }")
    assert streams_jvm.build_folder() != folder, "edited sources must be built in a folder of their own"


def test_build_folders_of_other_sources_go_once_unused_for_a_week(tmp_path):
    base = tmp_path / "streams-worker"
    current, recent, old = (base / n for n in ("aaaa", "bbbb", "cccc"))
    for folder in (current, recent, old):
        (folder / "target").mkdir(parents=True)
    week_ago = time.time() - streams_jvm.BUILD_KEEP_S - 60
    os.utime(old, (week_ago, week_ago))
    os.utime(current, (week_ago, week_ago))
    streams_jvm._prune(current)
    assert sorted(p.name for p in base.iterdir()) == ["aaaa", "bbbb"]


def test_the_streams_transactional_ids_come_from_the_process_id_it_kept_and_nothing_else(tmp_path):
    """Kafka Streams names its EOS producer <application.id>-<process id>-<thread>; the process id is read from
    the worker's own file, which is untrusted: anything but a UUID in a small JSON file is refused."""
    from harness.core.errors import HarnessError
    from harness.experiments.streams_jvm import PROCESS_FILE, PROCESS_FILE_MAX, transactional_ids
    folder = tmp_path / "app-1"
    folder.mkdir()
    f = folder / PROCESS_FILE
    f.write_text('{"processId": "0f8fad5b-d9cb-469f-a165-70867728950e", "newProcessId": "x"}')
    assert transactional_ids(tmp_path, "app-1") == ["app-1-0f8fad5b-d9cb-469f-a165-70867728950e-1"]
    for bad in ('{"processId": "0f8fad5b-d9cb-469f-a165-70867728950e,other"}', '{"processId": 7}', "[1]", "not json",
                '{"processId": "0f8fad5b-d9cb-469f-a165-70867728950e"}' + " " * PROCESS_FILE_MAX):
        f.write_text(bad)
        with pytest.raises(HarnessError, match="no process id"):
            transactional_ids(tmp_path, "app-1")
    f.unlink()
    with pytest.raises(HarnessError, match="no process id"):
        transactional_ids(tmp_path, "app-1")
