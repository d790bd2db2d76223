"""harness hunt's pure parts on hand-made data, and its loop with a stand-in for `harness run` (a script that
writes the report a seed is given): seeds, the runs' arguments from the declarations, key counts, the stop
at the first invalid run, the reproduce command, Ctrl-C, and bad input in one line."""

import json
import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from harness.core.errors import HarnessError
from harness.run import hunt_runner as h
from tests.conftest import harness
from tests.unit.test_cli_errors import isolated, one_clear_line  # noqa: F401 - isolated: a fixture

# Stands in for `python -m harness.cli`: `run ... --seed S --quiet --out DIR`, writes DIR/report.json whose
# verdict is unexpected for the seeds in HUNT_BAD, else as-predicted; with HUNT_SLOW it waits for SIGTERM and
# writes an interrupted report, as a real run does.
STANDIN = textwrap.dedent("""
    import json, os, signal, sys, time
    argv = sys.argv[1:]
    seed = int(argv[argv.index("--seed") + 1]); out = argv[argv.index("--out") + 1]
    os.makedirs(out)
    def report(verdict):
        failed = ["kafka.read_committed.lost: predicted == 0, observed 1"] if verdict == "unexpected" else []
        with open(os.path.join(out, "report.json"), "w") as f:
            json.dump({"verdict": verdict, "counts": {"lost": int(bool(failed)), "duplicates": 0},
                       "kafka_output": {"read_committed": {"lost": int(bool(failed)), "duplicates": 0}},
                       "crashes": [{}], "fault_details": {"delay-request": {"touched": 3}},
                       "verdict_detail": {"failed": failed}}, f)
    if os.environ.get("HUNT_SLOW"):
        def stop(*_):
            report("interrupted"); sys.exit(130)
        signal.signal(signal.SIGTERM, stop); signal.signal(signal.SIGINT, stop)
        open(os.path.join(out, "started"), "w").close()
        time.sleep(60)
    bad = {int(s) for s in os.environ.get("HUNT_BAD", "").split(",") if s}
    report("unexpected" if seed in bad else "as-predicted")
    sys.exit(1 if seed in bad else 0)
""")


@pytest.fixture
def standin(tmp_path):
    path = tmp_path / "standin.py"
    path.write_text(STANDIN)
    return [sys.executable, str(path)]


def test_seeds_count_up_from_the_first_and_runs_are_bounded():
    assert h.seeds(7, 3) == [7, 8, 9]
    for bad in (0, -1, h.MAX_RUNS + 1):
        with pytest.raises(HarnessError, match="--runs must be between 1"):
            h.seeds(1, bad)


def test_run_args_come_from_the_declarations_without_the_seed():
    args = h.run_args("eos", {"messages": 200, "seed": 4, "crash_rate": 0.25, "no_history": True,
                              "fresh_transactional_id": False, "client": "java", "partitions": None},
                      ("delay-request:api=EndTxn,ms=4000",))
    assert args == ["eos", "--messages", "200", "--crash-rate", "0.25", "--no-history", "--client", "java",
                    "--fault", "delay-request:api=EndTxn,ms=4000"]
    cmd = h.child_command(args, 9, "/x/seed-9")
    assert cmd[:len(args) + 1] == ["run", *args] and cmd[cmd.index("--seed") + 1] == "9"
    assert cmd[cmd.index("--out") + 1] == "/x/seed-9" and "--time-limit" in cmd
    assert h.child_command([*args, "--time-limit", "60"], 9, "/x").count("--time-limit") == 1


def test_reproduce_is_one_quoted_harness_run_command():
    cmd = h.reproduce(["eos", "--fault", "delay-request:api=EndTxn,ms=4000"], 4,
                      ["--kafka-config", "socket.timeout.ms=2000"])
    assert cmd == ("harness run eos --fault delay-request:api=EndTxn,ms=4000 --kafka-config socket.timeout.ms=2000 "
                   "--seed 4")
    assert h.reproduce(["custom", "--worker-cmd", "python my worker.py"], 1) == \
        "harness run custom --worker-cmd 'python my worker.py' --seed 1"


def test_key_counts_say_unknown_for_what_the_report_lacks():
    k = h.key_counts({"counts": {"lost": 1, "duplicates": 0}, "crashes": [{}, {}],
                      "fault_details": {"delay-request": {"touched": 3, "after_client_gone": 1},
                                        "planned-crash": {"x": 1}},
                      "verdict_detail": {"failed": ["a"]}})
    assert k == {"lost": 1, "duplicates": 0, "read_committed_lost": None, "read_committed_duplicates": None,
                 "crashes": 2, "touched": {"delay-request": 3}, "after_client_gone": {"delay-request": 1},
                 "failed": ["a"]}
    assert "delay-request touched 3 (1 after their client gave up)" in h.line(h.row_of(3, {"verdict": "x"}, {
        "counts": {}, "fault_details": {"delay-request": {"touched": 3, "after_client_gone": 1}}}))
    assert h.key_counts(None) == {}
    text = h.line(h.row_of(3, {"verdict": "unexpected", "seconds": 31.2}, {"counts": {"lost": None, "duplicates": 0}}))
    assert text.startswith("seed 3: unexpected, lost unknown, duplicates 0") and text.endswith("31 s")


def test_summary_names_the_invalid_seeds_and_reproduces_the_first():
    rows = [{"seed": 1, "folder": "seed-1", "verdict": "as-predicted"},
            {"seed": 2, "folder": "seed-2", "verdict": "unexpected", "failed": ["x: predicted == 0, observed 1"]},
            {"seed": 3, "folder": "seed-3", "verdict": "incomplete"},
            {"seed": 4, "folder": "seed-4", "verdict": "interrupted"}]
    s = h.summary(["eos"], rows, 5, True, 10.0)
    assert s["invalid_seeds"] == [2, 3] and s["exit_code"] == 1
    assert s["first_invalid"]["reproduce"] == "harness run eos --seed 2"
    assert h.summary(["eos"], rows[:1], 5, False, 1.0)["exit_code"] == 0
    assert h.summary(["eos"], rows, 5, True, 1.0, interrupted=True)["exit_code"] == 130
    lines = h.closing(s)
    assert lines[0] == "runs: 3 of 5 finished (keep-going); invalid: 2 (seeds 2, 3)"
    assert lines[-1] == "  harness run eos --seed 2"
    md = h.render_md(s)
    assert "| [2](seed-2/report.md) | unexpected |" in md and "\n    harness run eos --seed 2\n" in md


def test_the_hunt_stops_at_the_first_invalid_run(tmp_path, standin, monkeypatch):
    monkeypatch.setenv("HUNT_BAD", "12,13")
    said = []
    explained = []

    def on_invalid(row, folder):
        explained.append(row["seed"])
        assert (folder / "report.json").is_file()
        row["broker_side"] = f"{folder.name}/broker-side.md"
    s = h.run_hunt(None, ["eos", "--messages", "200"], h.seeds(10, 5), tmp_path / "hunt", False, log=said.append,
                   harness_cmd=standin, on_invalid=on_invalid)
    assert s["first_invalid"]["broker_side"] == "seed-12/broker-side.md"
    assert "the broker's side of seed 12: seed-12/broker-side.md" in h.closing(s)
    assert "- seed 12: the broker's side: seed-12/broker-side.md" in (tmp_path / "hunt" / "hunt.md").read_text()
    assert [r["seed"] for r in s["runs"]] == [10, 11, 12] and s["invalid_seeds"] == [12]
    assert s["first_invalid"]["reproduce"] == "harness run eos --messages 200 --seed 12"
    assert said[2].startswith("seed 12: unexpected, lost 1, duplicates 0, read_committed lost 1, duplicates 0, "
                              "crashes 1, delay-request touched 3")
    assert explained == [12]
    assert json.loads((tmp_path / "hunt" / "hunt.json").read_text()) == s
    assert (tmp_path / "hunt" / "seed-12" / "report.json").is_file() and not (tmp_path / "hunt" / "seed-13").exists()
    kept = h.run_hunt(None, ["eos"], h.seeds(10, 5), tmp_path / "all", True, log=said.append, harness_cmd=standin)
    assert [r["seed"] for r in kept["runs"]] == [10, 11, 12, 13, 14] and kept["invalid_seeds"] == [12, 13]


def test_ctrl_c_ends_the_run_interrupted_and_still_writes_the_summary(tmp_path, standin):
    script = tmp_path / "hunt.py"
    script.write_text(textwrap.dedent(f"""
        import sys
        from pathlib import Path
        from harness.run import hunt_runner as h
        try:
            h.run_hunt(None, ["eos"], [1, 2], Path({str(tmp_path / 'hunt')!r}), False, log=print,
                       harness_cmd={standin!r})
        except KeyboardInterrupt:
            sys.exit(130)
    """))
    proc = subprocess.Popen([sys.executable, str(script)], env={**os.environ, "HUNT_SLOW": "1"})
    started = tmp_path / "hunt" / "seed-1" / "started"
    deadline = time.monotonic() + 60
    while not started.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    proc.send_signal(signal.SIGINT)
    assert proc.wait(timeout=60) == 130
    s = json.loads((tmp_path / "hunt" / "hunt.json").read_text())
    assert s["interrupted"] and s["exit_code"] == 130 and [r["verdict"] for r in s["runs"]] == ["interrupted"]
    assert (tmp_path / "hunt" / "hunt.md").is_file()


@pytest.mark.parametrize("args, needle", [
    (("nope",), "unknown experiment 'nope'"),
    (("eos", "--runs", "0"), "--runs must be between 1"),
    (("eos", "--messages", "0"), "--messages must be at least 1"),
    (("eos", "--fault", "delay-request:api=Nope"), "api must be one of"),
    (("experiments/core/offset-after.toml",), "not a file"),
    (("eos", "--explain", "--bootstrap-servers", "127.0.0.1:1", "--postgres-dsn", "postgresql://x@127.0.0.1:1/x"),
     "--explain reads the brokers' log folders"),
])
def test_bad_input_is_one_line_before_any_stack_starts(isolated, tmp_path, args, needle):
    one_clear_line(harness("hunt", *args, "--out", str(tmp_path / "h"), env=isolated), needle)
    assert not (tmp_path / "h").exists() and not (tmp_path / "state").exists()
