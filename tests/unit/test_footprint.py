"""The disk estimate of a run's workload and its refusal (harness/workload/footprint.py), on hand-made stores."""

from harness.experiments.declaration import Stores
from harness.workload import footprint
from harness.workload.footprint import MIN_VALUE_BYTES, RECORD_OVERHEAD_BYTES, RESERVE_BYTES, ROW_BYTES, estimate, refusal


def test_a_ledger_experiment_writes_the_input_once_and_a_row_per_payment():
    fp = estimate(1000, 5000, Stores(ledger=True))
    assert fp.bytes == 1000 * (5000 + RECORD_OVERHEAD_BYTES + ROW_BYTES)
    assert fp.describe() == "input topic x1, ledger rows"


def test_each_topic_counts_once_per_replica_and_each_table_once():
    fp = estimate(10, 1000, Stores(ledger=True, dedupe=True, output=True), replicas=3)
    assert fp.bytes == 10 * ((1000 + RECORD_OVERHEAD_BYTES) * 2 * 3 + ROW_BYTES * 2)
    assert fp.copies == ["input topic x3", "output topic x3", "ledger rows", "dedupe table rows"]


def test_an_unpadded_payment_is_not_counted_as_empty():
    assert estimate(1, 0, Stores()).bytes == MIN_VALUE_BYTES + RECORD_OVERHEAD_BYTES


def test_the_reviews_100_gb_workload_is_refused_with_both_numbers():
    fp = estimate(1_000_000, 100_000, Stores(ledger=True))
    line = refusal(fp, 1_000_000, 100_000, "/state", 40 * 10 ** 9)
    assert line is not None and "\n" not in line
    assert "about 101.1 GB" in line and "/state has 40.0 GB free" in line
    assert "1,000,000 payments of 100,000 bytes" in line and "an estimate" in line


def test_a_workload_that_fits_with_the_reserve_is_let_through():
    fp = estimate(1000, 0, Stores(ledger=True))
    assert refusal(fp, 1000, 0, "/state", fp.bytes + RESERVE_BYTES) is None
    assert refusal(fp, 1000, 0, "/state", fp.bytes + RESERVE_BYTES - 1) is not None


def test_sizes_read_as_a_person_writes_them():
    assert footprint._size(999) == "999 B"
    assert footprint._size(1_500_000) == "1.5 MB"
    assert footprint._size(3 * 10 ** 15) == "3000.0 TB"


def test_harness_run_refuses_before_anything_is_made(tmp_path, monkeypatch):
    """The command's check, with the state folder's disk made small: one line, exit 2, no folder made."""
    import shutil
    from collections import namedtuple

    import pytest

    from harness.cli.commands.run import _check_workload_fits
    from harness.core.errors import HarnessError
    from harness.experiments import REGISTRY
    from harness.run.params import RunParams, resolve
    state = tmp_path / "state"
    monkeypatch.setenv("HARNESS_HOME", str(state))
    usage = namedtuple("usage", "total used free")
    monkeypatch.setattr(shutil, "disk_usage", lambda p: usage(10 ** 10, 0, 10 ** 9))
    params = resolve(RunParams("offset-before", messages=100_000, payload_bytes=10_000)).params
    with pytest.raises(HarnessError) as e:
        _check_workload_fits(params, REGISTRY["offset-before"])
    assert e.value.exit_status == 2 and "has 1.0 GB free" in str(e.value) and "1.6 GB" in str(e.value)
    assert not state.exists()
    _check_workload_fits(resolve(RunParams("offset-before", messages=1000)).params, REGISTRY["offset-before"])
