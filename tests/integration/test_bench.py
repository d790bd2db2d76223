"""`harness bench` on the real stack: a tiny run yields a well-formed report.

A benchmark, not a timed test: nothing here asserts how fast anything is,
only that every number was measured, is positive, and is recorded with how
it was measured.
"""

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from harness.cli.commands.bench import bench
from harness.core.errors import HarnessError
from tests.conftest import pids_where

pytestmark = pytest.mark.integration


def _bench_workers() -> list[int]:
    return pids_where(lambda cmd: "harness" in cmd and ("restart_worker" in cmd or "bare_worker" in cmd))


def test_tiny_bench_report_is_well_formed(stack, tmp_path):
    out = tmp_path / "bench"
    result = CliRunner().invoke(bench, [
        "--messages", "30", "--fast-messages", "200", "--repetitions", "1", "--sizes", "100",
        "--restart-kills", "1", "--strategies", "assign,static", "--quiet", "--out", str(out)],
        env=stack["env"], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    assert result.stdout.strip().splitlines()[-1] == str(out)

    d = json.loads((out / "bench.json").read_text())
    for key in ("schema_version", "kind", "bench_id", "status", "parameters", "environment", "broker_settings",
                "stack", "restart", "throughput", "summary", "caveats", "wall_seconds"):
        assert key in d, key
    assert d["status"] == "complete" and d["kind"] == "bench"
    assert d["environment"]["kafka_version"] and d["environment"]["librdkafka_version"]

    r = d["restart"]
    assert r["method"] and r["environment"] and r["parameters"]["strategies"] == ["assign", "static"]
    assert [s["strategy"] for s in r["strategies"]] == ["assign", "static"]
    for s in r["strategies"]:
        assert s["measured"] == 1 and s["timeouts"] == 0
        assert s["median_seconds"] > 0 and s["max_seconds"] > 0
        k = s["kills"][0]
        assert k["first_offset"] == k["expected_offset"], s
        assert s["correct"], s
    assert r["fastest_correct"] in ("assign", "static")

    t = d["throughput"]
    assert t["method"] and t["environment"] and t["parameters"]["sizes"] == [100]
    names = {c["case"] for c in t["cases"]}
    assert {"bare", "offset-after", "dedupe", "eos-10ms", "eos-100ms", "eos-1000ms", "eos-dedupe-100ms"} <= names
    for c in t["cases"]:
        assert c["method"] and c["parameters"]["payload_bytes"] == 100
        assert len(c["runs"]) == 1
        assert c["messages_per_second"]["median"] > 0, c
        assert all(run["rate"] > 0 and run["exact"] for run in c["runs"]), c
    assert any(x["numerator"] == "offset-after" and x["denominator"] == "bare" for x in t["ratios"])

    md, html = (out / "bench.md").read_text(), (out / "bench.html").read_text()
    assert "## Restart latency by strategy" in md and "## Throughput with no crashes" in md
    assert html.count("<svg") >= 2 and 'id="chart-restart"' in html and "<script" not in html
    assert "http://" not in html and "https://" not in html        # self-contained
    password = stack["dsn"].split("@")[0].split(":")[-1]
    for f in ("bench.json", "bench.md", "bench.html"):
        assert password not in (out / f).read_text(), f"password in {f}"
    assert not _bench_workers(), "benchmark consumer processes left behind"


def test_bad_sizes_is_one_clear_error():
    result = CliRunner().invoke(bench, ["--sizes", "big", "--skip-restart"])
    assert isinstance(result.exception, HarnessError)
    assert "--sizes" in str(result.exception)


def test_tiny_scale_bench_measures_every_cell(stack, tmp_path):
    from tests.conftest import harness
    out = tmp_path / "scale"
    proc = harness("bench", "scale", "--messages", "100,300", "--shapes", "1x1,2x2", "--experiments", "offset-after",
                   "--crash-rate", "0.02", "--quiet", "--out", str(out), env=stack["env"], timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.strip().splitlines()[-1] == str(out)
    d = json.loads((out / "scale.json").read_text())
    assert d["status"] == "complete" and len(d["cells"]) == 4
    for c in d["cells"]:
        assert c["verdict"] == "as-predicted" and c["seconds"] > 0 and c["messages_per_second"] > 0
        assert c["crashes"] >= 1 and c["worker_peak_rss_mb"] > 0
        assert c["broker_memory_mb"]["VmRSS"] > 0
    assert [g["shape"] for g in d["growth"]] == ["1x1", "2x2"]
    assert all(g["marginal_seconds_per_1000"] is not None for g in d["growth"])
    assert "## Growth" in (out / "scale.md").read_text() and 'id="chart-scale"' in (out / "scale.html").read_text()
    assert not _bench_workers()


@pytest.mark.slow          # a JVM per restart and lever; the bench's report shape is tested by the tiny bench
def test_tiny_streams_bench_times_each_restart_phase_per_lever(stack, tmp_path):
    """Each lever really starts its JVMs as it says (the report's streams_jvm), and the phases of a restart
    are read from the workers' own timestamps: none unknown, and none longer than the restart itself."""
    from harness.bench.streams_report import ALL_PHASES, PHASES
    from harness.experiments.streams_jvm import aot_java
    from tests.conftest import harness
    levers = ["plain", "cds"] + (["aot"] if aot_java() else [])
    out = tmp_path / "streams"
    proc = harness("bench", "streams", "--levers", ",".join(levers), "--repetitions", "1", "--messages", "100",
                   "--quiet", "--out", str(out), env=stack["env"], timeout=900)
    assert proc.returncode == 0, proc.stderr[-2000:]
    d = json.loads((out / "streams.json").read_text())
    assert d["status"] == "complete" and [c["lever"] for c in d["cells"]] == levers
    for c in d["cells"]:
        assert c["verdict"] == "as-predicted" and c["crashes"] == 10 and c["restarts_timed"] == 10
        assert c["jvm"]["asked"] == c["lever"] and c["jvm"]["cache"] == {"plain": None}.get(c["lever"], c["lever"])
        phases = c["phase_medians"]
        assert set(phases) == {f"{a}->{b}" for a, b, _ in ALL_PHASES}
        assert all(v is not None and v >= 0 for v in phases.values()), phases
        restart = [phases[f"{a}->{b}"] for a, b, _ in PHASES]
        assert max(restart) <= c["restart_p90_seconds"], (phases, c["restart_p90_seconds"])
        assert 0 < c["jvm_cpu_median"] <= c["cpu_seconds_per_crash"] * 2, c      # the JVM's own CPU, from CRASH
        assert c["cpu_seconds_per_crash"] > 0
    report = json.loads((out / f"{levers[-1]}-1" / "report.json").read_text())
    assert report["params"]["streams_jvm"] == levers[-1]
    assert "## Per lever" in (out / "streams.md").read_text() and "<h2>Per lever</h2>" in (out / "streams.html").read_text()
