"""A hostile user's files: links at the names the harness writes, folders others can write, forged pid
records, a folder that was never a state folder, full disks and odd config files.

Everything here runs on the real file system (a small tmpfs for the full disk) and, where the case is
a command, through the real CLI; the decoy processes are real `sleep`s, killed at the end.
"""

import contextlib
import json
import os
import pwd
import resource
import signal
import stat
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from harness.core import procs, safefile
from harness.reporting.run_report import RunReport
from harness.reporting.writer import write_all
from harness.stack import leases, local_record, pidrecord
from harness.stack.local_kafka import LocalKafka
from harness.stack.local_postgres import LocalPostgres
from tests.conftest import ROOT, harness
from tests.unit.sample_report import sample

VICTIM_TEXT = "root's own file\n"
NOBODY = pwd.getpwnam("nobody").pw_uid


@pytest.fixture
def victim(tmp_path):
    """A file of ours outside every folder the harness writes into: it must never change."""
    d = tmp_path / "elsewhere"
    d.mkdir()
    f = d / "precious.txt"
    f.write_text(VICTIM_TEXT)
    yield f
    assert f.read_text() == VICTIM_TEXT, "the harness wrote through a planted link"


def one_error_line(proc, code=2):
    assert proc.returncode == code, (proc.returncode, proc.stdout, proc.stderr)
    assert "Traceback" not in proc.stderr, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), proc.stderr
    return lines[0]


def temps_in(folder: Path) -> list[str]:
    return sorted(n for n in os.listdir(folder) if ".tmp" in n)


def run_folder(path: Path, data: dict | None = None) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    (path / "report.json").write_text(json.dumps(data or sample()))
    return path


# -- links at the names the harness writes -------------------------------------------------------

@pytest.mark.parametrize("name", [".report.md.tmp", ".report.html.tmp", ".report.json.tmp"])
def test_harness_report_does_not_write_through_a_link_at_a_temporary_name(tmp_path, victim, name):
    """The audit's case: a link at DIR/.report.md.tmp made `harness report DIR` overwrite its target."""
    folder = run_folder(tmp_path / "run")
    os.symlink(victim, folder / name)
    proc = harness("report", str(folder))
    assert proc.returncode == 0, proc.stderr
    assert "offset-after" in (folder / "report.md").read_text()
    assert not (folder / "report.md").is_symlink() and not (folder / "report.html").is_symlink()


def test_a_run_does_not_write_through_links_planted_in_its_folder(tmp_path, victim):
    """The `--out` case: names planted while a run goes (every temporary name it used to write)."""
    folder = tmp_path / "out"
    folder.mkdir()
    for name in ("report.json", "report.md", "report.html"):
        os.symlink(victim, folder / f".{name}.tmp")
    write_all(RunReport(sample()), folder)
    assert json.loads((folder / "report.json").read_text())["experiment"] == "offset-after"


def test_a_link_at_the_target_name_is_replaced_not_followed(tmp_path, victim):
    os.symlink(victim, tmp_path / "report.md")
    safefile.write_text(tmp_path / "report.md", "ours\n")
    assert not (tmp_path / "report.md").is_symlink() and (tmp_path / "report.md").read_text() == "ours\n"


def test_harness_up_does_not_write_through_a_link_at_user_hold_json(tmp_path, victim):
    """The audit's case: a link at $HARNESS_HOME/user-hold.json made `harness up` write into its target."""
    os.symlink(victim, tmp_path / "user-hold.json")
    leases.hold(tmp_path)
    assert leases.held(tmp_path) and not (tmp_path / "user-hold.json").is_symlink()
    assert json.loads((tmp_path / "user-hold.json").read_text())["pid"] == os.getpid()


def test_state_files_are_written_through_no_link(tmp_path, victim):
    """stack.json, a pid record and client.properties, with links at their names and at the temporary
    names the harness used to write them through (`<name>.tmp<pid>`, `.<name>.tmp<pid>`)."""
    kafka = LocalKafka(tmp_path)
    kafka.home.mkdir()
    pid = os.getpid()
    for path in (tmp_path / "stack.json", tmp_path / f"stack.json.tmp{pid}", kafka.pidfile,
                 kafka.home / f"kafka.pid.tmp{pid}", tmp_path / f".client.properties.tmp{pid}"):
        os.symlink(victim, path)
    local_record.write_record(tmp_path, {"kind": "local"})
    assert json.loads((tmp_path / "stack.json").read_text()) == {"kind": "local"}
    pidrecord.write(kafka.pidfile, pidrecord.PidRecord(pid=4321, start_time=1, marks=kafka.marks(), group=True))
    assert not kafka.pidfile.is_symlink()
    kafka.scram_password()
    assert stat.S_IMODE(os.stat(kafka.client_file).st_mode) == 0o600


def test_a_failed_write_leaves_the_old_file_and_no_temporary_one(tmp_path):
    (tmp_path / "f").write_text("old\n")

    class Boom(Exception):
        pass

    def failing_fsync(fd):
        raise Boom
    real = os.fsync
    os.fsync = failing_fsync
    try:
        with pytest.raises(Boom):
            safefile.write_text(tmp_path / "f", "new\n")
    finally:
        os.fsync = real
    assert (tmp_path / "f").read_text() == "old\n" and temps_in(tmp_path) == []


def test_secrets_are_private_from_the_first_byte_whatever_the_umask(tmp_path):
    old = os.umask(0)
    try:
        safefile.write_text(tmp_path / "pw", "s3cret\n", safefile.PRIVATE)
        safefile.write_text(tmp_path / "pub", "x\n")
    finally:
        os.umask(old)
    assert stat.S_IMODE(os.stat(tmp_path / "pw").st_mode) == 0o600
    assert stat.S_IMODE(os.stat(tmp_path / "pub").st_mode) == 0o644


# -- folders others can write in -----------------------------------------------------------------

def world_writable(path: Path, sticky: bool = False) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    path.chmod(0o1777 if sticky else 0o777)
    return path


@pytest.mark.parametrize("sticky", [False, True])
def test_a_world_writable_state_folder_is_refused(tmp_path, sticky):
    home = world_writable(tmp_path / "state", sticky)
    for args in (["status"], ["down"], ["up"]):
        line = one_error_line(harness(*args, env={"HARNESS_HOME": str(home)}, timeout=60))
        assert "state folder" in line and "anyone may write" in line, line
    assert os.listdir(home) == []


def test_a_state_folder_of_another_user_is_refused(tmp_path):
    home = tmp_path / "state"
    home.mkdir()
    os.chown(home, NOBODY, NOBODY)
    line = one_error_line(harness("down", env={"HARNESS_HOME": str(home)}, timeout=60))
    assert "another user" in line


def test_a_world_writable_out_folder_is_refused_before_anything_starts(tmp_path):
    out = world_writable(tmp_path / "out")
    # An unreachable external stack: should the folder be accepted, the run fails on something else.
    env = {"HARNESS_HOME": str(tmp_path / "state"), "HARNESS_BOOTSTRAP_SERVERS": "127.0.0.1:9",
           "HARNESS_POSTGRES_DSN": "postgresql://u@127.0.0.1:9/db"}
    line = one_error_line(harness("run", "offset-after", "--messages", "10", "--out", str(out), env=env,
                                  timeout=120))
    assert "run folder" in line and "anyone may write" in line, line
    assert os.listdir(out) == []


def test_harness_report_refuses_a_world_writable_folder(tmp_path):
    folder = run_folder(tmp_path / "run")
    folder.chmod(0o777)
    line = one_error_line(harness("report", str(folder)))
    assert "anyone may write" in line and not (folder / "report.md").exists()


def test_folders_the_harness_makes_have_the_mode_it_chose(tmp_path):
    old = os.umask(0)
    try:
        safefile.make_folder(tmp_path / "a" / "b", 0o700)
    finally:
        os.umask(old)
    assert stat.S_IMODE(os.stat(tmp_path / "a").st_mode) == 0o700
    assert stat.S_IMODE(os.stat(tmp_path / "a" / "b").st_mode) == 0o700


# -- `latest` ------------------------------------------------------------------------------------

def test_a_folder_merely_named_like_a_run_id_is_not_latest(tmp_path):
    from harness.reporting.compare_targets import find_folder
    from harness.core.rundir import claim_run_dir
    root = tmp_path / "reports"
    ours = claim_run_dir(root / "20261129T183000.000-offset-after-000001")
    run_folder(ours)
    run_folder(root / "20991231T235959.999-offset-after-666666")      # planted: newer, not ours
    assert find_folder("latest", root) == ours
    planted_owner = root / "20991231T235959.999-offset-after-666666" / ".run-owner"
    planted_owner.write_text("{}")
    os.chown(planted_owner, NOBODY, NOBODY)                              # an owner file of someone else
    assert find_folder("latest", root) == ours


# -- forged pid records --------------------------------------------------------------------------

@pytest.fixture
def sleeper():
    """Start `sleep N` decoys; every one must still be alive at the end (then it is killed)."""
    started = []

    def start(arg: str, new_session: bool = False):
        p = subprocess.Popen(["sleep", arg], start_new_session=new_session)
        deadline = time.monotonic() + 5
        while procs.argv(p.pid) != ["sleep", arg] and time.monotonic() < deadline:
            time.sleep(0.01)
        started.append(p)
        return p
    yield start
    alive = [p.poll() is None for p in started]
    for p in started:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL) if procs.group_leader(p.pid) else p.kill()
        p.wait(10)
    assert all(alive), "harness down killed a process named in a forged pid record"


def forged(pid: int, marks: list[str], group: bool = False) -> str:
    return json.dumps({"pid": pid, "start_time": procs.start_time(pid), "marks": marks, "group": group})


def test_harness_down_does_not_take_marks_from_a_forged_postgres_record(tmp_path, sleeper):
    """The audit's case: {"pid": P, "start_time": S, "marks": ["3002"]} and a matching postmaster.pid
    made `harness down` kill root's `sleep 3002`."""
    home = tmp_path / "state"
    pg = LocalPostgres(home)
    pg.data.mkdir(parents=True)
    victim = sleeper("3002")
    pg.pidfile.write_text(forged(victim.pid, ["3002"]))
    (pg.data / "postmaster.pid").write_text(f"{victim.pid}\n{pg.data}\n0\n15432\n")
    proc = harness("down", env={"HARNESS_HOME": str(home)}, timeout=120)
    time.sleep(0.3)
    assert victim.poll() is None and proc.returncode == 0, proc.stderr


def test_harness_down_does_not_take_marks_or_group_from_a_forged_kafka_record(tmp_path, sleeper):
    """The same with kafka/kafka.pid and "group": true (a whole process group would have been killed)."""
    home = tmp_path / "state"
    kafka = LocalKafka(home)
    kafka.home.mkdir(parents=True)
    victim = sleeper("3003", new_session=True)
    kafka.pidfile.write_text(forged(victim.pid, ["3003"], group=True))
    proc = harness("down", env={"HARNESS_HOME": str(home)}, timeout=120)
    time.sleep(0.3)
    assert victim.poll() is None and proc.returncode == 0, proc.stderr


def test_the_marks_and_group_of_a_record_are_the_services_own(tmp_path):
    kafka, pg = LocalKafka(tmp_path), LocalPostgres(tmp_path)
    kafka.home.mkdir()
    pg.home.mkdir()
    kafka.pidfile.write_text(json.dumps({"pid": 4321, "start_time": 5, "marks": ["3002"], "group": False}))
    pg.pidfile.write_text(json.dumps({"pid": 4321, "start_time": 5, "marks": ["3002"], "group": True}))
    assert kafka.record().marks == ["kafka.Kafka", str(kafka.props)] and kafka.record().group is True
    assert pg.record().marks == [str(pg.data)] and pg.record().group is False


@pytest.mark.parametrize("how", ["another user's", "writable by others", "a link", "a hard link"])
def test_a_record_the_harness_did_not_write_is_no_record(tmp_path, how):
    """A record with every right value, a real process with our marks: trusted only as a file of ours."""
    kafka = LocalKafka(tmp_path)
    kafka.home.mkdir()
    p = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)", *kafka.marks()],
                         start_new_session=True)
    try:
        deadline = time.monotonic() + 10
        while str(kafka.props) not in procs.argv(p.pid) and time.monotonic() < deadline:
            time.sleep(0.01)
        text = forged(p.pid, kafka.marks(), group=True)
        if how == "a link" or how == "a hard link":
            real = tmp_path / "elsewhere.json"
            real.write_text(text)
            real.chmod(0o644)
            (os.symlink if how == "a link" else os.link)(real, kafka.pidfile)
        else:
            kafka.pidfile.write_text(text)
            kafka.pidfile.chmod(0o644)
            if how == "another user's":
                os.chown(kafka.pidfile, NOBODY, NOBODY)
            else:
                kafka.pidfile.chmod(0o666)
        assert kafka.running() is None
        stopped, note = kafka.stop()
        assert not stopped and "did not write it" in note and p.poll() is None
    finally:
        p.kill()
        p.wait()


def test_a_record_of_ours_is_trusted(tmp_path):
    kafka = LocalKafka(tmp_path)
    kafka.home.mkdir()
    p = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)", *kafka.marks()],
                         start_new_session=True)
    try:
        deadline = time.monotonic() + 10
        while str(kafka.props) not in procs.argv(p.pid) and time.monotonic() < deadline:
            time.sleep(0.01)
        pidrecord.write(kafka.pidfile, pidrecord.capture(p.pid, kafka.marks(), group=True, ports={}, owner="user"))
        assert kafka.running() is not None
    finally:
        p.kill()
        p.wait()


# -- down --purge on a folder that was never a state folder --------------------------------------

def test_down_purge_on_a_folder_the_harness_never_made_removes_nothing(tmp_path):
    """The audit's case: it removed kafka/, postgres/, pgpass and stack.json of a folder it never made."""
    home = tmp_path / "project"
    for d in ("kafka/data", "postgres/data"):
        (home / d).mkdir(parents=True)
        (home / d / "keep.txt").write_text("theirs\n")
    for f in ("pgpass", "stack.json", "postgres.password", "client.properties"):
        (home / f).write_text("theirs\n")
    before = sorted(str(p.relative_to(home)) for p in home.rglob("*"))
    line = one_error_line(harness("down", "--purge", env={"HARNESS_HOME": str(home)}, timeout=120))
    assert "refusing to purge" in line and ".harness-state" in line
    assert sorted(str(p.relative_to(home)) for p in home.rglob("*")) == before


def test_down_purge_on_a_state_folder_with_a_planted_marker_removes_nothing(tmp_path):
    home = tmp_path / "project"
    (home / "kafka").mkdir(parents=True)
    (home / ".harness-state").write_text("{}")
    os.chown(home / ".harness-state", NOBODY, NOBODY)
    one_error_line(harness("down", "--purge", env={"HARNESS_HOME": str(home)}, timeout=120))
    assert (home / "kafka").is_dir()


# -- full disks ----------------------------------------------------------------------------------

@contextlib.contextmanager
def small_tmpfs(size="256k"):
    """A tmpfs of `size` (we run as root), unmounted at the end whatever happens."""
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    d = Path(tempfile.mkdtemp(prefix="harness-full-"))
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size},mode=0755", "tmpfs", str(d)], check=True)
    try:
        yield d
    finally:
        subprocess.run(["umount", "-l", str(d)], check=False)
        os.rmdir(d)


def fill(folder: Path) -> None:
    """Fill the file system under `folder` to the last byte."""
    with open(folder / "filler", "wb", buffering=0) as f:
        try:
            while True:
                f.write(b"\0" * 4096)
                f.flush()
        except OSError:
            pass


def test_harness_report_on_a_full_disk_says_so_exits_3_and_leaves_no_temporary_file():
    with small_tmpfs() as fs:
        folder = run_folder(fs / "run")
        fill(fs)
        line = one_error_line(harness("report", str(folder)), code=3)
        assert "No space left" in line, line
        assert temps_in(folder) == [] and temps_in(fs) == []


def test_a_run_with_out_on_a_full_file_system_is_refused_before_anything_starts(tmp_path):
    """The audit's case: `--out` on a full file system ran, wrote no report, left .report.json.tmp, exit 1."""
    env = {"HARNESS_HOME": str(tmp_path / "state"), "HARNESS_BOOTSTRAP_SERVERS": "127.0.0.1:9",
           "HARNESS_POSTGRES_DSN": "postgresql://u@127.0.0.1:9/db"}
    with small_tmpfs() as fs:
        fill(fs)
        line = one_error_line(harness("run", "offset-after", "--messages", "10", "--out", str(fs / "run"),
                                      env=env, timeout=120))
        assert "no room for a run" in line, line
        assert sorted(os.listdir(fs)) == ["filler"]


@pytest.mark.parametrize("how", ["full", "read-only"])
def test_a_run_whose_report_cannot_be_written_writes_it_in_the_state_folder(tmp_path, monkeypatch, how):
    """A full --out (ENOSPC) or one gone read-only (EROFS): the whole report goes to
    $HARNESS_HOME/unwritten-reports/<run-id>/, and the error says why and where."""
    from harness.core.errors import ReportNotWritten
    from harness.reporting.writer import write_or_keep
    monkeypatch.setenv("HARNESS_HOME", str(tmp_path / "state"))
    with small_tmpfs() as fs:
        (fs / "run").mkdir()
        if how == "full":
            fill(fs)
        else:
            subprocess.run(["mount", "-o", "remount,ro", str(fs)], check=True)
        with pytest.raises(ReportNotWritten) as e:
            write_or_keep(RunReport(sample()), fs / "run")
        assert temps_in(fs / "run") == []
    kept = tmp_path / "state" / "unwritten-reports" / sample()["run_id"]
    assert e.value.kept == kept
    assert e.value.exit_status == 3 and str(kept) in str(e.value) and "\n" not in str(e.value)
    assert ("No space left" if how == "full" else "Read-only file system") in str(e.value)
    assert json.loads((kept / "report.json").read_text()) == sample()
    assert (kept / "report.md").stat().st_size and (kept / "report.html").stat().st_size


def test_a_full_state_folder_is_one_line_and_leaves_no_stale_temporary_file():
    """The audit's case: a full state folder left a stale stack.json.tmpPID behind."""
    with small_tmpfs() as fs:
        home = fs / "state"
        home.mkdir()
        (home / ".harness-state").write_text("{}")
        fill(fs)
        with pytest.raises(Exception) as e:
            local_record.write_record(home, {"kind": "local", "notes": "x" * 100_000})
        assert "No space left" in str(e.value)
        assert temps_in(home) == []
        proc = harness("up", env={"HARNESS_HOME": str(home)}, timeout=300)
        # (on a machine where the default release's jars were never resolved, `up` says first that it does so)
        proc.stderr = "\n".join(x for x in proc.stderr.splitlines() if not x.endswith("(first time only)..."))
        one_error_line(proc)
        assert temps_in(home) == []


# -- odd config files ----------------------------------------------------------------------------

def _limited_memory():
    resource.setrlimit(resource.RLIMIT_AS, (4 << 30, 4 << 30))     # the old code read /dev/zero until this


def config_file_run(path: str, home: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "harness.cli", "status", "--kafka-config-file", path],
                          capture_output=True, text=True, cwd=ROOT, timeout=60, preexec_fn=_limited_memory,
                          env={**os.environ, "HARNESS_HOME": str(home)})


def test_kafka_config_file_dev_zero_is_refused_in_one_line(tmp_path):
    line = one_error_line(config_file_run("/dev/zero", tmp_path / "home"))
    assert "not a regular file" in line


def test_kafka_config_file_fifo_is_refused_without_hanging(tmp_path):
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    line = one_error_line(config_file_run(str(fifo), tmp_path / "home"))
    assert "not a regular file" in line


def test_kafka_config_file_too_large_is_refused(tmp_path):
    big = tmp_path / "big.properties"
    big.write_text("# padding\n" * 200_000)
    line = one_error_line(config_file_run(str(big), tmp_path / "home"))
    assert "larger than" in line
