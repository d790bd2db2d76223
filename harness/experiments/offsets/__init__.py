"""offset-before and offset-after: where the offset commit sits decides what a crash costs.

offset-before commits the offsets of a batch, then applies its effects: a
crash in between loses what was acknowledged and never charged (at-most-once).
offset-after applies the effects, then commits: a crash in between charges
again everything since the last commit (at-least-once). Both run the same
seeded crashes on the same payments, so their reports sit side by side.

The loops run inside worker processes (harness/workers/worker.py); each gap
between two steps is a kill point, and the worker's crash record says which
payments the death affects, so the prediction is exact per crash.
"""

from ...checker.predictors import LedgerPredictor
from ..common_options import GROUP_OPTIONS, group_rule
from ..declaration import Experiment, Stores
from .offset_loops import (
    OA_COMMIT, OA_EFFECT, OA_POLL, OB_COMMIT, OB_EFFECT, OB_POLL, offset_after_loop, offset_before_loop)

OFFSET_BEFORE = Experiment(
    name="offset-before",
    steps=("poll", "commit offset", "effect"),
    kill_points=(OB_POLL, OB_COMMIT, OB_EFFECT),
    default_point=OB_COMMIT.name,
    stores=Stores(ledger=True),
    proves="At-most-once: commit before the effect, and each crash between them loses payments.",
    expected="lost = crashed payments, duplicates 0, ledger below expected",
    predictors=(LedgerPredictor(),),
    loop=offset_before_loop,
    suite={"group": "core", "weight": 2},
    options=GROUP_OPTIONS,
    rules=(group_rule,),
)

OFFSET_AFTER = Experiment(
    name="offset-after",
    steps=("poll", "effect", "commit offset"),
    kill_points=(OA_POLL, OA_EFFECT, OA_COMMIT),
    default_point=OA_EFFECT.name,
    stores=Stores(ledger=True),
    proves="At-least-once: effect before commit, and each crash charges again what was not committed.",
    expected="duplicates = effects not yet committed at each crash, lost 0, ledger above expected",
    predictors=(LedgerPredictor(),),
    loop=offset_after_loop,
    suite={"group": "core", "weight": 2},
    options=GROUP_OPTIONS,
    rules=(group_rule,),
)
