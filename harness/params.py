"""The parameters of one run, and their validation: every bad value is one clear line.

`harness run`'s options, the suite and the benches all build a RunParams; it
is checked here once, before anything is created, so a mistake costs no topic,
table or folder.
"""

import math
from dataclasses import dataclass, field

from . import experiments
from .errors import HarnessError

DEFAULT_TIME_LIMIT_S = 600
# With a fresh transactional.id nobody fences the dead producer: its transaction stays open until this
# timeout. 10 s keeps the experiment short while making the stall obvious next to sub-second restarts.
FRESH_ID_TRANSACTION_TIMEOUT_MS = 10_000
# The broker checks for timed-out transactions every second (our broker setting), then writes the abort markers.
TXN_ABORT_MARGIN_S = 3.0
# A run keeps every payment id in memory and audits each one: a million is the bound (10**12 ran out of memory).
MAX_MESSAGES = 1_000_000
MAX_PAYLOAD_BYTES = 100_000
MAX_AMOUNT = 10 ** 12
MAX_TRANSACTION_TIMEOUT_MS = 900_000
MAX_PARTITIONS = 1_000
MAX_WORKERS = 64
MAX_KILLS = 100_000
MAX_ZOMBIE_PAUSE_S = 3600
MAX_IN_FLIGHT = 1_000_000              # librdkafka's own limit for max.in.flight.requests.per.connection
MAX_DEDUPE_TTL_S = 86_400
MAX_RESTART_DELAY_S = 600
# Options in seconds, with their bounds; None: not given. The TTL belongs to the experiments whose
# declaration's `options` names it; the restart delay is the supervisor's, for every experiment
# (key-expiry declares a default of its own).
SECONDS_OPTIONS = {"dedupe_ttl": MAX_DEDUPE_TTL_S, "restart_delay": MAX_RESTART_DELAY_S}
SUPERVISOR_SECONDS_OPTIONS = ("restart_delay",)
MAX_AUTO_COMMIT_INTERVAL_MS = 600_000
MAX_KILL_EVERY_S = 3600
MIN_KILL_EVERY_S = 0.1
# Options that belong to the experiments that declare them in `options` (harness/experiments/).
EXPERIMENT_OPTIONS = ("effect", "worker_cmd", "expect", "audit_sql")


_WHAT = {"effect": "effect", "worker_cmd": "workers", "expect": "predictions", "audit_sql": "audit"}


@dataclass
class RunParams:
    experiment: str
    messages: int = 1000
    amount: int = 100
    crash_rate: float = 0.1
    seed: int = 25
    commit_every: int = 1
    partitions: int = 1
    workers: int = 1
    kill_mode: str = "points"
    kills: int | None = None                # random-kill: how many (None: 10)
    kill_point: str | None = None
    time_limit: float = DEFAULT_TIME_LIMIT_S
    commit_interval_ms: int | None = None   # eos family: also commit a transaction this often
    payload_bytes: int = 0                  # pad each payment's JSON to about this size (benchmarks)
    effect: str = "none"                    # eos-streams: "postgres" adds a ledger insert in the topology
    fresh_transactional_id: bool = False    # eos family: a restarted worker takes a NEW transactional.id
    transaction_timeout_ms: int | None = None
    zombie_pause: float | None = None       # zombie: seconds frozen before the replacement starts (None: 3)
    faults: list = field(default_factory=list)   # --fault NAME[:key=value,...]; empty: the experiment's own
    idempotence: str | None = None          # the producer experiment: on | off (None: on, off with --acks 1)
    acks: str | None = None                 # the producer experiment: 1 | all (None: all)
    max_in_flight: int | None = None        # the producer experiment: max.in.flight.requests.per.connection
    assignment: str = "assign"              # consumer experiments: assign (fixed partitions) | group (subscribe)
    group_protocol: str | None = None       # with --assignment group: classic | consumer (None: classic)
    dedupe_ttl: float | None = None         # key-expiry family: keys older than this many seconds are purged
    restart_delay: float | None = None      # seconds before a dead worker's successor starts (None: at once)
    auto_commit_interval_ms: int | None = None   # auto-commit: the consumer's auto.commit.interval.ms (None: 5000)
    kill_every: float | None = None         # also SIGKILL a running worker every this many seconds
    worker_cmd: str | None = None           # custom: the consumer under test, one process per worker slot
    expect: str | None = None               # custom: the claim under test (None: exactly-once)
    audit_sql: str | None = None            # custom: a read-only query returning (message_id, amount) per effect

    def validate(self) -> None:
        exp = experiments.get(self.experiment)
        if not 0.0 <= self.crash_rate <= 1.0:
            raise HarnessError(f"--crash-rate must be between 0 and 1, got {self.crash_rate}")
        for name in ("messages", "amount", "commit_every", "partitions", "workers"):
            if getattr(self, name) <= 0:
                raise HarnessError(f"--{name.replace('_', '-')} must be at least 1, got {getattr(self, name)}")
        if self.kill_mode not in ("points", "random"):
            raise HarnessError(f"--kill-mode must be points or random, got {self.kill_mode!r}")
        if self.effect not in ("none", "postgres"):
            raise HarnessError(f"--effect must be none or postgres, got {self.effect!r}")
        for name in EXPERIMENT_OPTIONS:
            value = getattr(self, name)
            if value not in (None, "none") and name not in exp.options:
                takers = [e.name for e in experiments.REGISTRY.values() if name in e.options]
                raise HarnessError(f"--{name.replace('_', '-')} applies to {', '.join(takers)} only "
                                   f"(the other experiments define their own {_WHAT[name]})")
        if self.auto_commit_interval_ms is not None:
            if "auto_commit_interval_ms" not in exp.options:
                takers = [e.name for e in experiments.REGISTRY.values() if "auto_commit_interval_ms" in e.options]
                raise HarnessError(f"--auto-commit-interval-ms applies to {', '.join(takers)} only (the other "
                                   f"experiments commit offsets themselves)")
            if not 1 <= self.auto_commit_interval_ms <= MAX_AUTO_COMMIT_INTERVAL_MS:
                raise HarnessError(f"--auto-commit-interval-ms must be between 1 and {MAX_AUTO_COMMIT_INTERVAL_MS:,}, "
                                   f"got {self.auto_commit_interval_ms}")
        for name, why in exp.refuses.items():
            if getattr(self, name) != RunParams.__dataclass_fields__[name].default:
                raise HarnessError(f"--{name.replace('_', '-')} does not apply to {exp.name}: {why}")
        for name, most in SECONDS_OPTIONS.items():
            value = getattr(self, name)
            if value is None:
                continue
            flag = f"--{name.replace('_', '-')}"
            if not math.isfinite(value) or value < 0 or value > most:
                raise HarnessError(f"{flag} must be a number of seconds between 0 and {most:,}, got {value}")
            if name not in exp.options and name not in SUPERVISOR_SECONDS_OPTIONS:
                takers = [e.name for e in experiments.REGISTRY.values() if name in e.options]
                raise HarnessError(f"{flag} applies to {', '.join(takers) or 'no experiment'} only; "
                                   f"{exp.name} does not take it")
        for name, allowed in (("idempotence", ("on", "off")), ("acks", ("1", "all")), ("max_in_flight", None)):
            value = getattr(self, name)
            if value is None:
                continue
            flag = f"--{name.replace('_', '-')}"
            if name not in exp.options:
                takers = [e.name for e in experiments.REGISTRY.values() if name in e.options]
                raise HarnessError(f"{flag} applies to {', '.join(takers) or 'no experiment'} only "
                                   f"(the producer under test); {exp.name} does not take it")
            if allowed and str(value) not in allowed:
                raise HarnessError(f"{flag} must be one of {', '.join(allowed)}, got {value!r}")
        if self.max_in_flight is not None and not 1 <= self.max_in_flight <= MAX_IN_FLIGHT:
            raise HarnessError(f"--max-in-flight must be between 1 and {MAX_IN_FLIGHT:,}, got {self.max_in_flight}")
        if self.idempotence == "on" and self.acks == "1":
            raise HarnessError("--acks 1 needs --idempotence off: an idempotent producer always waits for acks=all")
        if self.idempotence != "off" and self.acks != "1" and (self.max_in_flight or 0) > 5 \
                and "idempotence" in exp.options:
            raise HarnessError("--max-in-flight above 5 needs --idempotence off: an idempotent producer keeps order "
                               "and drops retried duplicates with at most 5 requests in flight")
        if self.assignment not in ("assign", "group"):
            raise HarnessError(f"--assignment must be assign or group, got {self.assignment!r}")
        if self.assignment == "group" and "assignment" not in exp.options:
            takers = [e.name for e in experiments.REGISTRY.values() if "assignment" in e.options]
            raise HarnessError(f"--assignment group applies to {', '.join(takers)} only; {exp.name} assigns "
                               f"its partitions itself")
        if self.group_protocol is not None:
            if self.group_protocol not in ("classic", "consumer"):
                raise HarnessError(f"--group-protocol must be classic or consumer, got {self.group_protocol!r}")
            if self.assignment != "group":
                raise HarnessError("--group-protocol applies to --assignment group")
        self._check_consumer_options(exp)
        if self.messages > MAX_MESSAGES:
            raise HarnessError(f"--messages must be at most {MAX_MESSAGES:,}, got {self.messages:,}")
        for name in ("kills", "payload_bytes"):
            if getattr(self, name) is not None and getattr(self, name) < 0:
                raise HarnessError(f"--{name.replace('_', '-')} must be 0 or more, got {getattr(self, name)}")
        for name in ("commit_interval_ms", "transaction_timeout_ms"):
            value = getattr(self, name)
            if value is not None and value < 1:
                raise HarnessError(f"--{name.replace('_', '-')} must be at least 1 when given, got {value}")
        if not math.isfinite(self.time_limit) or self.time_limit <= 0:
            raise HarnessError(f"--time-limit must be a positive number of seconds, got {self.time_limit}")
        if self.kill_every is not None and (not math.isfinite(self.kill_every)
                                            or not MIN_KILL_EVERY_S <= self.kill_every <= MAX_KILL_EVERY_S):
            raise HarnessError(f"--kill-every must be between {MIN_KILL_EVERY_S:g} and {MAX_KILL_EVERY_S:,} seconds, "
                               f"got {self.kill_every}")
        if self.zombie_pause is not None and (not math.isfinite(self.zombie_pause) or self.zombie_pause < 0):
            raise HarnessError(f"--zombie-pause must be a number of seconds, 0 or more, got {self.zombie_pause}")
        for name, most, why in (("payload_bytes", MAX_PAYLOAD_BYTES, "a broker's default message size is 1 MB"),
                                ("amount", MAX_AMOUNT, "the ledger's bigint must hold the total"),
                                ("transaction_timeout_ms", MAX_TRANSACTION_TIMEOUT_MS,
                                 "the brokers' transaction.max.timeout.ms default"),
                                ("partitions", MAX_PARTITIONS, "a local broker on two cores"),
                                ("workers", MAX_WORKERS, "each worker is a process with a warm spare"),
                                ("kills", MAX_KILLS, "as --fault random-kill:kills"),
                                ("zombie_pause", MAX_ZOMBIE_PAUSE_S, "as --fault zombie:pause")):
            value = getattr(self, name)
            if value is not None and value > most:
                raise HarnessError(f"--{name.replace('_', '-')} must be at most {most:,} ({why}), got {value:,}")
        resolved = exp.resolve(self)
        if not resolved.stores.output:
            for name, value in (("fresh_transactional_id", self.fresh_transactional_id),
                                ("transaction_timeout_ms", self.transaction_timeout_ms),
                                ("commit_interval_ms", self.commit_interval_ms)):
                if value:
                    raise HarnessError(f"--{name.replace('_', '-')} applies to experiments with Kafka transactions; "
                                       f"{exp.name} has none")
        from . import faults
        built = self.check_faults(resolved)
        if self.kills is not None and not any(isinstance(f, faults.RandomKill) for f in built):
            raise HarnessError("--kills applies to random kills (--kill-mode random, or --fault random-kill)")
        if self.zombie_pause is not None and not any(isinstance(f, faults.ZombiePause) for f in built):
            raise HarnessError("--zombie-pause applies to the zombie fault (the zombie experiment, or --fault zombie)")

    def take_experiment_defaults(self, exp) -> None:
        """Options the experiment declares with a default (e.g. key-expiry's TTL) take it when not given,
        so the report's parameters say what really ran."""
        for name, default in (exp.options.items() if isinstance(exp.options, dict) else ()):
            if getattr(self, name, None) is None:
                setattr(self, name, default)

    def _check_consumer_options(self, exp) -> None:
        """--worker-cmd, --expect and --audit-sql, for experiments whose workers the user brings."""
        if "worker_cmd" in exp.options:
            if not (self.worker_cmd or "").strip():
                raise HarnessError(f"{exp.name} runs your consumer: give it with --worker-cmd \"CMD\"")
            # What the harness's own workers do, a consumer it did not write decides for itself.
            for name, default, why in (("commit_every", 1, "your consumer commits its offsets as it likes"),
                                       ("crash_rate", RunParams.crash_rate, "its kills are random: --kills, --kill-every")):
                if getattr(self, name) != default:
                    raise HarnessError(f"--{name.replace('_', '-')} applies to the harness's own workers, not to "
                                       f"{exp.name} ({why})")
        if self.worker_cmd is not None:
            import shlex
            import shutil
            try:
                argv = shlex.split(self.worker_cmd)
            except ValueError as e:
                raise HarnessError(f"--worker-cmd cannot be split into words like a shell would: {e}")
            if not argv:
                raise HarnessError("--worker-cmd is empty")
            if shutil.which(argv[0]) is None:
                raise HarnessError(f"--worker-cmd: {argv[0]!r} is not an executable file or a command on PATH "
                                   f"(the command runs without a shell)")
        if self.expect is not None:
            from .experiments.predictors import CLAIMS
            if self.expect not in CLAIMS:
                raise HarnessError(f"--expect must be one of {', '.join(CLAIMS)}, got {self.expect!r}")
        if self.audit_sql is not None and not self.audit_sql.strip():
            raise HarnessError("--audit-sql is empty; give a SELECT returning (message_id, amount) rows")

    def check_faults(self, exp) -> list:
        """Build the run's faults once to refuse a bad --fault or --kill-point before anything starts."""
        from . import faults
        from .experiments import kill_points_for
        built = faults.build(self, exp)
        planned = [f for f in built if isinstance(f, faults.PlannedCrash)]
        for f in planned:
            kill_points_for(exp, f.point)
        if self.kill_point and not planned:
            raise HarnessError(f"--kill-point applies to planned crashes; this run has none "
                               f"(its faults: {', '.join(f.name for f in built) or 'none'})")
        return built
