"""A hand-made report.json, as the runner would write it, for rendering tests."""


def sample(experiment="offset-after", lost=0, dups=3, verdict="as-predicted"):
    return {
        "schema_version": 1, "run_id": f"20261129T183000-{experiment}", "experiment": experiment,
        "status": "complete", "proves": "At-least-once.", "steps": "poll, effect, commit offset",
        "params": {"messages": 10, "amount": 100, "crash_rate": 0.2, "seed": 25, "commit_every": 1,
                   "partitions": 1, "workers": 1, "kill_mode": "points"},
        "environment": {"kafka_version": "4.1.1", "librdkafka_version": "2.6.0", "postgres_version": "15.18",
                        "harness_version": "0.1.0", "git_sha": "abc1234", "command_line": "harness run x"},
        "stack": {"kind": "local", "bootstrap_servers": "127.0.0.1:19092",
                  "postgres_dsn": "postgresql://harness:***@127.0.0.1:15432/harness",
                  "input_topic": "harness.x.input", "output_topic": None,
                  "ledger_table": "harness.ledger_x", "dedupe_table": None},
        "crashes": [{"point": "after-effect-before-commit", "message_id": "pay-000003", "partition": 0,
                     "offset": 2, "unacked": ["pay-000003"], "worker": "w0", "attempt": 1, "time": 1.0}],
        "counts": {"sent": 10, "deliveries": 10 + dups, "effects": 10 - lost + dups, "duplicates": dups,
                   "lost": lost, "dedupe_hits": None},
        "predicted": {"duplicates": dups, "lost": lost, "dedupe_hits": None, "exact": True, "note": "",
                      "expectations": []},
        "kafka_output": None,
        "ledger": {"expected_total": 1000, "actual_total": 1000 + 100 * (dups - lost)},
        "anomalies": {"lost_ids": [], "lost_total": lost, "duplicate_ids": ["pay-000003"], "duplicates_total": dups},
        "verdict": verdict, "verdict_detail": {"failed": [], "differing_ids": {}},
        "timings": {"wall_seconds": 4.2, "restart_seconds": [0.2, 0.3], "restart_median_seconds": 0.25,
                    "restart_max_seconds": 0.3, "messages_per_second": 2.4},
        "timeline": {"progress": [[0, 0], [2, 5], [4, 10]], "crashes": [1.0], "restarts": [1.2]},
        "summary": f"{experiment}: {lost} lost and {dups} duplicated effects of 10 payments.",
    }
