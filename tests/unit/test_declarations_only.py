"""No code outside the experiments package branches on an experiment's name.

The runner, checker, reports, suite and CLI read declarations; an experiment's
name may appear only in harness/experiments/ (its declaration), in the bench's
table of what it measures, in tests, docs and help examples.
"""

import re
from pathlib import Path

from harness.experiments import REGISTRY

HARNESS = Path(__file__).resolve().parents[2] / "harness"
ALLOWED = {"experiments", "bench"}       # declarations; the bench's table of measured cases
# Lines where the word is not an experiment: the dedupe and outbox *tables* are table kinds of a run, and
# the worker's arguments that name those tables (runtime/worker_args.py).
NOT_EXPERIMENTS = ('TABLE_KINDS = ("ledger", "dedupe", "rows", "outbox", "acct", "reject")',
                   'Arg("dedupe"),', 'Arg("outbox"),')


def test_experiment_names_appear_only_in_their_declarations():
    quoted = re.compile(r"""["'](%s)["']""" % "|".join(map(re.escape, REGISTRY)))
    offenders = []
    for f in HARNESS.rglob("*.py"):
        rel = f.relative_to(HARNESS)
        if rel.parts[0] in ALLOWED:
            continue
        for n, line in enumerate(f.read_text().splitlines(), 1):
            if quoted.search(line) and "name = " not in line and line.strip() not in NOT_EXPERIMENTS:
                offenders.append(f"{rel}:{n}: {line.strip()}")
    assert not offenders, "experiment names outside their declarations:\n" + "\n".join(offenders)
