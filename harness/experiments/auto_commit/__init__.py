"""auto-commit: the consumer's defaults, `enable.auto.commit=true`, and what a SIGKILL costs with them.

The worker polls, applies each effect, and never commits: librdkafka commits
in the background every `auto.commit.interval.ms` (5000 ms unless
`--auto-commit-interval-ms` says otherwise) the offsets of every record
`consume()` has *handed out*, applied or not. A kill therefore costs either
way: effects applied after the last auto-commit are applied again
(duplicates), and records handed out, committed, and not yet applied are never
seen again (lost). (The classic Java consumer commits inside `poll()`, after a
synchronous loop has finished the previous batch, so there it only
duplicates; librdkafka's timer can also lose.)

The supervisor's random SIGKILLs strike at instants the worker does not
choose, so its crash log says nothing of what was in flight. The prediction
comes from two other pieces of evidence instead:

- where each attempt started: the committed offsets it fetched (its
  `started` event), which is what the broker had committed when its
  predecessor died, as far as the successor is concerned;
- what each attempt applied: the worker appends each applied effect's
  partition and offset to `applied.jsonl` right after the effect commits.

Attempt k applied, per partition, the offsets from its start to its last
logged one; counting how many attempts cover each offset gives the
duplicates (covered more than once) and the losses (never covered). One thing
stays unknown: a kill between an effect's commit and its log line leaves one
applied effect unlogged, which can turn a loss into nothing or add one
duplicate. So the prediction is a range, as wide as the number of kills.
"""

from __future__ import annotations

from ...core.options import Option
from ..declaration import Experiment, Stores
from .auto_commit_loops import auto_commit_loop
from .auto_commit_predictors import AutoCommitPredictor

# The consumer's defaults, as an application that never sets them gets them.
AUTO_COMMIT_CONSUMER = {"enable.auto.commit": True, "enable.auto.offset.store": True}
CLIENT_DEFAULT_INTERVAL_MS = 5000

AUTO_COMMIT_INTERVAL_MS = Option(
    "auto_commit_interval_ms", int, "auto-commit only: the consumer's auto.commit.interval.ms.",
    shown=f"the client's, {CLIENT_DEFAULT_INTERVAL_MS}", low=1, high=600_000, must="between 1 and 600,000",
    worker=True)

AUTO_COMMIT = Experiment(
    name="auto-commit",
    steps=("poll (the client stores the offsets it hands out)", "effect",
           "auto-commit of the stored offsets, on the client's timer"),
    kill_points=(),
    default_point=None,
    stores=Stores(ledger=True),
    proves="The consumer's defaults: auto-commit on a timer commits what poll handed out, applied or not.",
    expected="duplicates (applied after the last auto-commit) and losses (committed, never applied), "
             "within the range the evidence gives",
    predictors=(AutoCommitPredictor(),),
    loop=auto_commit_loop,
    default_faults=("random-kill",),
    options=(AUTO_COMMIT_INTERVAL_MS,),
    refuses={"commit_every": "its consumer never commits; the client's timer does (--auto-commit-interval-ms)"},
    consumer=AUTO_COMMIT_CONSUMER,
    lesson="Mistake: leaving enable.auto.commit=true, which commits on a timer whatever was polled, so a crash "
           "duplicates and loses. Fix: enable.auto.commit=false and commit after the effect (offset-after), "
           "with an idempotency key in the effect's transaction (dedupe).",
    suite={"group": "mistakes", "weight": 3, "args": ["--auto-commit-interval-ms", "100", "--kills", "10"]},
)
