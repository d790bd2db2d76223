"""The one-sentence summary shared by the terminal, Markdown and HTML."""

from harness.reporting.summary import summarize
from tests.unit.sample_report import sample


def test_summary_names_the_damage_and_the_crashes():
    text = summarize(sample("offset-after", dups=3))
    assert text.startswith("offset-after: 0 lost and 3 duplicated effects of 10 payments (ledger 1,300 of 1,000)")
    assert "after 1 crashes, exactly as predicted from the crash log." in text


def test_summary_without_crashes_and_with_the_kafka_boundary():
    d = sample("eos-boundary", dups=2)
    d["crashes"] = []
    d["kafka_output"] = {"read_committed": {"records": 10, "duplicates": 0, "lost": 0},
                         "read_uncommitted": {"records": 12, "duplicates": 2, "lost": 0}}
    text = summarize(d)
    assert "with no planned crash, exactly as predicted." in text
    assert "Kafka EOS covered the topic (0 duplicates) and not the database (2 duplicate charges)." in text


def test_unexpected_is_said_plainly():
    assert "NOT as predicted" in summarize(sample(verdict="unexpected"))
