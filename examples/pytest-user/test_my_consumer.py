"""Crash-test the consumer of this project: the harness SIGKILLs it while it works, and counts its effects.

`crash_test` and `harness_stack` come from the harness's pytest plugin (installed with the harness). The
stack is the one `harness up` runs in $HARNESS_HOME (or .harness/), else one started for the session.
"""

import sys
from pathlib import Path

CONSUMER = Path(__file__).resolve().parent / "consumer.py"


def test_each_payment_is_charged_once_under_random_kills(crash_test):
    report = crash_test(worker_cmd=[sys.executable, str(CONSUMER)], expect="exactly-once",
                        kills=10, messages=20000)
    assert report.ok
