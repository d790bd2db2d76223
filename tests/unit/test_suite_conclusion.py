"""The suite's last line states findings only from runs whose every check passed."""

from harness.run.suite_runner import conclusion, exit_code


def row(name, verdict, lost=0, dups=0, hits=None, ledger=True, rc=None):
    return {"experiment": name, "verdict": verdict,
            "counts": {"sent": 10, "lost": lost, "duplicates": dups, "dedupe_hits": hits},
            "ledger": {"actual_total": 1000 if ledger else None},
            "kafka_output": {"read_committed": rc} if rc else None}


def test_an_unexpected_run_is_never_said_to_hold():
    rows = [row("offset-before", "as-predicted", lost=6), row("dedupe", "unexpected", hits=3)]
    text = conclusion(rows)
    assert "held in dedupe" not in text and "made the database exact (dedupe)" not in text
    assert "It did not hold in offset-before (6 lost, 0 duplicated)." in text
    assert text.endswith("Not as predicted or not finished: dedupe.")
    assert exit_code(rows) == 1


def test_findings_from_as_predicted_runs():
    rows = [row("dedupe", "as-predicted", hits=3),
            row("eos-boundary", "as-predicted", dups=2, rc={"lost": 0, "duplicates": 0})]
    text = conclusion(rows)
    assert text.startswith("Exactly-once held in dedupe.")
    assert "eos-boundary kept an exact topic and a duplicated ledger" in text
    assert exit_code(rows) == 0


def test_no_finding_when_nothing_ran_as_predicted():
    rows = [row("dedupe", "interrupted"), {"experiment": "eos", "verdict": "failed"}]
    assert "states no finding" in conclusion(rows) and "held in" not in conclusion(rows)
    assert exit_code(rows) == 130
    assert exit_code([{"experiment": "eos", "verdict": "audit-failed"}]) == 3


def test_an_exact_ledger_that_hid_reused_requests_is_not_said_to_hold():
    hid = {**row("key-reuse", "as-predicted", hits=150), "reuse": {"reused": 50, "hidden": 50, "rejected": None}}
    fixed = {**row("key-fingerprint", "as-predicted", hits=150), "reuse": {"reused": 50, "hidden": 0, "rejected": 50}}
    text = conclusion([hid, fixed])
    assert text.startswith("Exactly-once held in key-fingerprint.")
    assert "hid requests sent again under a used key with another payload (a client bug, neither applied nor " \
           "rejected): key-reuse (50 of 50 hidden)." in text
    assert "made the database exact (key-fingerprint)" in text


def test_a_reuse_section_with_unknown_counts_does_not_break_the_conclusion():
    r = {**row("key-reuse", "as-predicted", hits=1), "reuse": {"reused": None, "hidden": 2, "rejected": None}}
    assert "key-reuse (2 of unknown hidden)" in conclusion([r])


def test_a_run_whose_report_went_elsewhere_is_listed_with_its_error_line_not_its_last(tmp_path):
    """A full --out: the run prints why (one error line), then the folder its report went to, last."""
    from harness.run.suite_runner import _entry
    (tmp_path / "dedupe.log").write_text("[dedupe] produced 10 payments\nerror: cannot write the report in "
                                         "/r/dedupe: No space left on device; written to /s/u/x instead\n/s/u/x\n")
    entry = _entry("dedupe", tmp_path, 3, 1.0)
    assert entry["verdict"] == "failed" and entry["error"].startswith("error: cannot write the report"), entry
    (tmp_path / "eos.log").write_text("Traceback\nboom\n")
    assert _entry("eos", tmp_path, 1, 1.0)["error"] == "boom"


def test_many_runs_that_did_not_hold_are_counted_in_a_short_sentence():
    """The default suite has eleven such runs: named one by one, the sentence ran to 450 characters."""
    rows = [row(f"lossy-{i}", "as-predicted", lost=100) for i in range(4)] + \
           [row(f"dupy-{i}", "as-predicted", dups=100) for i in range(7)]
    text = conclusion(rows)
    sentence = next(s for s in text.split(". ") if s.startswith("It did not hold")).rstrip(".")
    # "4 lost payments" read as four payments lost, in a suite that lost 400 of them: it counts experiments
    assert sentence == ("It did not hold in 11 experiments: 4 of them lost payments, 7 applied payments twice (each "
                        "one's counts are in the table)")
    assert len(sentence) <= 160


def test_a_run_the_suites_interrupt_stopped_before_its_report_is_interrupted_not_failed(tmp_path):
    """Ctrl-C while a run still set up: it died without a report. The suite said 'failed' and 'No experiment
    finished as predicted ...: eos failed', as if the run had broken rather than been stopped."""
    from harness.run.suite_runner import _entry
    (tmp_path / "eos.log").write_text("\ninterrupted\n")
    entry = _entry("eos", tmp_path, -15, 4.9, stopped=True)
    assert entry["verdict"] == "interrupted" and entry["report"] is None, entry
    assert entry["error"] == "stopped by the suite's interrupt before it wrote a report"
    assert conclusion([entry]).endswith(": eos interrupted.")
    assert _entry("eos", tmp_path, -15, 4.9)["verdict"] == "failed"       # a run that died on its own failed
    (tmp_path / "eos").mkdir()                                              # one that wrote its report keeps it
    (tmp_path / "eos" / "report.json").write_text('{"verdict": "interrupted"}')
    assert _entry("eos", tmp_path, 130, 9.0, stopped=True)["report"] == "eos/report.json"


def test_the_committed_reference_suite_says_each_thing_in_at_most_160_characters():
    """The reference suite (what the docs and screenshots show) kept a 456-character sentence of an older
    conclusion; its runs' summaries are held to the same bound."""
    import json
    import re
    from pathlib import Path
    suite = Path(__file__).resolve().parents[2] / "reports" / "reference" / "suite"
    texts = [json.loads((suite / "suite.json").read_text())["conclusion"]]
    texts += [json.loads(f.read_text())["summary"] for f in sorted(suite.glob("*/report.json"))]
    assert len(texts) == 22
    long = [s for t in texts for s in re.split(r"(?<=[.])\s+(?=[A-Z])", t) if len(s) > 160]
    assert not long, long
    assert json.loads((suite / "suite.json").read_text())["conclusion"] in (suite / "suite.md").read_text()
