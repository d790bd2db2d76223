"""The crash plan: a seeded choice of message ids whose first delivery kills a worker.

The plan depends only on (seed, message ids, crash rate), never on the mode,
so `offset-before`, `offset-after`, `dedupe` and the EOS experiments crash on
the same payments and their reports can be put side by side.

Each planned id also has its kill point: one fixed point for every crash, or,
with `--kill-point any`, a seeded choice among the experiment's points per id
(drawn after the ids, so the same payments still crash whatever the points).

The same file carries the client faults' plans, which the transactional
workers carry out themselves (runtime/client_faults.py): `abort_rate` (the
share of transactions a worker aborts instead of committing) and `pauses`
(payment ids whose transaction freezes its worker at step `pause_at`, each
for its seeded number of seconds), and the overlap fault's `overlaps` (payment ids
whose first delivery freezes its worker right after its key check, at
`overlap_at`, while a replacement takes the partitions over). Each fault fills in
its own part.
"""

import json
import random
from dataclasses import dataclass, field
from pathlib import Path

DEFAULT_SEED = 25


@dataclass(frozen=True)
class CrashPlan:
    seed: int
    crash_rate: float
    crash_ids: frozenset = field(default_factory=frozenset)
    points: tuple = ()          # sorted (id, kill point) pairs; empty: any point the worker reaches first
    abort_rate: float = 0.0     # the abort fault: share of transactions aborted instead of committed
    pause_at: str | None = None # the client-pause fault: the step of a transaction where a worker freezes
    pauses: tuple = ()          # sorted (id, seconds) pairs: the payments whose transaction freezes, and how long
    overlap_at: str | None = None       # the overlap fault: the kill point (after the check) where a delivery freezes
    overlap_applied: str | None = None  # ... and the one its replacement reaches once its own write is done
    overlaps: tuple = ()        # sorted payment ids whose first delivery freezes there while a replacement takes over
    partitions_move: bool = False       # a fault moves where workers fetch (Fault.moves_partitions)

    @classmethod
    def make(cls, message_ids: list[str], crash_rate: float, seed: int, points: list[str] | None = None) -> "CrashPlan":
        if not 0.0 <= crash_rate <= 1.0:
            raise ValueError(f"crash rate must be between 0 and 1, got {crash_rate}")
        k = round(len(message_ids) * crash_rate)
        chosen = sorted(random.Random(seed).sample(sorted(message_ids), k))
        pairs: tuple = ()
        if points:
            rng = random.Random(f"{seed}-points")
            pairs = tuple((i, points[0] if len(points) == 1 else rng.choice(points)) for i in chosen)
        return cls(seed=seed, crash_rate=crash_rate, crash_ids=frozenset(chosen), points=pairs)

    def point_of(self, message_id: str) -> str | None:
        """The kill point planned for this id (None: the id is not planned, or the plan names no point)."""
        return dict(self.points).get(message_id)

    def pause_of(self, message_id: str) -> float | None:
        """Seconds the worker freezes in the transaction that holds this id (None: no pause planned)."""
        return dict(self.pauses).get(message_id)

    def to_json(self) -> dict:
        return {"seed": self.seed, "crash_rate": self.crash_rate, "crash_ids": sorted(self.crash_ids),
                "points": dict(self.points), "abort_rate": self.abort_rate, "pause_at": self.pause_at,
                "pauses": dict(self.pauses), "overlap_at": self.overlap_at, "overlap_applied": self.overlap_applied,
                "overlaps": list(self.overlaps), "partitions_move": self.partitions_move}

    def save(self, path: Path) -> None:
        from ..core.safefile import write_text
        write_text(path, json.dumps(self.to_json()) + "\n")

    @classmethod
    def amend(cls, path: Path, **fields) -> "CrashPlan":
        """Change this fault's part of the run's plan file and keep the other faults' parts."""
        from dataclasses import replace
        plan = replace(cls.load(path), **fields)
        plan.save(path)
        return plan

    @classmethod
    def load(cls, path: Path) -> "CrashPlan":
        d = json.loads(path.read_text())
        return cls(seed=d["seed"], crash_rate=d["crash_rate"], crash_ids=frozenset(d["crash_ids"]),
                   points=tuple(sorted((d.get("points") or {}).items())), abort_rate=float(d.get("abort_rate") or 0),
                   pause_at=d.get("pause_at"), pauses=tuple(sorted((d.get("pauses") or {}).items())),
                   overlap_at=d.get("overlap_at"), overlap_applied=d.get("overlap_applied"),
                   overlaps=tuple(sorted(d.get("overlaps") or ())), partitions_move=d.get("partitions_move") is True)


def seeded_pauses(message_ids: list[str], count: int, seconds: float, seed: int) -> tuple:
    """The client-pause plan: `count` payment ids, each with a seeded pause of 0.5x to 1.5x `seconds`
    (drawn apart from the crash plan's choices, so adding pauses moves no crash)."""
    rng = random.Random(f"{seed}-pauses")
    chosen = sorted(rng.sample(sorted(message_ids), min(count, len(message_ids))))
    return tuple((i, round(rng.uniform(0.5 * seconds, 1.5 * seconds), 3)) for i in chosen)


def seeded_overlaps(message_ids: list[str], count: int, seed: int, taken: frozenset = frozenset()) -> tuple:
    """The overlap plan: `count` payment ids, none of them `taken` (the crash plan's), drawn apart from it."""
    free = sorted(i for i in message_ids if i not in taken)
    return tuple(sorted(random.Random(f"{seed}-overlaps").sample(free, min(count, len(free)))))


def random_kill_delays(seed: int, kills: int, low: float = 0.05, high: float = 0.6) -> list[float]:
    """For --kill-mode random: seconds of a worker's busy time before each SIGKILL."""
    rng = random.Random(f"{seed}-random-kills")
    return [round(rng.uniform(low, high), 3) for _ in range(kills)]
