"""The report builder on hand-made runs: every report it writes follows the schema, unknowns stay null."""

from pathlib import Path
from types import SimpleNamespace

from harness.runtime.crashplan import CrashPlan
from harness.checker.observe import observe_run
from harness.checker.kafka_output import audit_records
from harness.checker.ledger import LedgerRows
from harness.checker.run_outcome import decide
from harness.experiments import get
from harness.faults import build as build_faults
from harness.workers.supervisor import SupervisorResult
from harness.run.params import RunParams
from harness.run.runner import Run
from harness.reporting.build import assemble
from harness.stack.stack import Stack
from harness.workload.naming import RunNames
from tests.unit.sample_report import validate
from harness.reporting.summary import whole

AMOUNTS = {f"pay-{i:06d}": 100 for i in range(1, 6)}
POSITIONS = {k: (0, i) for i, k in enumerate(AMOUNTS)}
STACK = Stack("external", "127.0.0.1:1", "postgresql://harness:S3cret@127.0.0.1:1/harness", owned=False)


def make(name, rows=None, output=None, crashes=(), status="complete", error=None, committed=None, deaths=(),
         stopped=(), **params):
    p = RunParams(name, messages=5, **params)
    exp = get(name).resolve(p)
    import shutil
    import tempfile
    # Deleted as soon as the report is built: an atexit hook left these folders behind when pytest was SIGTERMed.
    folder = tempfile.mkdtemp(prefix="harness-builder-")
    try:
        return _built(folder, name, rows, crashes, output, status, committed, error, deaths, stopped, p, exp)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _built(folder, name, rows, crashes, output, status, committed, error, deaths, stopped, p, exp) -> dict:
    r = Run(p, exp, RunNames("20261130T000000-x"), STACK, Path(folder),
            amounts=AMOUNTS)
    r.progress = SimpleNamespace(samples=[[0.5, 2], [1.0, 5]], committed=committed, t0=0.0)
    faults = build_faults(p, exp)
    CrashPlan.make(r.sent_ids, 0.0, p.seed).save(r.crash_plan)      # as the runner does: the faults amend it
    for f in faults:
        f.setup(r)
    audit = observe_run(exp, STACK, r.names, AMOUNTS, POSITIONS, committed, status == "complete",
                      ledger_reader=lambda *a: LedgerRows(
                          rows, 0 if exp.stores.dedupe else None, error,
                          dedupe_rows=[] if exp.stores.dedupe and not error else None, dedupe_error=error),
                      output_reader=lambda b, t, sent, amounts: audit_records(
                          sent, {"read_committed": output or [], "read_uncommitted": output or []}, None, amounts))
    events = [{"event": "first_message", "worker": "w0", "attempt": 2, "t": 1.5},
              {"event": "done", "worker": "w0", "attempt": 2, "t": 2.0, "delivered": 5}]
    result = SupervisorResult(status=status, restarts=len(crashes), wall_seconds=2.0, events=events,
                              unplanned_deaths=list(deaths), killed_at_stop=list(stopped))
    outcome = decide(exp, p, list(crashes), result, faults, audit, amounts=r.amounts, positions=r.positions,
                     accounts=r.accounts, run_dir=r.run_dir)
    return assemble(r, faults, True, result, list(crashes), audit, outcome, stalls=None).data


def crash(msg, point, **lists):
    return {"point": point, "message_id": msg, "partition": 0, "offset": 1, "worker": "w0", "attempt": 1,
            "time": 1.0, "delivered": 2, **lists}


def test_an_offset_after_report_is_whole_and_as_predicted():
    rows = [(i, 100) for i in AMOUNTS] + [("pay-000002", 100)]
    d = make("offset-after", rows, crashes=[crash("pay-000002", "after-effect-before-commit", unacked=["pay-000002"])])
    validate(d)
    assert d["verdict"] == "as-predicted" and d["counts"]["duplicates"] == 1 and d["counts"]["deliveries"] == 7
    assert d["crashes"][0]["restart_seconds"] == 0.5 and d["faults"][0]["fault"] == "planned-crash"
    assert "S3cret" not in str(d)


def test_a_failed_audit_is_null_everywhere_and_says_why():
    d = make("dedupe", None, error="connection refused")
    validate(d)
    assert d["verdict"] == "audit-failed"
    assert (d["counts"]["effects"], d["counts"]["lost"], d["ledger"]["actual_total"]) == (None, None, None)
    assert d["verdict_detail"]["audit_errors"] == ["ledger: connection refused", "dedupe table: connection refused"]
    assert "unknown lost" in whole(d) and "connection refused" in whole(d)


def test_an_eos_report_with_output_and_an_interrupted_one():
    out = [(i, f'{{"id": "{i}", "amount": 100}}'.encode()) for i in AMOUNTS]
    d = make("eos", output=out)
    validate(d)
    assert d["verdict"] == "as-predicted" and d["kafka_output"]["read_committed"]["records"] == 5
    d = make("offset-before", [("pay-000001", 100)], status="interrupted", committed={0: 2})
    validate(d)
    assert d["verdict"] == "interrupted"
    assert (d["counts"]["lost"], d["counts"]["unprocessed"]) == (1, 3)
    assert "3 payments not yet processed" in whole(d)


def test_an_interrupted_run_names_the_busy_workers_its_stop_killed():
    """A worker SIGKILLed by the stop did work nobody described: the numbers it can change are bounds,
    and the report says which worker it was; with no worker busy at the stop, the prediction stays exact."""
    from harness.reporting import html, markdown
    from harness.reporting.run_report import RunReport
    stopped = [{"worker": "w0", "attempt": 2, "pid": 4242, "time": 1.9}]
    d = make("offset-before", [("pay-000001", 100)], status="interrupted", committed={0: 2}, stopped=stopped)
    validate(d)
    assert d["predicted"]["exact"] is False and d["verdict_detail"]["killed_at_stop"] == stopped
    assert "SIGKILLed 1 busy worker(s) where they stood (w0 attempt 2)" in whole(d)
    assert "SIGKILLed by the stop:** w0 attempt 2 (pid 4242)" in markdown.render(RunReport(d))
    assert "SIGKILLed by the stop: w0 attempt 2 (pid 4242)" in html.render(RunReport(d))
    d = make("offset-before", [("pay-000001", 100)], status="interrupted", committed={0: 2})
    validate(d)
    assert d["predicted"]["exact"] is True and d["verdict_detail"]["killed_at_stop"] == []
    assert "busy worker" not in whole(d)


def test_zombie_report_carries_the_fault_story():
    out = [(i, f'{{"id": "{i}", "amount": 100}}'.encode()) for i in AMOUNTS]
    d = make("zombie", output=out)
    validate(d)
    # the fault never ran here, so the zombie was not fenced: the verdict says so
    assert d["verdict"] == "unexpected" and "fault.zombie.fenced: predicted == 1, observed 0" in d["verdict_detail"]["failed"]


def test_unplanned_deaths_are_said_even_when_as_predicted():
    from harness.reporting import markdown
    from harness.reporting.run_report import RunReport
    rows = [(i, 100) for i in AMOUNTS]
    deaths = [{"worker": "w0", "attempt": n, "exit_code": -9, "time": 1.0 + n} for n in range(1, 5)]
    d = make("offset-after", rows, deaths=deaths)
    validate(d)
    assert d["verdict"] == "as-predicted"
    assert "4 worker death(s) no fault caused" in whole(d)
    assert ("unplanned worker deaths", "supervisor", "4", "") in RunReport(d).scoreboard()
    assert "within the predicted bounds" in whole(d)
    assert "4 worker death(s) no fault caused:** w0 attempt 1 (exit -9)" in markdown.render(RunReport(d))


def test_a_fault_that_did_less_than_asked_says_so():
    rows = [(i, 100) for i in AMOUNTS]
    d = make("offset-after", rows, kill_mode="random", kills=10)
    assert "Only 0 of 10 random kills struck" in whole(d)
    d = make("offset-after", rows, crash_rate=0.4)      # 2 planned, none struck in this hand-made run
    assert "0 of 2 planned crashes struck" in whole(d)


def test_time_breakdown_splits_the_workers_time_and_never_invents_a_negative():
    from harness.reporting.build import breakdown
    b = breakdown({"setup": 0.2, "produce": 0.5, "workers": 10.0, "audit": 1.0}, [0.5, 0.7, 1.0])
    assert b["restart_waits"] == 2.2 and b["workers_other"] == 7.8 and b["setup"] == 0.2
    overlapping = breakdown({"workers": 1.0}, [0.6, 0.6])       # two workers restarting at once
    assert overlapping["restart_waits"] == 1.2 and overlapping["workers_other"] is None
    assert breakdown({}, [0.5]) == {}                            # the workers never ran: nothing to split


def test_suite_time_table_lists_the_longest_run_first():
    from harness.reporting.suite_report import TIME_COLUMNS, render_md, time_rows
    rows = [{"experiment": "a", "seconds": 10, "crashes": 3,
             "timings": {"phases": {"setup": 1, "workers": 8, "restart_waits": 5, "audit": 0.5},
                         "restart_median_seconds": 0.4}},
            {"experiment": "b", "seconds": 30, "crashes": 1, "timings": None}]
    t = time_rows({"experiments": rows})
    assert [r[0] for r in t] == ["b", "a"] and len(t[0]) == len(TIME_COLUMNS)
    assert t[1][TIME_COLUMNS.index("of which restart waits")] == "5" and t[0][2] == "unknown"
    md = render_md({"suite_id": "s", "conclusion": "c", "experiments": rows, "timings": {"wall_seconds": 31}})
    assert "## Where the time went" in md


def test_scale_growth_fits_a_line_and_names_sizes_off_it():
    from harness.bench.scale import growth, parse_shapes
    cells = [{"experiment": "dedupe", "partitions": 1, "workers": 1, "messages": n, "seconds": t,
              "verdict": "as-predicted"} for n, t in ((1000, 5.0), (10_000, 32.0), (100_000, 302.0))]
    g = growth(cells)[0]
    assert g["fixed_seconds"] == 2.0 and g["marginal_seconds_per_1000"] == 3.0 and g["note"] is None
    assert g["seconds_per_1000"] == {1000: 5.0, 10_000: 3.2, 100_000: 3.02}
    cells[1]["seconds"] = 80.0                                 # the middle size far above the line
    assert "10,000 messages took" in growth(cells)[0]["note"]
    cells[1]["verdict"] = "unexpected"                         # only as-predicted runs are measured
    assert 10_000 not in growth(cells)[0]["seconds_per_1000"]
    assert parse_shapes("1x1, 4X2") == [(1, 1), (4, 2)]


def test_a_runs_repr_shows_none_of_its_logins():
    """The Run's repr (a traceback, a debug line) printed the consumers' DSN and Kafka login with passwords."""
    r = Run(RunParams("offset-after", messages=5), get("offset-after").resolve(RunParams("offset-after", messages=5)),
            RunNames("20261130T000000-x"), STACK, Path("/nonexistent"), amounts=AMOUNTS)
    r.worker_dsn = "host=127.0.0.1 user=harness_run_x password=s3cret-pg"
    r.kafka_login = {"sasl.username": "harness_run_x", "sasl.password": "s3cret-kafka"}
    text = repr(r)
    assert "s3cret" not in text and "harness_run_x" not in text
