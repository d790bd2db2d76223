"""The crash plan: a seeded choice of message ids whose first delivery kills a worker.

The plan depends only on (seed, message ids, crash rate), never on the mode,
so `offset-before`, `offset-after`, `dedupe` and the EOS experiments crash on
the same payments and their reports can be put side by side.

Each planned id also has its kill point: one fixed point for every crash, or,
with `--kill-point any`, a seeded choice among the experiment's points per id
(drawn after the ids, so the same payments still crash whatever the points).
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

    def to_json(self) -> dict:
        return {"seed": self.seed, "crash_rate": self.crash_rate, "crash_ids": sorted(self.crash_ids),
                "points": dict(self.points)}

    def save(self, path: Path) -> None:
        from ..safefile import write_text
        write_text(path, json.dumps(self.to_json()) + "\n")

    @classmethod
    def load(cls, path: Path) -> "CrashPlan":
        d = json.loads(path.read_text())
        return cls(seed=d["seed"], crash_rate=d["crash_rate"], crash_ids=frozenset(d["crash_ids"]),
                   points=tuple(sorted((d.get("points") or {}).items())))


def random_kill_delays(seed: int, kills: int, low: float = 0.05, high: float = 0.6) -> list[float]:
    """For --kill-mode random: seconds of a worker's busy time before each SIGKILL."""
    rng = random.Random(f"{seed}-random-kills")
    return [round(rng.uniform(low, high), 3) for _ in range(kills)]
