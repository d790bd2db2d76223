"""The one-sentence summary shared by the terminal, Markdown and HTML."""

import pytest

from harness.experiments import names
from harness.reporting.summary import LIMIT, _how, compose, summarize, whole
from tests.unit.sample_report import sample, validate


def test_summary_names_the_damage_and_the_crashes():
    text = summarize(sample("offset-after", dups=3))
    assert text.startswith("offset-after: 0 lost and 3 duplicated effects of 10 payments (ledger 1,300 of 1,000)")
    assert "after 1 crashes, exactly as predicted from the crash log." in text


def test_summary_without_crashes_and_with_the_kafka_boundary():
    d = sample("eos-boundary", dups=2)
    d["crashes"] = []
    d["kafka_output"] = {"read_committed": {"records": 10, "duplicates": 0, "lost": 0},
                         "read_uncommitted": {"records": 12, "duplicates": 2, "lost": 0}}
    text = whole({"summary": summarize(d), "summary_detail": compose(d)[1]})
    assert "with no planned crash, exactly as predicted." in text
    assert "Kafka EOS covered the topic (0 duplicates) and not the database (2 duplicate charges)." in text


def test_unexpected_is_said_plainly():
    assert "NOT as predicted" in summarize(sample(verdict="unexpected"))


# -- at most LIMIT characters, the rest in the detail ------------------------------------------

FAULT_SENTENCES = [" broker-kill: node 2 killed for 3.1 s, answering 4.2 s after the fault.",
                   " Only 1 of 2 random kills struck: the workers finished first (more payments give the kills "
                   "time to land)."]


def heavy(name: str, verdict: str) -> dict:
    """A report of experiment `name` at its busiest: large counts, every store it writes, stops, deaths,
    forbidden anomalies and an audit error, so every sentence the summary can say is there to be said."""
    from harness.experiments import REGISTRY
    st = REGISTRY[name].stores
    d = sample(name, lost=123_456, dups=234_567, verdict=verdict)
    d["counts"].update(sent=1_000_000, unprocessed=4_321)
    d["crashes"] = d["crashes"] * 1_234
    d["ledger"] = {"expected_total": 100_000_000, "actual_total": 111_111_100}
    if not st.ledger:
        d["stack"]["ledger_table"], d["ledger"]["actual_total"] = None, None
    if st.output_topic or st.deliveries:
        d["kafka_output"] = {"read_committed": {"records": 999_001, "duplicates": 0, "lost": 999},
                             "read_uncommitted": {"records": 1_000_777, "duplicates": 777, "lost": 0}}
        if st.deliveries:
            d["kafka_output"]["delivery_log"] = {"acked": 999_555, "unacked": 445, "reordered": 66}
    if st.accounts:
        d["accounts"] = {"accounts": [{"actual": 5, "expected": 4}] * st.accounts,
                         "actual_total": 5 * st.accounts, "expected_total": 4 * st.accounts}
    if st.rows or st.events:
        d["service"] = {"rows": 1_000_000, "events": 999_888, "unpublished": 112, "orphaned": 3,
                        "event_duplicates": 45}
    if st.dedupe:
        d["reuse"] = {"reused": 5_000, "hidden": 4_000, "rejected": 900, "applied": 100}
        d["stack"]["rejects_table"] = "harness.reject_x" if st.rejects else None
    d["timings"]["read_committed_stall_median_seconds"] = 1.25
    d["consumer_group"] = {"protocol": "classic", "assignments": 12, "revocations": 11, "revoked_partitions": 30,
                           "commits_lost": 2}
    d["outside_calls"] = {"calls_retried": 9, "calls_with_unknown_outcome": 7, "attempts_not_sent": 2, "attempts_unknown": 7}
    vd = d["verdict_detail"]
    vd["unplanned_deaths"] = [{"worker": "w1", "attempt": 3, "exit_code": 1}]
    vd["killed_at_stop"] = [{"worker": "w0", "attempt": 2, "pid": 4242, "time": 1.5, "transaction": "fenced"}]
    vd["left_behind"] = [{"pid": 5151, "command": "sleep"}]
    vd["audit_errors"] = ["ledger: connection refused"]
    d["worker_logs"] = {"cap_bytes": 1_048_576, "dropped_bytes": {"w0": 2_048}}
    d["anomaly_classes"] = {"history": {}, "classes": {"duplicate": {"count": 3, "allowed": False}}}
    return d


@pytest.mark.parametrize("verdict", ["as-predicted", "unexpected", "audit-failed"])
@pytest.mark.parametrize("name", names())
def test_every_experiments_sentence_is_short_and_its_detail_keeps_the_rest(name, verdict):
    d = heavy(name, verdict)
    sentence, detail = compose(d, FAULT_SENTENCES)
    assert len(sentence) <= LIMIT, (len(sentence), sentence)
    # the lead numbers stay in the sentence: lost, duplicated (or the output's), of how many, crashes, verdict
    lead = (["123,456 lost", "234,567 duplicated", "of 1,000,000 payments"] if d["ledger"]["actual_total"] else
            ["output of 1,000,000 payments: 999,001 records, 0 duplicates, 999 lost"])
    for fact in lead + ["after 1,234 crashes", _how(d, 1_234).replace(" from the crash log", "")]:
        assert fact in sentence, (fact, sentence)
    told = " ".join([sentence] + detail)
    facts = ["1 worker death(s)", "SIGKILLed 1 busy worker(s) where they stood (w0 attempt 2)", "fenced",
             "pids 5151", "w0: 2,048 bytes", "Forbidden anomalies: duplicate (3)", "Audit error: ledger: connection "
             "refused", "stalled 1.25 s", "12 assignments", "7 call(s) to the provider",
             "4,321 payments not yet processed", FAULT_SENTENCES[0].strip(), FAULT_SENTENCES[1].strip()]
    if d["ledger"]["actual_total"]:
        facts += ["111,111,100", "100,000,000"]
    if d.get("kafka_output"):
        facts += ["999,001 records", "1,000,777 records"]
        facts += ["Kafka EOS covered the topic (0 duplicates) and not the database (234,567 duplicate charges)"] \
            if d["ledger"]["actual_total"] else []
        facts += ["999,555 records acknowledged (445 never acknowledged) and 66 reordered"] \
            if "delivery_log" in d["kafka_output"] else []
    if d.get("accounts"):
        facts.append(f"{len(d['accounts']['accounts'])} of {len(d['accounts']['accounts'])} account balances off by +")
    if d.get("service"):
        facts.append("112 rows without an event, 3 events without a row, 45 duplicate events")
    if d.get("reuse"):
        facts.append("5,000 requests that reused a payment's id with another amount, 4,000 hidden")
    for fact in facts:
        assert fact in told, (fact, told)
    assert not any(x in sentence for x in detail), "a fact is said once, in the sentence or in the detail"


def test_a_short_run_says_everything_in_its_sentence():
    d = sample("offset-before", lost=30, dups=0)
    d["crashes"] *= 30
    d["counts"]["sent"], d["ledger"] = 300, {"expected_total": 30_000, "actual_total": 27_000}
    d["verdict_detail"]["killed_at_stop"] = []
    assert compose(d) == ("offset-before: 30 lost and 0 duplicated effects of 300 payments (ledger 27,000 of 30,000) "
                          "after 30 crashes, exactly as predicted from the crash log.", [])


def test_the_detail_is_in_report_md_html_and_whole():
    from harness.reporting.html import render as html
    from harness.reporting.markdown import render as markdown
    from harness.reporting.run_report import RunReport
    d = heavy("eos-boundary", "unexpected")
    d["summary"], d["summary_detail"] = compose(d, FAULT_SENTENCES)
    validate({**sample(), "summary": d["summary"], "summary_detail": d["summary_detail"]})   # the schema knows it
    r = RunReport(d)
    assert "- Kafka EOS covered the topic (0 duplicates) and not the database" in markdown(r)
    assert "<li>Kafka EOS covered the topic (0 duplicates) and not the database" in html(r)
    assert whole(d).startswith(d["summary"] + " ") and "Audit error" in whole(d)


def test_a_custom_consumers_claim_goes_to_the_detail_and_its_verdict_words_stay():
    from harness.checker import group_timeline
    from harness.experiments.custom.custom_report import _summary
    d = heavy("custom", "unexpected")
    d["summary"], d["summary_detail"] = compose(d, FAULT_SENTENCES)
    kills = [{"worker": "w0", "attempt": 1, "t": 1.0}]
    d["consumer"] = {"claim_held": False, "kills_by_state": {group_timeline.DAMAGE: 1}, "restart_median_seconds": 0.5,
                     "membership": "assign", "protocol": None, "witnesses": []}
    _summary(d, "exactly-once", kills, {"pay-1": 1}, {}, ["a warning"])
    assert "NOT as claimed" in d["summary"] and len(d["summary"]) <= LIMIT
    assert d["summary_detail"][0].startswith("Claim exactly-once: BROKEN; 1 kill(s) landed (1 could do damage)")
    assert "Warning: a warning." in d["summary_detail"][0] and "Audit error: ledger: connection refused." in whole(d)
