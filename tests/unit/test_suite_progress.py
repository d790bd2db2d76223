"""A suite's live progress rows and its interrupt, on hand-made suite log lines and run folders."""

import os
import signal

import pytest

from harness.cli.commands.suite_progress import SuiteProgress


def test_rows_follow_the_suite_log_and_the_crash_logs(tmp_path, capsys):
    p = SuiteProgress(["offset-before", "offset-after", "dedupe"], tmp_path, tty=False)
    assert [p.row_cells(n)[1] for n in p.rows] == ["waiting"] * 3
    p.log("suite: starting offset-after (1.20 of 2 cores idle)")
    (tmp_path / "offset-after").mkdir()
    (tmp_path / "offset-after" / "crash-log.jsonl").write_text('{"a": 1}\n' * 7)
    name, state, detail = p.row_cells("offset-after")
    assert state == "running" and detail.endswith("7 crashes so far")
    p.log("suite: offset-after finished: as-predicted (14 s)")
    assert p.row_cells("offset-after") == ("offset-after", "as-predicted", "14 s")
    assert "suite: offset-after finished" in capsys.readouterr().err      # the plain lines still print


def test_a_plain_line_says_what_is_running(tmp_path, capsys):
    p = SuiteProgress(["a", "b"], tmp_path, tty=False)
    p.log("suite: starting a")
    p.plain_line()
    err = capsys.readouterr().err
    assert "suite: running a " in err and "no crashes so far" in err and "1 waiting, 0 done" in err


def test_an_interrupt_is_acknowledged_at_once_naming_what_runs_and_what_will_not_start(tmp_path, capsys):
    p = SuiteProgress(["a", "b", "c"], tmp_path, tty=False)
    p.log("suite: starting a")
    p.log("suite: starting b")
    old = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}
    try:
        p.install()
        with pytest.raises(KeyboardInterrupt):
            os.kill(os.getpid(), signal.SIGINT)
            signal.sigtimedwait([], 0.5) if hasattr(signal, "sigtimedwait") else None
        os.kill(os.getpid(), signal.SIGTERM)        # a second signal is ignored while the reports are written
    finally:
        for s, h in old.items():
            signal.signal(s, h)
    err = capsys.readouterr().err
    assert "stopping: 2 running experiment(s) (a, b)" in err and "not started: c" in err
    assert err.count("stopping:") == 1
    assert p.row_cells("a")[1] == "stopping" and p.row_cells("c")[1] == "not started"


def _stopped_eos(hanging: int, fenced: bool, witnesses=()):
    from tests.unit.sample_report import sample
    d = sample("eos", verdict="interrupted")
    d["verdict_detail"]["killed_at_stop"] = [{"worker": "w0", "attempt": 71, "pid": 1, "time": 1.0,
                                              "transactional_ids": ["harness-txn-w0"],
                                              **({"transaction": "fenced"} if fenced else {})}]
    d["anomaly_classes"] = {"history": {"operations": 4, "processes": 1, "bad_lines": 0, "problems": []}, "classes": {
        "hanging-transaction": {"count": hanging, "allowed": False, "meaning": "a transaction still open at the end",
                                "witnesses": list(witnesses), "unchecked": None}}}
    return d


def test_the_transaction_the_harness_stop_left_open_is_not_the_systems_anomaly():
    """An interrupted eos run said 'Forbidden anomalies: hanging-transaction (1)' for the transaction its own
    stop left open when it SIGKILLed the busy worker."""
    from harness.reporting.run_report import RunReport
    from harness.reporting.summary import compose
    from tests.unit.sample_report import validate

    def summarize(d: dict) -> str:      # the sentence and its detail
        sentence, detail = compose(d)
        return " ".join([sentence, *detail])
    held = {"partition": 0, "offset": 7, "producers": [{"producer_id": 3, "transaction_start_offset": 7,
                                                        "transactional_id": "harness-txn-w0"}]}
    d = _stopped_eos(1, fenced=True, witnesses=[held])
    validate(d)
    text = summarize(d)
    assert "Forbidden anomalies" not in text and "were the stop's: tied to workers it SIGKILLed" in text
    assert "fenced their transactional.id (1)" in text
    row = next(r for r in RunReport(d).anomaly_class_rows() if r[0] == "hanging-transaction")
    assert row[1] == "the harness's stop (not an anomaly)"
    more = _stopped_eos(2, fenced=False)           # nothing ties them to the worker it killed: not ours
    assert "Forbidden anomalies: hanging-transaction (2)" in summarize(more)
    assert "fenced" not in summarize(more)


def test_a_runs_interrupt_is_acknowledged_at_once_before_the_stop_works(capsys):
    """harness run: after Ctrl-C nothing said 'stopping' while the bar went on ticking; the first signal now
    says it from the handler, before the KeyboardInterrupt that starts the stop; a second says nothing."""
    from harness.cli.ui import ProgressUI
    from harness.workers.supervisor import install_sigterm_as_interrupt
    old = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}
    try:
        with ProgressUI("eos") as ui:
            ui.tty = False
            install_sigterm_as_interrupt(on_first=lambda: ui.stopping(2))
            with pytest.raises(KeyboardInterrupt):
                signal.getsignal(signal.SIGINT)(signal.SIGINT, None)
            said = capsys.readouterr().err
            signal.getsignal(signal.SIGTERM)(signal.SIGTERM, None)      # ignored: the stop is under way
    finally:
        for s, h in old.items():
            signal.signal(s, h)
    assert said.startswith("stopping: 2 worker(s) end now") and "interrupted report is written" in said, said
    assert capsys.readouterr().err == ""
    with ProgressUI("eos", quiet=True) as quiet:
        quiet.stopping(2)
    assert capsys.readouterr().err == ""        # a suite's quiet run says nothing: the suite says it
