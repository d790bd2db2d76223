"""Compare runs and suites side by side: one row per experiment and metric, a delta column.

Targets (runs or suites, loaded by compare_targets.py) arrive as {experiment
name: report dict}. Experiments are matched by name across targets; when every
target is a single run, the runs are put side by side whatever their
experiments (the crash plan is keyed by message id, so `offset-before` and
`offset-after` with the same seed crash on the same payments and read as one
scoreboard).

Every target after the first gets its own delta against the first (absolute and in
percent, signed); `Row.delta` is the last one's, which the rules read.
A comparison warns when its targets ran on different Kafka, librdkafka or
PostgreSQL versions, or with different parameters: numbers from different
environments are not a regression, they are a different experiment.

Everything here is pure logic over dicts. Reading targets from files is
compare_targets.py, the `--fail-on` rules that turn a comparison into a CI
gate are compare_rules.py, the tables and JSON are compare_render.py; the
click command is a thin layer.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from ..core.errors import HarnessError
from .shared import fmt, is_number

# -- metrics ---------------------------------------------------------------------------------

# (short name, where it lives in report.json); the short name is what tables and rules use.
METRICS: list[tuple[str, tuple[str, ...]]] = [
    ("verdict", ("verdict",)),
    ("sent", ("counts", "sent")),
    ("deliveries", ("counts", "deliveries")),
    ("effects", ("counts", "effects")),
    ("duplicates", ("counts", "duplicates")),
    ("lost", ("counts", "lost")),
    ("dedupe_hits", ("counts", "dedupe_hits")),
    ("ledger_total", ("ledger", "actual_total")),
    ("rc.records", ("kafka_output", "read_committed", "records")),
    ("rc.duplicates", ("kafka_output", "read_committed", "duplicates")),
    ("rc.lost", ("kafka_output", "read_committed", "lost")),
    ("ru.records", ("kafka_output", "read_uncommitted", "records")),
    ("ru.duplicates", ("kafka_output", "read_uncommitted", "duplicates")),
    ("crashes", ("crashes",)),
    ("wall_seconds", ("timings", "wall_seconds")),
    ("restart_median_s", ("timings", "restart_median_seconds")),
    ("msgs_per_s", ("timings", "messages_per_second")),
]
METRIC_NAMES = [name for name, _ in METRICS]
# What each short name means, written out under every table that shows it (rc. and ru. above all).
MEANINGS = {
    "verdict": "the run's verdict",
    "sent": "payments produced to the input topic",
    "deliveries": "records handed to the workers, redeliveries included",
    "effects": "effects in the main store: ledger rows, or read_committed records without a ledger",
    "duplicates": "copies beyond the first per id, in the main store (the ledger, else the output topic read_committed)",
    "lost": "ids sent and acknowledged with no effect, in the main store",
    "dedupe_hits": "deliveries the key table turned away",
    "ledger_total": "the sum of the amounts in the ledger table",
    "rc.records": "records of the output topic as a read_committed reader sees them",
    "rc.duplicates": "duplicates in the output topic, read_committed",
    "rc.lost": "ids missing from the output topic, read_committed",
    "ru.records": "records of the output topic as a read_uncommitted reader sees them (aborted ones too)",
    "ru.duplicates": "duplicates in the output topic, read_uncommitted",
    "crashes": "workers killed by a planned crash or a kill fault",
    "wall_seconds": "the run's wall time",
    "restart_median_s": "median seconds from a SIGKILL to the restarted worker's first record",
    "msgs_per_s": "payments sent per second of wall time",
}
# Rules may also name a metric by its place in report.json (counts.lost, timings.wall_seconds...).
ALIASES = {".".join(path): name for name, path in METRICS if len(path) > 1}
ALIASES["len(crashes)"] = "crashes"

# Environment keys whose difference makes numbers incomparable (cpus: timings depend on it).
ENV_KEYS = ("kafka_version", "kafka_metadata_version", "librdkafka_version", "postgres_version", "cpus")
# Parameters whose difference changes what is counted or how fast.
PARAM_KEYS = ("messages", "amount", "seed", "crash_rate", "commit_every", "commit_interval_ms", "partitions",
              "workers", "kill_mode", "kills", "kill_point", "payload_bytes", "client")


# Metrics every report of a known schema must have (docs/report.schema.json requires them; a count may be
# null, "unknown"): a rule on one of these that finds it null, missing or not a number cannot pass, since
# a newer-schema report (checked leniently) or an edited one could hide damage that way. Left out, as
# null there means "not measured here": dedupe_hits (no dedupe table), ledger_total, restart_median_s
# (nothing restarted), and the Kafka output counts, which only some experiments have.
MUST_KNOW = frozenset({"verdict", "sent", "deliveries", "effects", "duplicates", "lost", "crashes",
                       "wall_seconds", "msgs_per_s"})


def applies(report: dict, name: str) -> bool:
    """Whether metric `name` means something for this run: a ledger total needs a ledger, rc./ru. an output
    topic, dedupe hits a key table, a restart time a crash. A null metric that applies is unknown; one that
    does not is shown as n/a."""
    st = report.get("stack") if isinstance(report.get("stack"), dict) else {}
    if name.startswith(("rc.", "ru.")):
        return isinstance(report.get("kafka_output"), dict)
    if name == "ledger_total":
        return bool(st.get("ledger_table")) or metric_value(report, name) is not None
    if name == "dedupe_hits":
        return bool(st.get("dedupe_table") or st.get("accounts_table")) or metric_value(report, name) is not None
    if name == "restart_median_s":
        return bool(metric_value(report, "crashes")) or metric_value(report, name) is not None
    return True


def metric_value(report: dict, name: str):
    """The metric `name` of one report, or None when the report does not have it."""
    path = dict(METRICS)[name]
    v = report
    for key in path:
        if not isinstance(v, dict):
            return None
        v = v.get(key)
    if name == "crashes":
        return len(v) if isinstance(v, list) else None
    return v


# -- the comparison --------------------------------------------------------------------------

@dataclass
class Row:
    experiment: str
    metric: str
    values: list            # one per target; None when absent (see `present`)
    present: list[bool]     # whether the experiment exists in each target
    delta: float | int | None = None        # last - first, numbers only
    delta_pct: float | None = None          # 100 * delta / first; None when first is 0 and last is not
    deltas: list = field(default_factory=list)      # per target: (delta, delta %) against the first, or None
    applies: list = field(default_factory=list)     # per target: whether the metric means something there

    @property
    def changed(self) -> bool:
        vals = [v for v, here in zip(self.values, self.present) if here]
        return len(set(map(repr, vals))) > 1


@dataclass
class Comparison:
    labels: list[str]
    rows: list[Row]
    warnings: list[str] = field(default_factory=list)
    # experiment key -> the experiment name of its report in each target (None where absent)
    experiments: dict[str, list] = field(default_factory=dict)
    # (experiment, verdict, why) listed by the last target's suite.json without a report
    missing: list[tuple[str, str, str]] = field(default_factory=list)


def compare(targets: list[dict], labels: list[str] | None = None) -> Comparison:
    """Put targets side by side. Each delta is a target minus the first; warnings say what makes them
    incomparable."""
    if not targets:
        raise HarnessError("nothing to compare: name at least one run or suite")
    labels = list(labels) if labels else [getattr(t, "label", None) or f"#{i + 1}" for i, t in enumerate(targets)]
    labels = _unique(labels)
    groups = _groups(targets)
    rows = []
    for key, reports in groups.items():
        if key == SIDE_BY_SIDE:   # say which experiment each column is
            names = [r.get("experiment") for r in reports]
            rows.append(Row(key, "experiment", names, [True] * len(names)))
        for name in METRIC_NAMES:
            values = [metric_value(r, name) if r is not None else None for r in reports]
            if all(v is None for v in values):
                continue
            row = Row(key, name, values, [r is not None for r in reports],
                      applies=[r is None or applies(r, name) for r in reports])
            row.deltas = [None] + [_delta(values[0], v) for v in values[1:]]
            if len(values) > 1 and row.deltas[-1] is not None:
                row.delta, row.delta_pct = row.deltas[-1]
            rows.append(row)
    experiments = {k: [r.get("experiment") if r is not None else None for r in reps] for k, reps in groups.items()}
    warnings = [n for t in targets for n in getattr(t, "notes", [])]
    warnings += _missing_warnings(groups, labels)
    warnings += _env_warnings(targets, labels)
    warnings += _param_warnings(groups, labels)
    return Comparison(labels, rows, warnings, experiments, list(getattr(targets[-1], "missing", [])))


def _delta(first, v) -> tuple | None:
    """(v - first, in percent of first) when both are numbers, else None. A delta that is not a finite
    number (1e308 - -1e308; 1.0 over 5e-324) is None: JSON has no inf. From 0, no percentage."""
    if not (is_number(first) and is_number(v)):
        return None
    d = v - first
    pct = (0.0 if d == 0 else None) if first == 0 else _finite(_percent(d, first))
    return _finite(round(d, 6) if isinstance(d, float) else d), pct


def _finite(v):
    """`v`, or None when it is a float that is not finite."""
    return None if isinstance(v, float) and not math.isfinite(v) else v


def _percent(d, first):
    try:
        return round(100.0 * d / first, 1)
    except OverflowError:   # an int delta too large for a float
        return None


def _unique(labels: list[str]) -> list[str]:
    out = []
    for lab in labels:
        new, n = lab, 2
        while new in out:
            new, n = f"{lab}#{n}", n + 1
        out.append(new)
    return out


SIDE_BY_SIDE = "side by side"   # the group of single runs of more than two experiments


def _groups(targets: list[dict]) -> dict[str, list]:
    """experiment key -> [report or None per target], in the order experiments first appear."""
    if len(targets) > 1 and all(len(t) == 1 for t in targets):
        reports = [next(iter(t.values())) for t in targets]
        names = list(dict.fromkeys(next(iter(t)) for t in targets))
        return {" vs ".join(names) if len(names) <= 2 else SIDE_BY_SIDE: reports}
    keys = list(dict.fromkeys(k for t in targets for k in t))
    return {k: [t.get(k) for t in targets] for k in keys}


def _missing_warnings(groups: dict, labels: list[str]) -> list[str]:
    out = []
    if len(labels) < 2:
        return out
    for key, reports in groups.items():
        absent = [lab for lab, r in zip(labels, reports) if r is None]
        if absent:
            out.append(f"experiment {key} is missing from {', '.join(absent)}")
    return out


def _param(report: dict, key: str):
    """A run's parameter as compared; a report from before --client ran the Python workers (the only ones)."""
    v = (report.get("params") or {}).get(key)
    return "python" if key == "client" and v is None else v


def _show(v) -> str:
    if v is None:
        return "unset"
    if isinstance(v, float):
        return f"{v:g}"
    return fmt(v)


def _per_target(values: list, labels: list[str]) -> str:
    """`1 (a) vs 10 (b)`; targets that agree share one entry: `1,000 (a, b) vs 200 (c)`."""
    by_value: dict[str, list[str]] = {}
    for v, lab in zip(values, labels):
        by_value.setdefault(v, []).append(lab)
    return " vs ".join(f"{v} ({', '.join(labs)})" for v, labs in by_value.items())


def _env_warnings(targets: list[dict], labels: list[str]) -> list[str]:
    if len(targets) < 2:
        return []
    out = []
    for key in ENV_KEYS:
        shown = []
        for t in targets:
            envs = [getattr(t, "environment", {})] + [r.get("environment") or {} for r in t.values()]
            vals = list(dict.fromkeys(_show(e[key]) for e in envs if isinstance(e, dict) and e.get(key) is not None))
            shown.append("/".join(vals) if vals else "unknown")
        known = ["/".join(p for p in v.split("/") if not p.startswith("unknown")) for v in shown]
        if len({v for v in known if v}) > 1:
            out.append(f"{key} differs: {_per_target(shown, labels)}")
        elif len(set(shown)) > 1:           # not measured (in part) on one side: no claim that it differs
            out.append(f"{key} is unknown in {', '.join(lab for lab, v in zip(labels, shown) if 'unknown' in v)}")
    return out


def _param_warnings(groups: dict, labels: list[str]) -> list[str]:
    """One line per parameter that differs, naming the experiments unless it differs in all of them."""
    compared = {k: reps for k, reps in groups.items() if sum(r is not None for r in reps) > 1}
    out = []
    for key in PARAM_KEYS:
        diffs: dict[tuple, list[str]] = {}
        for exp, reps in compared.items():
            here = [(lab, r) for lab, r in zip(labels, reps) if r is not None]
            if key == "kills" and all((r.get("params") or {}).get("kill_mode") != "random" for _, r in here):
                continue   # kills only matters with --kill-mode random
            if key == "kill_point" and len({r.get("experiment") for _, r in here}) > 1:
                continue   # different experiments have different kill points by design
            shown = tuple((lab, _show(_param(r, key))) for lab, r in here)
            if len({v for _, v in shown}) > 1:
                diffs.setdefault(shown, []).append(exp)
        for shown, exps in diffs.items():
            where = "" if len(exps) == len(compared) else f" for {', '.join(exps)}"
            out.append(f"params differ{where}: {key} "
                       + _per_target([v for _, v in shown], [lab for lab, _ in shown]))
    return out
