"""A count that was not measured is never drawn as a bar of 0: the suite chart of a run whose audit failed
(or that never started) drew 'eos lost: 0' before; now it shows '?' with 'unknown (not measured)'."""

import re

from harness.reporting.store_chart import suite_chart


def _bars(svg: str) -> dict:
    return {(g, n.replace("bar-", "")): v for n, v, g in
            re.findall(r'<rect class="(bar-[\w-]+)" data-value="([^"]*)" data-group="([^"]*)"', svg)}


def test_unmeasured_counts_get_a_question_mark_not_a_zero_bar():
    runs = [{"experiment": "offset-after", "counts": {"lost": 0, "duplicates": 100}, "stack": {"ledger_table": "l"}},
            {"experiment": "dedupe", "counts": None, "verdict": "failed"},
            {"experiment": "eos", "counts": {"lost": None, "duplicates": None}, "verdict": "audit-failed",
             "kafka_output": {"read_committed": {"duplicates": None}}}]
    svg = suite_chart(runs)
    bars = _bars(svg)
    assert bars[("offset-after", "db-duplicates")] == "100"
    assert not [k for k in bars if k[0] in ("dedupe", "eos")], bars
    unknown = re.findall(r'class="bar-unknown" data-group="([^"]*)" data-name="([^"]*)"', svg)
    assert ("eos", "lost") in unknown and ("dedupe", "lost") in unknown
    assert "unknown (not measured)" in svg


def test_the_plain_suite_chart_too():
    svg = suite_chart([{"experiment": "offset-before", "counts": {"lost": 100, "duplicates": 0}},
                       {"experiment": "dedupe", "counts": {}}])
    assert ("dedupe", "lost") in re.findall(r'class="bar-unknown" data-group="([^"]*)" data-name="([^"]*)"', svg)
    assert _bars(svg)[("offset-before", "lost")] == "100"
