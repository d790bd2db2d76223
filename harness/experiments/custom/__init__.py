"""custom: the consumer a user brings (--worker-cmd), crash-tested against the claim it makes (--expect).

The harness did not write it, so it has no kill points: it is SIGKILLed at seeded random instants
(random-kill, or --kill-every), watched from outside (its group's timeline, its ledger rows), and
judged by the claim alone. custom_launch.py starts and watches it, custom_report.py and
custom_witnesses.py say what its kills did, with the effects that witness each duplicate and loss.
"""

from ...checker.predictors import CLAIMS, ClaimPredictor
from ..declaration import Experiment, Stores
from .custom_launch import AUDIT_SQL, EXPECT, WORKER_CMD, CustomWorkers, consumer_rule
from .custom_report import DEFAULT_CLAIM

CUSTOM = Experiment(
    name="custom",
    steps=("your consumer: poll, effect and offset commit in its own order",),
    kill_points=(),
    default_point=None,
    stores=Stores(ledger=True, output_if_written=True),
    # no allowance for a transaction left open: one the harness's stop left is excused only when its evidence
    # ties it to a worker the stop killed (reporting/stop_excuse.py); any other is the consumer's
    proves="Your consumer (--worker-cmd) keeps its claim (--expect, default exactly-once) under seeded SIGKILLs.",
    expected="no lost and/or no duplicated effect per id, as --expect claims; a violation names the ids and kills",
    predictors=(ClaimPredictor(DEFAULT_CLAIM),),
    launcher=CustomWorkers(),
    default_faults=("random-kill",),
    options=(WORKER_CMD, EXPECT, AUDIT_SQL),
    rules=(consumer_rule,),
    refuses={"commit_every": "your consumer commits its offsets as it likes (it applies to the harness's own workers)",
             "crash_rate": "its kills are random: --kills, --kill-every (it applies to the harness's own workers)"},
    variants={f"expect={c}": {"predictors": (ClaimPredictor(c),)} for c in CLAIMS},
    suite={"include": False},
)

