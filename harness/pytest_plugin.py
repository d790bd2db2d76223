"""The pytest plugin: crash-test your own consumer from your own test suite.

Registered under the `pytest11` entry point, so installing the harness makes it
available in every pytest session; it stays inert until a test asks for one of
its fixtures (importing it imports pytest alone and starts nothing):

    def test_my_consumer_holds_exactly_once(crash_test):
        report = crash_test(worker_cmd=["python", "consumer.py"], expect="exactly-once", kills=10)
        assert report.ok

`harness_stack` (session scope) is the stack the runs use: the one that answers
in $HARNESS_HOME (or .harness/), left running, else a new one in a temporary
state folder, stopped and deleted at the end of the session (and by a guard
process if the session is killed). `crash_test(worker_cmd=..., **options)`
runs your consumer under random kills with those options
(harness.api.library.crash_test; another experiment or an experiment file by
`experiment=`) into the test's own folder and returns the Report. A failed `assert report.ok` shows the report's repr: the verdict,
the lost and duplicated ids and the report's path; `report.assert_ok()` raises
with every id kept.
"""

import pytest


@pytest.fixture(scope="session")
def harness_stack():
    """The running stack of $HARNESS_HOME, or one started for this session in a temporary state folder."""
    from harness.api.library import Stack
    stack = Stack.local()
    if not stack.answers():
        stack = Stack.temporary_folder()
    with stack:
        yield stack


@pytest.fixture
def crash_test(harness_stack, tmp_path):
    """A function: crash_test(worker_cmd=..., expect="exactly-once", kills=10, **options) -> harness.api.library.Report
    (harness.api.library.crash_test). With `experiment=` (a kind, or an experiment file) instead it runs that
    (harness.api.library.run). Each call writes its report under the test's tmp_path."""
    from harness.api import library as api
    calls = []

    def crash(worker_cmd=None, *, experiment=None, **options):
        calls.append(None)
        out = tmp_path / f"harness-report-{len(calls)}"
        if experiment is not None:
            if worker_cmd is not None:
                options["worker_cmd"] = worker_cmd
            return api.run(experiment, stack=harness_stack, out=out, **options)
        if worker_cmd is None:
            raise ValueError("crash_test needs worker_cmd (your consumer's command), or experiment=")
        return api.crash_test(worker_cmd, stack=harness_stack, out=out, **options)
    return crash
