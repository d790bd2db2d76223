"""The Numbers page's table comes from the reference reports: every figure names its report and command.

The real `reports/reference/` must give every figure a file that exists there and a `harness` command; a
hand-made reference folder shows that the values, machine, date and command are read from the reports
(change the report, the page changes), that a figure a report does not hold is `unknown`, and that a
missing or broken reference report fails the build with one line naming it.
"""

import json
import re
import shutil
from pathlib import Path

import pytest

from harness.cli import docs_numbers
from harness.cli import docs_pages

ROOT = Path(__file__).resolve().parents[2]
FILES = {"suite/suite.json", "bench/bench.json", "bench-scale/scale.json", "bench-streams/streams.json",
         "bench-protocols/protocols.json"}


def test_every_figure_comes_from_a_reference_report_and_names_its_command():
    figures = docs_numbers.figures()
    assert len(figures) >= 10, figures
    for f in figures:
        assert f.source.startswith("reports/reference/") and (ROOT / f.source).is_file(), f
        assert re.match(r"harness (suite|bench)\b", f.command), f
        assert re.fullmatch(r"\d{4}-\d{2}-\d{2}", f.date), f
        assert "cores" in f.machine and f.value and f.figure, f
    assert {f.source for f in figures} == {f"reports/reference/{p}" for p in FILES}


def test_the_page_part_is_one_table_with_a_row_per_figure():
    text = docs_pages.numbers_page()
    rows = [line for line in text.splitlines() if line.startswith("| ")]
    assert rows[0] == "| figure | value | machine | date | command | from |"
    assert len(rows) == 2 + len(docs_numbers.figures())   # the head, its rule, a row per figure
    assert all(line.count(" | ") == 5 for line in rows), rows


def env(**over):
    return {"cpus": 4, "platform": "Linux aarch64", "kafka_version": "9.9.9", "postgres_version": "16.1 (Debian)",
            "git_sha": "abc1234", "command_line": "harness bench --made-by-hand", **over}


def made(tmp_path: Path) -> Path:
    """A reference folder of hand-made reports, one per reader, with numbers no real run gave."""
    ref = tmp_path / "reference"
    reports = {
        "suite/suite.json": {
            "suite_id": "20250102T030405-suite", "parallel": 2, "command_args": ["--messages", "7"],
            "environment": env(command_line="harness run x"), "timings": {"wall_seconds": 12.3},
            "experiments": [
                {"experiment": "a", "verdict": "as-predicted", "seconds": 4.5, "timings": {"restart_median_seconds": 0.011}},
                {"experiment": "b", "verdict": "unexpected", "seconds": 6.5, "timings": {"restart_median_seconds": None}},
                {"experiment": "c", "verdict": "as-predicted", "seconds": 9.75,
                 "timings": {"restart_median_seconds": None}}]},
        "bench/bench.json": {
            "created": "2025-01-03T00:00:00Z", "environment": env(),
            "restart": {"fastest_correct": "static", "strategies": [
                {"strategy": "static", "median_seconds": 0.25}, {"strategy": "assign", "median_seconds": None}]},
            "throughput": {"cases": [{"case": "bare", "size_bytes": 100, "what": "a loop",
                                      "messages_per_second": {"median": 4321.0}},
                                     {"case": "eos-100ms", "size_bytes": 100, "what": "eos",
                                      "messages_per_second": {"median": 98765.4}}],
                           "ratios": [{"numerator": "eos-100ms", "denominator": "bare", "size_bytes": 100,
                                       "ratio": 22.857}]}},
        "bench-scale/scale.json": {
            "bench_id": "20250104T000000-bench-scale", "environment": env(command_line="harness bench scale"),
            "wall_seconds": 55.5, "cells": [
                {"experiment": "dedupe", "messages": 10, "partitions": 1, "workers": 1, "verdict": "as-predicted",
                 "restart_median_seconds": 0.5, "messages_per_second": 11.0},
                {"experiment": "dedupe", "messages": 1000, "partitions": 4, "workers": 2, "verdict": "as-predicted",
                 "restart_median_seconds": 0.75, "messages_per_second": 2468.0}]},
        "bench-streams/streams.json": {
            "bench_id": "20250105T000000-bench-streams", "environment": env(command_line="harness bench streams"),
            "summary": [{"lever": "cds", "restarts": 30, "restart_median_seconds": 0.123, "restart_p90_seconds": None,
                         "jvm_cpu_median": 0.45, "jvm": {"release": "21.0.1"}}]},
        "bench-protocols/protocols.json": {
            "bench_id": "20250106T000000-bench-protocols", "environment": env(command_line="harness bench protocols"),
            "summary": [{"row": "streams", "runs": 2, "restarts": 9, "restart_median_seconds": 5.061,
                         "stall_median_seconds": None, "client_settings": "Kafka Streams: group.protocol=streams"}]},
    }
    for rel, data in reports.items():
        (ref / rel).parent.mkdir(parents=True, exist_ok=True)
        (ref / rel).write_text(json.dumps(data))
    return ref


def test_the_figures_are_what_the_reports_say(tmp_path):
    by = {f.figure: f for f in docs_numbers.figures(made(tmp_path))}
    suite = next(f for n, f in by.items() if n.startswith("default suite: 3 experiments, 2 at a time"))
    assert suite.value == "12.3 s wall; 2 of 3 as-predicted; slowest c 9.75 s"
    assert suite.command == "harness suite --messages 7" and suite.date == "2025-01-02"
    assert suite.machine == "4 cores, Linux aarch64, Kafka 9.9.9, PostgreSQL 16.1, git abc1234"
    assert suite.source == "reports/reference/suite/suite.json"
    restarts = next(f for n, f in by.items() if n.startswith("worker restart inside the suite"))
    assert "1 of 3 runs measured one" in restarts.figure and restarts.value == "a 0.011 s"
    restart = next(f for n, f in by.items() if n.startswith("consumer restart"))
    assert restart.value == "static 0.25 s; assign unknown (fastest correct: static)"
    assert restart.date == "2025-01-03" and restart.command == "harness bench --made-by-hand"
    eos = next(f for n, f in by.items() if "`eos-100ms`" in n)
    assert eos.value == "100 B: 98,765 msg/s (22.857 of bare)"
    scale = next(f for n, f in by.items() if n.startswith("scale: `dedupe` at 1,000 payments"))
    assert scale.value == "4x2 2,468" and scale.date == "2025-01-04"
    lever = next(f for n, f in by.items() if "lever `cds`" in n)
    assert "Java 21.0.1" in lever.figure and lever.value == "median 0.123 s (p90 unknown); 0.45 CPU-s per JVM start"
    assert lever.command == "harness bench streams"
    row = next(f for n, f in by.items() if "group protocol `streams`" in n)
    assert "2 runs, 9 restarts" in row.figure and row.date == "2025-01-06"
    assert row.value == "restart 5.06 s; group stall unknown (Kafka Streams: group.protocol=streams)"


@pytest.mark.parametrize("broken", ["missing", "not json", "no environment"])
def test_a_missing_or_broken_reference_report_fails_with_one_line_naming_it(tmp_path, broken):
    ref = made(tmp_path)
    target = ref / "bench" / "bench.json"
    if broken == "missing":
        target.unlink()
    else:
        target.write_text("{" if broken == "not json" else json.dumps({"created": "x"}))
    with pytest.raises(docs_numbers.ReferenceError) as e:
        docs_numbers.figures(ref)
    assert str(target) in str(e.value) and "\n" not in str(e.value)


def test_the_real_reports_drive_the_page(tmp_path):
    """A copy of the real reference folder with one number changed changes that figure, and only it."""
    ref = tmp_path / "reference"
    for rel in FILES:
        (ref / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(docs_numbers.REFERENCE / rel, ref / rel)
    before = docs_numbers.figures(ref)
    suite = json.loads((ref / "suite/suite.json").read_text())
    suite["timings"]["wall_seconds"] = 4242.4
    (ref / "suite/suite.json").write_text(json.dumps(suite))
    after = docs_numbers.figures(ref)
    changed = [(a.figure, b.value) for a, b in zip(before, after) if a != b]
    assert len(changed) == 1 and "4,242.4 s wall" in changed[0][1], changed
