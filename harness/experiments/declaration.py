"""What an experiment is, as data: steps, kill points with their damage, stores, predictors, worker.

Jepsen splits a test into a client, a nemesis, a generator and a checker; here
an experiment declares the same parts once, in one module per family:

- its *steps* (the worker's order of operations per record) and the *loop*
  that performs them inside a worker process;
- its *kill points*: every gap between two steps (and the gap after the last
  one), each with the damage a SIGKILL there does, in terms of what the
  worker's crash record lists (`unacked`, `acked_unapplied`, `produced`), in
  the words of checker/damage.py, which the checker's predictors read too;
- the *stores* it writes (ledger, dedupe table, output topic);
- its *predictors*, which turn a crash log into exact expectations (or bounds
  for crashes the worker could not describe);
- how its workers are launched (Python workers, or the Kafka Streams JVM).

The runner, the predictor, the report and the suite read only these
declarations; nothing outside an experiment's own module branches on its name.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Callable

ANY = "any"                  # --kill-point any: each planned crash takes a seeded point among all of them


@dataclass(frozen=True)
class KillPoint:
    name: str
    after: str                       # the step just done ("poll", "effect", ...)
    before: str | None               # the next step, None after the last one
    damage: frozenset = frozenset()  # which of checker/damage.py's DAMAGES a crash here can cause
    says: str = ""                   # the damage in words, for `harness experiments` and the reports

    def describe(self) -> dict:
        return {"name": self.name, "after": self.after, "before": self.before,
                "damage": sorted(self.damage), "says": self.says}


@dataclass(frozen=True)
class Stores:
    ledger: bool = False             # harness.ledger_<run>: one row per applied effect
    dedupe: bool = False             # harness.dedupe_<run>: the idempotency keys
    output: bool = False             # harness.<run>.output: the output topic (transactional, unless a producer test)
    accounts: int = 0                # harness.acct_<run>: this many accounts and their balances (0: none)
    dedupe_expires: bool = False     # the worker purges old keys: the dedupe table's hit counts are not evidence
    rows: bool = False               # harness.rows_<run>: a service's business rows, one per payment request
    outbox: bool = False             # harness.outbox_<run>: the events a relay has to publish
    events: bool = False             # harness.<run>.events: the events a service (or relay) publishes
    output_if_written: bool = False  # the output topic is created, and audited only when records were written to it
    deliveries: bool = False         # the producer under test's delivery log (<run>/deliveries.jsonl)
    rejects: bool = False            # harness.reject_<run>: requests refused because their key holds another payload
    dedupe_unique: bool = True       # the dedupe table's key is unique (False: a plain column, as a mistake has it)

    def names(self) -> list[str]:
        return [n for n in ("ledger", "dedupe", "output", "accounts", "rows", "outbox", "events", "deliveries",
                                       "rejects")
                if getattr(self, n)] + (["output (audited when written to)"] if self.output_if_written else [])

    @property
    def output_topic(self) -> bool:
        """The run creates an output topic (always audited, or audited when written to)."""
        return self.output or self.output_if_written


@dataclass(frozen=True)
class Role:
    """One kind of process in an experiment that needs several (a service, a relay, a downstream consumer).

    `consumes` says what its consumer reads: "input" (the payments, one process per partition set, as
    plain workers), "events" (the events topic, one process) or None (no consumer: one process).
    `after` names the roles that must have said `done` (all their work committed) before this one may
    finish; the relay's service, the downstream consumer's producers."""
    name: str
    loop: Callable
    consumes: str | None = "input"
    after: tuple = ()


@dataclass(frozen=True)
class Experiment:
    name: str
    steps: tuple                     # the worker's steps per record, in order
    kill_points: tuple               # KillPoint, in the order of the steps
    default_point: str | None        # where planned crashes strike unless --kill-point says otherwise
    stores: Stores
    proves: str                      # one sentence: the lesson
    expected: str                    # what the scoreboard should show
    predictors: tuple                # objects with add(prediction, facts, exp) (checker/predictors.py)
    loop: Callable | None = None     # the Python worker loop: loop(ctx); None for non-Python workers
    warm_up: Callable | None = None  # what a warm spare prepares besides its consumer and Postgres: warm_up(ctx)
    launcher: object = None          # builds worker command lines (experiments/launch.py); None: Python
    default_faults: tuple = ("planned-crash",)
    plan_errors: bool = False        # its crash plan's payments meet a seeded error instead of a death (share-release)
    options: tuple = ()              # the run options only it takes (harness.core.options.Option), e.g. (EFFECT,)
    defaults: dict = field(default_factory=dict)   # its own default for a run option, e.g. {"restart_delay": 0.4}
    rules: tuple = ()                # rule(params, exp): raise one clear line for a bad combination of its options
    variants: dict = field(default_factory=dict)   # option value -> changes, e.g. {"effect=postgres": {...}}
    suite: dict = field(default_factory=dict)      # in the suite: {"group": name, "args": [...], "weight": launch order weight}
    lesson: str = ""                 # one line for the report: the mistake it shows, and its fix
    consumer: dict = field(default_factory=dict)   # consumer settings its workers use instead of ours
    roles: tuple = ()                # Role, when its run needs more than one kind of process
    variant: str = ""                # the key of `variants` that resolve() applied ("" for none)
    refuses: dict = field(default_factory=dict)    # run option -> why it does not apply here (refused if given)
    leader: str = "input"            # whose leader `--fault leader-kill` kills: input, output or coordinator
    client_faults: tuple = ()        # the client faults its worker loop carries out itself (faults/client.py)
    tagged_output: bool = False      # its workers put their worker, attempt and transaction number in each output value
    ordered_output: bool = False     # each output record goes to its input's partition, in the order polled
    # The overlap fault (faults/overlap.py): the kill point between the key check and the write, where a
    # delivery freezes while a replacement takes over, and the one its replacement reaches after its own write.
    overlap_point: str | None = None
    overlap_applied: str | None = None
    # Anomaly classes (checker/anomalies.py) its guarantees permit; every other one found makes the run
    # unexpected. `duplicate` follows the prediction instead: allowed unless read_committed must have none.
    allows: frozenset = frozenset()
    producer: dict = field(default_factory=dict)   # settings of the producer of its input (queues: one record a batch)

    # -- derived -------------------------------------------------------------------------------
    def point(self, name: str) -> KillPoint | None:
        return next((p for p in self.kill_points if p.name == name), None)

    def point_names(self) -> list[str]:
        return [p.name for p in self.kill_points]

    def damage_anywhere(self) -> frozenset:
        """What a crash at an arbitrary instant can do: the union over every kill point."""
        out: frozenset = frozenset()
        for p in self.kill_points:
            out |= p.damage
        return out

    def steps_text(self) -> str:
        return ", ".join(self.steps)

    def resolve(self, params) -> "Experiment":
        """This experiment as the run's options make it (e.g. eos-streams with --effect postgres)."""
        exp, allowed = self, self.allows
        for key, changes in self.variants.items():
            opt, _, value = key.partition("=")
            if str(getattr(params, opt, None)) == value:
                allowed = allowed | changes.get("allows", frozenset())   # several matching variants' add up
                exp = dataclasses.replace(exp, **changes, variant=key)
        return exp if exp is self else dataclasses.replace(exp, allows=allowed)

    def with_variant(self, key: str | None) -> "Experiment":
        """This experiment as a worker process must run it: the variant its launcher named."""
        if not key:
            return self
        return dataclasses.replace(self, **self.variants[key], variant=key)

    def role(self, name: str | None):
        """The role of that name, or None for a single-kind experiment."""
        return next((r for r in self.roles if r.name == name), None) if name else None

    def describe(self) -> dict:
        return {"name": self.name, "steps": list(self.steps), "proves": self.proves, "expected": self.expected,
                "stores": self.stores.names(), "default_kill_point": self.default_point,
                "kill_points": [p.describe() for p in self.kill_points],
                "faults": list(self.default_faults), "options": [o.name for o in self.options],
                "defaults": dict(self.defaults),
                "lesson": self.lesson, "roles": [r.name for r in self.roles]}
