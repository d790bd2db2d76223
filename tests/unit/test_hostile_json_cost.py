"""A hostile report.json or suite.json costs little to refuse: under a second and 200 MB, one line.

The review's case: a crafted 63 MiB report cost 62 s and 3.4 GB before its one-line refusal. Each file
here is refused by `compare`, `report` and `audit`'s reader (`validate.read_report` / `read_suite`) in a
fresh interpreter whose peak memory (VmHWM) and time are measured; the time bound is generous, a
sanity check on a loaded machine, the memory bound is the promise. The reason each gives says which
bound it broke, and the size and value-count bounds are checked on the raw bytes, before any parsing.
"""

import json
import subprocess
import sys

import pytest

from harness.reporting import validate
from tests.conftest import ROOT, harness

# Peak memory as VmHWM (the high-water mark of this process's own address space, new at exec): ru_maxrss
# would carry over the pytest process's peak through fork and exec, and hide the reader's.
MEASURE = r"""
import sys, time
t0 = time.monotonic()
from harness.core.errors import HarnessError
from harness.reporting import validate


def peak_kib():
    with open("/proc/self/status") as f:
        return int(next(line for line in f if line.startswith("VmHWM:")).split()[1])


base = peak_kib()
try:
    getattr(validate, sys.argv[2])(sys.argv[1])
    print("accepted")
except HarnessError as e:
    print(str(e))
print(peak_kib() - base, time.monotonic() - t0)
"""


def _refusal(path, reader="read_report") -> tuple[str, float, float]:
    """(the refusal's line, the extra peak memory in MB, the seconds) of reading `path` in a new process."""
    proc = subprocess.run([sys.executable, "-c", MEASURE, str(path), reader], capture_output=True, text=True,
                          cwd=ROOT, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    line, cost = proc.stdout.strip().splitlines()
    kib, seconds = cost.split()
    return line, int(kib) / 1024, float(seconds)


def _items_report(count: int) -> bytes:
    """A report-looking object whose `crashes` list holds `count` empty objects (3 bytes each)."""
    return b'{"experiment": "dedupe", "schema_version": 4, "crashes": [' + b",".join([b"{}"] * count) + b"]}"


@pytest.fixture
def run(tmp_path):
    folder = tmp_path / "run"
    folder.mkdir()
    return folder


def test_a_63_mib_report_is_refused_by_its_size_before_it_is_read(run):
    (run / "report.json").write_bytes(_items_report(22_200_000))      # real JSON (63.5 MiB), not a sparse file
    assert (run / "report.json").stat().st_size > 63 * 1024 * 1024
    line, mb, seconds = _refusal(run / "report.json")
    assert str(run / "report.json") in line and f"{validate.MAX_BYTES // 2 ** 20} MiB" in line, line
    assert mb < 200 and seconds < 30, (mb, seconds)


def test_a_report_of_millions_of_tiny_values_under_the_size_bound_is_refused_by_their_count(run):
    text = _items_report(5_000_000)           # 15 MiB: 5 million objects
    assert len(text) < validate.MAX_BYTES
    (run / "report.json").write_bytes(text)
    line, mb, seconds = _refusal(run / "report.json")
    assert str(run / "report.json") in line and f"{validate.MAX_VALUES:,} values" in line, line
    assert mb < 200 and seconds < 30, (mb, seconds)


@pytest.mark.parametrize("depth", [validate.MAX_DEPTH + 1, 900_000])
def test_a_deeply_nested_suite_is_refused(run, depth):
    (run / "suite.json").write_bytes(b'{"experiments": ' + b"[" * depth + b"]" * depth + b"}")
    line, mb, seconds = _refusal(run / "suite.json", "read_suite")
    assert str(run / "suite.json") in line and (f"deeper than {validate.MAX_DEPTH}" in line
                                                 or f"{validate.MAX_BYTES // 2 ** 20} MiB" in line), line
    assert mb < 200 and seconds < 30, (mb, seconds)


def test_the_value_count_is_not_fooled_by_commas_inside_strings_of_an_ordinary_report(run):
    """Brackets and commas inside strings count too (the count is on the raw bytes, so it can only err
    towards refusing); an ordinary report is far below the bound."""
    sample = (ROOT / "reports" / "reference" / "suite" / "eos-streams" / "report.json").read_bytes()
    assert sample.count(b",") + sample.count(b"[") + sample.count(b"{") < validate.MAX_VALUES // 100


def test_compare_says_it_in_one_line_exit_2(run):
    (run / "report.json").write_bytes(_items_report(5_000_000))
    proc = harness("compare", str(run), timeout=300)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    lines = [x for x in proc.stderr.splitlines() if x.strip()]
    assert len(lines) == 1 and "values" in lines[0], proc.stderr[-2000:]
