"""Names of a run and of everything it creates, derived from one run id.

Run ids sort by time and say what ran: `20261129T183000-offset-after`.
Topics and tables carry the run id, so a run's data can be audited (psql,
kcat) and removed (`harness clean RUN_ID`) without touching any other run.
"""

import re
import time
from dataclasses import dataclass

SCHEMA = "harness"
TOPIC_PREFIX = "harness."


def new_run_id(experiment: str, now: float | None = None) -> str:
    t = time.gmtime(now if now is not None else time.time())
    return time.strftime("%Y%m%dT%H%M%S", t) + f"-{experiment}"


def slug(run_id: str) -> str:
    """A SQL-identifier-safe form of a run id: r20261129t183000_offset_after."""
    return "r" + re.sub(r"[^a-z0-9]+", "_", run_id.lower()).strip("_")


@dataclass(frozen=True)
class RunNames:
    run_id: str

    @property
    def input_topic(self) -> str:
        return f"{TOPIC_PREFIX}{self.run_id}.input"

    @property
    def output_topic(self) -> str:
        return f"{TOPIC_PREFIX}{self.run_id}.output"

    @property
    def group(self) -> str:
        return f"harness-{self.run_id}"

    @property
    def ledger_table(self) -> str:
        return f"{SCHEMA}.ledger_{slug(self.run_id)}"

    @property
    def dedupe_table(self) -> str:
        return f"{SCHEMA}.dedupe_{slug(self.run_id)}"

    def transactional_id(self, slot: int) -> str:
        return f"harness-{self.run_id}-worker-{slot}"
