"""Hand-made report.json data, as the runner writes it (schema 2), and one of schema 1 for `compare`."""

import functools
import json
from pathlib import Path

DOCS = Path(__file__).resolve().parents[2] / "docs"


@functools.cache
def _validator(name: str):
    """The schema's validator, its schema checked once: jsonschema.validate checks the schema again on every
    call, which made the tests that validate a report once per field take a minute."""
    import jsonschema
    schema = json.loads((DOCS / name).read_text())
    cls = jsonschema.validators.validator_for(schema)
    cls.check_schema(schema)
    return cls(schema)


def _check(name: str, data) -> None:
    import jsonschema
    error = jsonschema.exceptions.best_match(_validator(name).iter_errors(data))
    if error is not None:
        raise error


def validate(data: dict) -> None:
    """Raise unless `data` follows docs/report.schema.json."""
    _check("report.schema.json", data)


def validate_suite(data: dict) -> None:
    """Raise unless `data` follows docs/suite.schema.json."""
    _check("suite.schema.json", data)


def sample(experiment="offset-after", lost=0, dups=3, verdict="as-predicted"):
    return {
        "schema_version": 4, "run_id": f"20261129T183000-{experiment}", "experiment": experiment,
        "status": "complete", "proves": "At-least-once.", "steps": "poll, effect, commit offset",
        "kill_points": [{"name": "after-effect-before-commit", "after": "effect", "before": "commit offset",
                         "damage": ["duplicated"], "says": "applied again"}],
        "params": {"experiment": experiment, "messages": 10, "amount": 100, "crash_rate": 0.2, "seed": 25,
                   "commit_every": 1, "partitions": 1, "workers": 1, "kill_mode": "points", "kills": 10,
                   "kill_point": None, "time_limit": 600.0, "faults": []},
        "environment": {"kafka_version": "4.1.1", "librdkafka_version": "2.6.0", "postgres_version": "15.18",
                        "harness_version": "0.1.0", "git_sha": "abc1234", "command_line": "harness run x"},
        "stack": {"kind": "local", "bootstrap_servers": "127.0.0.1:19092",
                  "postgres_dsn": "postgresql://harness:***@127.0.0.1:15432/harness",
                  "input_topic": "harness.x.input", "output_topic": None, "consumer_group": "harness-x",
                  "ledger_table": "harness.ledger_x", "dedupe_table": None},
        "faults_configured": [{"fault": "planned-crash", "rate": 0.2, "point": None,
                               "points": ["after-effect-before-commit"]}],
        "faults": [{"fault": "planned-crash", "time": 1.0, "target": "w0 attempt 1",
                    "point": "after-effect-before-commit", "message_id": "pay-000003"}],
        "fault_details": {},
        "crashes": [{"point": "after-effect-before-commit", "message_id": "pay-000003", "partition": 0,
                     "offset": 2, "worker": "w0", "attempt": 1, "time": 1.0, "unacked": ["pay-000003"],
                     "acked_unapplied": [], "produced": [], "by": "worker", "restart_seconds": 0.2,
                     "read_committed_stall_seconds": None}],
        "counts": {"sent": 10, "deliveries": 10 + dups, "effects": 10 - lost + dups, "duplicates": dups,
                   "lost": lost, "unprocessed": 0, "dedupe_hits": None},
        "predicted": {"duplicates": dups, "lost": lost, "dedupe_hits": None, "exact": True, "note": "",
                      "expectations": [], "kafka_output": None},
        "kafka_output": None,
        "ledger": {"expected_total": 1000, "actual_total": 1000 + 100 * (dups - lost)},
        "anomalies": {"lost_ids": [], "lost_total": lost, "duplicate_ids": ["pay-000003"], "duplicates_total": dups,
                      "unexpected_ids": [], "unprocessed_ids": [], "unprocessed_total": 0},
        "verdict": verdict,
        "verdict_detail": {"failed": [], "differing_ids": {}, "differing_totals": {}, "reason": None,
                           "audit_errors": [], "unplanned_deaths": [],
                           "killed_at_stop": [{"worker": "w0", "attempt": 2, "pid": 4242, "time": 1.5}]},
        "timings": {"wall_seconds": 4.2, "restart_seconds": [0.2, 0.3], "restart_median_seconds": 0.25,
                    "restart_max_seconds": 0.3, "read_committed_stall_median_seconds": None,
                    "read_committed_stall_max_seconds": None, "messages_per_second": 2.4},
        "restarts": 1,
        "timeline": {"progress": [[0, 0], [2, 5], [4, 10]], "crashes": [1.0], "restarts": [1.2], "faults": []},
        "anomaly_classes": None,
        "summary": f"{experiment}: {lost} lost and {dups} duplicated effects of 10 payments.",
    }


def sample_v1(experiment="offset-after", lost=0, dups=3, verdict="as-predicted"):
    """A report as schema 1 wrote it (before kill points, faults and unknown counts)."""
    d = sample(experiment, lost, dups, verdict)
    d["schema_version"] = 1
    for k in ("kill_points", "faults_configured", "faults", "fault_details", "restarts"):
        d.pop(k)
    d["counts"].pop("unprocessed")
    d["crashes"] = [{k: c[k] for k in ("point", "message_id", "partition", "offset", "unacked", "worker",
                                       "attempt", "time")} for c in d["crashes"]]
    d["verdict_detail"] = {"failed": [], "differing_ids": {}}
    d["anomalies"] = {k: d["anomalies"][k] for k in ("lost_ids", "lost_total", "duplicate_ids", "duplicates_total")}
    return d
