"""Hostile report data for the rendering tests: a full report, and the same with every value replaced.

`full_report()` is a valid report.json (docs/report.schema.json) with every section a renderer can
show filled in. `replace_strings(data, text)` puts `text` in every string leaf (and adds a key
`text` to every free-form map), so the same report can be rendered benign (`"x"`) and hostile
(HOSTILE) and the two compared line for line. `valid_hostile(data)` keeps only the replacements
the schema accepts: what a report that passes validation can still carry. `suite_summary()` is a
valid suite.json (docs/suite.schema.json).
"""

import copy

from tests.unit.sample_report import sample

# Newlines and a heading, HTML that runs script (element, attribute break-out, event handler), a
# Markdown link and image to javascript:, table pipes, code-span and fence backticks, rich markup,
# a terminal colour escape, a C1 CSI, a bidi override and a line separator.
HOSTILE = ("a\n# INJECTED HEADING\r\n<script>alert(1)</script>\" onmouseover=\"alert(2)\" '><img src=x "
           "onerror=alert(3)>|cell|[l](javascript:alert(4))![i](javascript:alert(5))``` `x` "
           "[bold red]rich[/bold red]\x1b[31mRED\x1b]8;;http://x\x07\x9b2J\u202e\u2028end")

# Maps whose keys are data, not field names: a hostile key goes in each.
FREE_MAPS = (("params",), ("environment",), ("stack",), ("fault_details",), ("timings", "phases"),
             ("verdict_detail", "differing_ids"), ("verdict_detail", "differing_totals"))


def full_report() -> dict:
    """A valid report with every optional section a renderer shows."""
    d = sample("custom", lost=1, dups=2, verdict="unexpected")
    d["lesson"] = "Mistake: x. Fix: y."
    d["stack"].update(output_topic="harness.x.output", accounts_table="harness.acct_x", rejects_table="harness.reject_x",
                      tables=["harness.ledger_x"], topics=["harness.x.input"], kafka_auth="SASL_SSL")
    d["params"].update(faults=["broker-pause"], audit_sql=None)
    d["faults"].append({"fault": "broker-pause", "time": 2.0, "target": "broker 1", "out_seconds": 1.5,
                        "until_answering_seconds": 2.5, "aborted_transactions": 1,
                        "read_committed_stall_seconds": 0.5})
    d["fault_details"] = {"broker-pause": {"times_since_pause": {"back": 1.25}, "note": "paused"}}
    d["counts"].update(unprocessed=1, dedupe_hits=2)
    d["anomalies"].update(lost_ids=["pay-000001"], unexpected_ids=["pay-999999"], unprocessed_ids=["pay-000009"],
                          unprocessed_total=1)
    d["kafka_output"] = {"read_committed": {"records": 10, "duplicates": 0, "lost": 0, "unprocessed": 0},
                         "read_uncommitted": {"records": 12, "duplicates": 2, "lost": 0, "unprocessed": 0},
                         "aborted_records": 2,
                         "delivery_log": {"acked": 10, "unacked": 0, "reordered": 1, "reordered_ids": ["pay-000004"]}}
    d["predicted"].update(note="a note", expectations=["ledger.duplicates <= 2", "producer.reordered <= 1"],
                          kafka_output={"read_committed": {"duplicates": 0, "lost": 0},
                                        "read_uncommitted": {"duplicates": 2, "lost": 0}},
                          evidence=[{"worker": "w0", "attempt": 1, "resumed_from": {"0": 4}, "last_applied": {"0": 6},
                                     "redelivered": 3, "skipped": 0}])
    d["accounts"] = {"expected_total": 300, "actual_total": 400, "accounts": [
        {"account": "acct-1", "expected": 100, "predicted": 200, "predicted_op": "<=", "actual": 200, "version": 0,
         "stale_updates": 0}]}
    d["verdict_detail"] = {"failed": ["ledger.duplicates: 2 > 1"], "differing_ids": {"duplicated": ["pay-000003"]},
                           "differing_totals": {"duplicated": 2}, "reason": "it differed",
                           "audit_errors": ["the output topic could not be read"],
                           "unplanned_deaths": [{"worker": "w0", "attempt": 2, "exit_code": 1, "time": 3.0}],
                           "left_behind": [{"pid": 4343, "command": "sleep 600"}]}
    d["worker_logs"] = {"cap_bytes": 5242880, "dropped_bytes": {"w0": 12, "w1": None}}
    d["summary_detail"] = ["The ledger's total was 1,300 of the expected 1,000.", "Audit error: x."]
    d["reuse"] = {"reused": 3, "applied": 0, "rejected": 1, "hidden": 1, "unreached": 1,
                  "reused_requests": [{"id": "pay-000002", "amount": 7, "partition": 0, "offset": 11}],
                  "hidden_ids": ["pay-000002"], "unreached_ids": ["pay-000005"], "rejected_ids": ["pay-000004"]}
    d["predicted"]["reuse"] = {"hidden": 0, "rejected": 3, "applied": 0}
    d["faults"].append({"fault": "overlap", "time": 3.0, "target": "w0 attempt 2", "message_id": "pay-000006",
                        "state": "done", "frozen_seconds": 0.05, "replaced_by": "attempt 3", "late_write": True})
    d["timings"]["phases"] = {"setup": 1.0, "workers": 2.0}
    d["timeline"]["faults"] = [{"fault": "broker-pause", "t": 1.0, "until": 2.0}]
    d["consumer"] = {
        "command": "python my.py", "claim": "exactly-once", "claim_held": False, "audit": "ledger",
        "membership": "group", "protocol": "classic", "session_timeout_ms": None,
        "members_tied": {"client.id": 2, "first appearance": 0}, "members_unidentified": 0,
        "kills_landed": 1, "kills_by_state": {"could do damage": 1, "after its last commit": 0, "before joining": 0},
        "first_commit_seconds": 1.0, "restart_median_seconds": 0.4, "restart_max_seconds": 0.5,
        "kills": [{"worker": "w0", "attempt": 1, "pid": 4242, "t": 2.5, "by": "random", "state": "could do damage",
                   "partitions": [0], "committed": {"0": 5}, "effects_since_commit": 2, "stall_seconds": 0.4,
                   "duplicates_explained": 2, "lost_explained": 0}],
        "starts": [{"worker": "w0", "attempt": 1, "pid": 4242, "t": 0.0}],
        "warnings": ["only 1 kill landed"],
        "witnesses": [{"id": "pay-000003", "kind": "duplicated", "partition": 0, "worker": "w0",
                       "effects": [{"t": 2.0, "worker": "w0", "attempt": 1},
                                   {"t": 2.6, "worker": None, "attempt": None, "owners": ["w0 attempt 2", "member m"]}],
                       "kills": [{"worker": "w0", "attempt": 1, "pid": 4242, "t": 2.5}], "explained_by": "kill"}]}
    return d


def string_paths(data, path=()):
    """The path of every string leaf."""
    if isinstance(data, dict):
        for k, v in data.items():
            yield from string_paths(v, path + (k,))
    elif isinstance(data, list):
        for i, v in enumerate(data):
            yield from string_paths(v, path + (i,))
    elif isinstance(data, str):
        yield path


def number_paths(data, path=()):
    """The path of every number leaf (not booleans)."""
    if isinstance(data, dict):
        for k, v in data.items():
            yield from number_paths(v, path + (k,))
    elif isinstance(data, list):
        for i, v in enumerate(data):
            yield from number_paths(v, path + (i,))
    elif isinstance(data, (int, float)) and not isinstance(data, bool):
        yield path


def put(data, path, value):
    for k in path[:-1]:
        data = data[k]
    data[path[-1]] = value


def get(data, path):
    for k in path:
        data = data[k]
    return data


def replace_strings(data: dict, text: str, maps=FREE_MAPS) -> dict:
    """A copy with every string leaf set to `text` and a key `text` added to each free-form map (with
    a value of the kind the map holds)."""
    out = copy.deepcopy(data)
    for path in list(string_paths(out)):
        put(out, path, text)
    for path in maps:
        m = get(out, path)
        sample_value = next(iter(m.values()), text) if m else text
        m[text] = copy.deepcopy(sample_value)
    return out


def valid_hostile(data: dict, check) -> dict:
    """A copy with HOSTILE in every string leaf (and free-form map key) that `check` (a validator
    raising on a bad report) still accepts, one replacement at a time."""
    out = copy.deepcopy(data)
    for path in list(string_paths(out)):
        before = get(out, path)
        put(out, path, HOSTILE)
        try:
            check(out)
        except Exception:  # noqa: BLE001 - the schema refuses it here: keep the benign value
            put(out, path, before)
    for path in FREE_MAPS:
        m = get(out, path)
        value = copy.deepcopy(next(iter(m.values()), HOSTILE)) if m else HOSTILE
        m[HOSTILE] = value
        try:
            check(out)
        except Exception:  # noqa: BLE001
            del m[HOSTILE]
    return out


def suite_summary(report_path="offset-after/report.json") -> dict:
    """A valid suite.json: one run with a report (at `report_path`), one that failed without."""
    d = sample()
    row = {"experiment": "offset-after", "report": report_path, "verdict": "as-predicted", "exit_code": 0,
           "seconds": 30.0, "counts": d["counts"], "ledger": d["ledger"], "crashes": 1, "kafka_output": None,
           "summary": d["summary"], "timings": {"wall_seconds": 4.2, "phases": {"setup": 1.0}},
           "params": d["params"], "environment": d["environment"]}
    failed = {"experiment": "eos", "report": None, "verdict": "failed", "exit_code": 3, "error": "it failed",
              "seconds": 2.0}
    return {"schema_version": 2, "suite_id": "20261129T190000-suite", "folder": "20261129T190000-suite",
            "command_args": ["--messages", "10"], "environment": {"kafka_version": "4.1.1"},
            "experiments": [row, failed], "conclusion": "Exactly-once held nowhere.",
            "timings": {"wall_seconds": 32.0}, "parallel": 1, "exit_code": 1, "group": None}
