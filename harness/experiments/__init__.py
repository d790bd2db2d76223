"""The experiment registry: every experiment, declared once, in the order reports show them.

Each family has its own folder (offsets, dedupe, eos, kafka_streams, keys, key_reuse,
check_then_insert, balances, queues, auto_commit, outbox, provider, producer, custom) holding its
declarations (the folder's __init__.py, with `declaration.Experiment`: steps, kill points and their
damage, stores, predictors, options), its worker loops (*_loops.py) and the predictors only it
needs (*_predictors.py); custom/ holds the consumer a user brings, its launcher and its report.
Everything else (the runner, the checker, the reports, the suite, `harness experiments`, `--help`)
reads them from here. Adding a family is its folder, one import line below and its names in
EXPERIMENTS.
"""

from ..core.errors import HarnessError, did_you_mean
from .auto_commit import AUTO_COMMIT
from .balances import INCREMENT, VERSIONED
from .check_then_insert import KEY_CHECK_THEN_INSERT
from .custom import CUSTOM
from .dedupe import DEDUPE
from .eos import EOS, EOS_BOUNDARY, EOS_DEDUPE, ZOMBIE
from .kafka_streams import EOS_STREAMS
from .keys import KEY_AFTER_EFFECT, KEY_BEFORE_EFFECT, KEY_EXPIRY, KEY_PER_ATTEMPT
from .declaration import ANY, Experiment
from .offsets import OFFSET_AFTER, OFFSET_BEFORE
from .outbox import DUAL_WRITE, OUTBOX
from .producer import PRODUCER
from .provider import PROVIDER
from .queues import SHARE_ACK_AFTER, SHARE_ACK_BEFORE, SHARE_DEDUPE, SHARE_POISON, SHARE_RELEASE
from .key_reuse import KEY_FINGERPRINT, KEY_REUSE

EXPERIMENTS: list[Experiment] = [
    OFFSET_BEFORE, OFFSET_AFTER,
    DEDUPE,
    EOS, EOS_BOUNDARY, EOS_DEDUPE,
    EOS_STREAMS,
    ZOMBIE,
    KEY_AFTER_EFFECT, KEY_BEFORE_EFFECT, KEY_PER_ATTEMPT, KEY_EXPIRY,
    KEY_REUSE, KEY_FINGERPRINT,
    KEY_CHECK_THEN_INSERT,
    INCREMENT, VERSIONED,
    SHARE_ACK_AFTER, SHARE_ACK_BEFORE, SHARE_DEDUPE, SHARE_POISON, SHARE_RELEASE,
    AUTO_COMMIT,
    DUAL_WRITE, OUTBOX,
    PROVIDER,
    PRODUCER,
    CUSTOM,
]

REGISTRY: dict[str, Experiment] = {e.name: e for e in EXPERIMENTS}


def names() -> list[str]:
    return list(REGISTRY)


def get(name: str) -> Experiment:
    exp = REGISTRY.get(name)
    if exp is None:
        raise HarnessError(f"unknown experiment {name!r}; {did_you_mean(name, REGISTRY)}choose one of: {', '.join(REGISTRY)}")
    return exp


def kill_points_for(exp: Experiment, point: str | None) -> list[str]:
    """The points planned crashes strike at: the experiment's default, one named point, or all (`any`).
    A point the experiment does not have is refused with the valid ones named."""
    valid = exp.point_names()
    if not valid:
        if point:
            raise HarnessError(f"{exp.name} has no kill points (its faults: {', '.join(exp.default_faults)}); "
                               f"drop --kill-point")
        return []
    if point is None:
        return [exp.default_point]
    if point == ANY:
        return valid
    if point not in valid:
        raise HarnessError(f"unknown --kill-point {point!r} for {exp.name}; {did_you_mean(point, valid + [ANY])}"
                           f"choose one of: {', '.join(valid + [ANY])}")
    return [point]
