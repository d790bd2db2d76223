"""A damaged or unusable state folder: one clear line or an honest answer, never a traceback."""

import json

import pytest

from harness.stack import local_record
from harness.stack.local_kafka import LocalKafka
from harness.stack.local_postgres import LocalPostgres
from tests.conftest import harness

DAMAGED = ["", "{", '{"kind": "local", "kafka_po', "[]", "null", '"local"', '{"kind": "local"}',
           '{"kind": "local", "kafka_port": "x", "controller_port": null, "postgres_port": 70000}']


def env_for(home) -> dict:
    return {"HARNESS_HOME": str(home), "HARNESS_BOOTSTRAP_SERVERS": "", "HARNESS_POSTGRES_DSN": "",
            "HARNESS_STACK": "local"}


def no_traceback(proc):
    assert "Traceback" not in proc.stdout + proc.stderr, proc.stderr
    assert "KeyError" not in proc.stdout + proc.stderr


@pytest.mark.parametrize("text", DAMAGED)
def test_damaged_stack_json_is_read_as_nothing_or_reported(tmp_path, text, monkeypatch):
    (tmp_path / "stack.json").write_text(text)
    rec = local_record.read_record(tmp_path)
    assert rec is None or isinstance(rec, dict)
    kafka, pg = LocalKafka(tmp_path), LocalPostgres(tmp_path)
    ports = local_record.known_ports(tmp_path, kafka, pg)
    assert all(isinstance(v, int) and 0 < v < 65536 for v in ports.values())
    assert local_record.record_damage(tmp_path, services_run=False) is not None


def test_ports_of_running_services_come_from_their_pid_records(tmp_path, monkeypatch):
    from harness.stack import pidrecord
    (tmp_path / "stack.json").write_text('{"kind": "local", "kafka_po')
    kafka, pg = LocalKafka(tmp_path), LocalPostgres(tmp_path)
    rec = pidrecord.PidRecord(pid=1234, start_time=1, marks=["m"], ports={"kafka": 19500, "controller": 19501})
    monkeypatch.setattr(LocalKafka, "running", lambda self: rec)
    monkeypatch.setattr(LocalPostgres, "running", lambda self: None)
    assert local_record.known_ports(tmp_path, kafka, pg) == {"kafka": 19500, "controller": 19501}


@pytest.mark.parametrize("text", ['{"kind": "local", "kafka_po', "{", '{"kind": "local"}'])
def test_status_and_down_with_a_damaged_record_and_nothing_running(tmp_path, text):
    (tmp_path / "stack.json").write_text(text)
    st = harness("status", env=env_for(tmp_path))
    no_traceback(st)
    assert st.returncode == 1 and "no stack is up" in st.stdout
    js = harness("status", "--json", env=env_for(tmp_path))
    assert js.returncode == 1 and json.loads(js.stdout) == {"kind": None, "healthy": False, "state": None}
    down = harness("down", env=env_for(tmp_path))
    no_traceback(down)
    assert down.returncode == 0 and down.stdout.strip() == "no stack was running"


def test_down_with_nothing_ever_started_says_so(tmp_path):
    for home in (tmp_path / "never-made", tmp_path):
        proc = harness("down", env=env_for(home))
        assert proc.returncode == 0 and proc.stdout.strip() == "no stack was running", proc.stderr
        assert "stopped" not in proc.stdout


def _one_line_exit_2(proc, *needles):
    no_traceback(proc)
    assert proc.returncode == 2, (proc.returncode, proc.stdout, proc.stderr)
    lines = [l for l in proc.stderr.splitlines() if l.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), lines
    for n in needles:
        assert n in lines[0]


@pytest.mark.parametrize("cmd", [["up"], ["status"], ["down"], ["run", "offset-before", "--messages", "10"]])
def test_state_folder_under_a_file(tmp_path, cmd):
    (tmp_path / "file").write_text("x")
    _one_line_exit_2(harness(*cmd, env=env_for(tmp_path / "file" / "state")), "is not a folder", "HARNESS_HOME")


@pytest.mark.parametrize("cmd", [["up"], ["run", "offset-before", "--messages", "10"]])
@pytest.mark.parametrize("home", ["/proc/harness-test-state", "/proc/self", "/sys/harness-test-state"])
def test_state_folder_that_cannot_be_written(cmd, home):
    _one_line_exit_2(harness(*cmd, env=env_for(home)), "cannot use state folder", "HARNESS_HOME")
