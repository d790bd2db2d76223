"""Predict first: guesses parsed (bad ones in one line), recorded before the run, set beside the actual numbers."""

import json

import pytest

from harness.core.errors import HarnessError
from harness.reporting import guesses, html, markdown
from harness.reporting.run_report import RunReport
from harness.reporting.suite_report import render_html, render_md
from tests.conftest import harness
from tests.unit.sample_report import sample, validate
from tests.unit.test_cli_errors import isolated, one_clear_line  # noqa: F401 - a fixture

CORE = ["offset-before", "offset-after", "dedupe"]


def test_a_spec_is_parsed_and_its_mistakes_are_one_line():
    assert guesses.parse_spec(" duplicates=110, lost = 0,dedupe-hits=7") == {"duplicates": 110, "lost": 0,
                                                                             "dedupe_hits": 7}
    assert guesses.parse_spec("duplicates=110,lost=0") == {"duplicates": 110, "lost": 0}
    for spec, words in (("dupes=3", "did you mean 'duplicates'"), ("duplicates", "COUNT=NUMBER"),
                        ("duplicates=many", "whole number"), ("lost=-1", "whole number"), ("", "got nothing"),
                        ("lost=?", "no guess yet")):
        with pytest.raises(HarnessError, match=words):
            guesses.parse_spec(spec)


@pytest.mark.parametrize("guess,actual,ok", [(110, 100, True), (90, 100, True), (111, 100, False), (0, 0, True),
                                             (1, 0, False), (0, 5, False), (5, None, None)])
def test_close_enough_is_within_10_percent_or_exact_for_zero(guess, actual, ok):
    assert guesses.close_enough(guess, actual) is ok


def test_the_core_worksheet_asks_the_labs_four_questions(tmp_path):
    text = guesses.worksheet(CORE, "core")
    lines = [line for line in text.splitlines() if not line.startswith("#")]
    assert [line.split(" =")[0] for line in lines] == ["offset-after.duplicates", "dedupe.duplicates",
                                                        "offset-before.lost", "offset-after.deliveries"]
    assert "within 10 %" in text and "harness suite --group core --predict worksheet.toml" in text
    sheet = tmp_path / "worksheet.toml"
    sheet.write_text(text)
    with pytest.raises(HarnessError, match="offset-after.duplicates has no guess yet"):
        guesses.parse_worksheet(sheet, CORE)
    sheet.write_text(text.replace('"?"', "100", 1).replace('"?"', "0", 2).replace('"?"', "1100"))
    assert guesses.parse_worksheet(sheet, CORE) == {"offset-after": {"duplicates": 100, "deliveries": 1100},
                                                    "dedupe": {"duplicates": 0}, "offset-before": {"lost": 0}}


@pytest.mark.parametrize("content,words", [("offset-after.duplicates = ", "not a TOML worksheet"),
                                           ("ofset-after.duplicates = 1", "did you mean 'offset-after'"),
                                           ("offset-after.dupes = 1", "did you mean 'duplicates'"),
                                           ("offset-after = 3", "offset-after.COUNT = NUMBER"),
                                           ("offset-after.lost = 1.5", "whole number"),
                                           ("", "no guesses")])
def test_a_bad_worksheet_is_one_line(tmp_path, content, words):
    sheet = tmp_path / "w.toml"
    sheet.write_text(content)
    with pytest.raises(HarnessError, match=words):
        guesses.parse_worksheet(sheet, CORE)


def test_guesses_are_recorded_in_the_folder_and_shown_you_actual_close_enough(tmp_path):
    guesses.expect({"duplicates": 110, "lost": 1, "deliveries": 13})
    try:
        guesses.write_pending(tmp_path)
        on_disk = json.loads((tmp_path / "guesses.json").read_text())
        assert on_disk["guesses"] == {"duplicates": 110, "lost": 1, "deliveries": 13} and on_disk["recorded_at"]
        d = sample(dups=100)
        d["counts"]["deliveries"] = 13
        d["guesses"] = guesses.take()
        assert guesses.take() is None          # one run's guesses, not every later run's
    finally:
        guesses.expect(None)
    validate(d)
    r = RunReport(d)
    md, page = markdown.render(r), html.render(r)
    assert "| duplicates | 110 | 100 | yes |" in md and "| lost | 1 | 0 | no |" in md
    assert "| deliveries | 13 | 13 | yes |" in md and "2 of 3 guesses close enough" in md and "within 10 %" in md
    assert "<td>lost</td><td class=n>1</td><td class=n>0</td><td>no</td>" in page and "Your predictions" in page


def test_a_run_without_guesses_has_no_predictions_section():
    r = RunReport(sample())
    assert "Your predictions" not in markdown.render(r) and "Your predictions" not in html.render(r)


def test_the_suite_report_shows_the_worksheets_scoreboard():
    summary = json.loads(open("reports/reference/suite/suite.json").read())
    recorded = {"recorded_at": "2026-12-07T09:00:00Z", "source": "worksheet.toml",
                "guesses": {"offset-after": {"duplicates": 110, "deliveries": 2000}, "dedupe": {"duplicates": 0},
                            "offset-before": {"lost": 100}}}
    md = render_md(summary, recorded)
    assert "| offset-after | duplicates | 110 | 100 | yes |" in md
    assert "| offset-after | deliveries | 2,000 | 1,100 | no |" in md
    assert "| offset-before | lost | 100 | 100 | yes |" in md and "3 of 4 guesses close enough" in md
    assert "Your predictions" in render_html(summary, None, recorded)
    assert "Your predictions" not in render_md(summary)


def test_the_cli_refuses_bad_guesses_before_anything_starts(isolated, tmp_path):  # noqa: F811
    one_clear_line(harness("run", "offset-after", "--predict", "dupes=3", env=isolated), "did you mean 'duplicates'")
    sheet = tmp_path / "w.toml"
    sheet.write_text('dedupe.duplicates = "?"\n')
    proc = harness("suite", "--group", "core", "--predict", str(sheet), "--out", str(tmp_path / "s"), env=isolated)
    assert proc.returncode == 2
    one_clear_line(proc, "dedupe.duplicates has no guess yet")
    assert not (tmp_path / "s").exists()
    ok = harness("worksheet", "--group", "core", env=isolated)
    assert ok.returncode == 0 and ok.stdout.count(' = "?"') == 4


def test_a_guess_about_a_store_the_run_does_not_have_is_na_not_unknown():
    d = sample("eos")
    d["stack"]["ledger_table"], d["ledger"]["actual_total"] = None, None
    rows = {q: (a, ok) for q, _you, a, ok in guesses.board({"ledger_total": 5, "committed_duplicates": 0}, d)}
    assert rows["ledger total"] == ("n/a", "n/a (not in this run)")
    assert rows["duplicates in the output topic, read_committed"] == ("n/a", "n/a (not in this run)")
    d["kafka_output"] = {"read_committed": {"records": 10, "duplicates": None, "lost": 0, "unprocessed": 0},
                         "read_uncommitted": {"records": 10, "duplicates": 0, "lost": 0, "unprocessed": 0}}
    rows = {q: (a, ok) for q, _you, a, ok in guesses.board({"committed_duplicates": 0}, d)}
    assert rows["duplicates in the output topic, read_committed"] == ("unknown", "cannot tell")   # not measured


def _offset_after():
    return {"counts": {"sent": 1000, "deliveries": 1100, "effects": 1100, "duplicates": 100, "lost": 0},
            "ledger": {"expected_total": 100000, "actual_total": 110000}, "crashes": 100}


def test_the_thousand_payments_every_run_has_do_not_make_a_naive_guess_close_enough():
    """The worksheet asks for offset-after's deliveries to catch the answer 'one per payment': 1,000 against
    1,100 was within 10 % of the total, so the misconception scored 'yes'."""
    rows = {r[0]: r[3] for r in guesses.board({"deliveries": 1000, "effects": 1000, "ledger_total": 100000}, _offset_after())}
    assert set(rows.values()) == {"no"}, rows
    rows = {r[0]: r[3] for r in guesses.board({"deliveries": 1095, "ledger_total": 109500}, _offset_after())}
    assert set(rows.values()) == {"yes"}, rows
    assert "thousand" not in guesses.RULE     # the rule is stated under a 200-payment run's board too


def test_a_suite_experiment_without_counts_is_cannot_tell_not_a_crash():
    rows = guesses.suite_board({"guesses": {"eos": {"lost": 0}, "dedupe": {"duplicates": 0}}},
                               {"eos": {"experiment": "eos", "verdict": "failed", "report": None},
                                "dedupe": {"experiment": "dedupe", "verdict": "interrupted", "counts": None}})
    assert [r[-1] for r in rows] == ["cannot tell", "cannot tell"]
    line = guesses.score_line(rows)
    assert line.startswith("0 of 0 guesses close enough; 2 could not be judged")


@pytest.mark.parametrize("bad", ["lost=²", "lost=١٢", "lost=1.5", "lost=-1"])
def test_a_guess_that_is_not_ascii_digits_is_one_line(bad):
    with pytest.raises(HarnessError):
        guesses.parse_spec(bad)
