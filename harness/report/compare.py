"""Compare runs and suites side by side: one row per experiment and metric, a delta column.

A *target* is whatever names saved results: a run folder, a suite folder, a
report.json, a run or suite id under the reports folder, or `latest`. Each
loads as {experiment name: report dict}. Experiments are matched by name
across targets; when every target is a single run, the runs are put side by
side whatever their experiments (the crash plan is keyed by message id, so
`offset-before` and `offset-after` with the same seed crash on the same
payments and read as one scoreboard).

The delta is always last target minus first target, absolute and in percent.
A comparison warns when its targets ran on different Kafka, librdkafka or
PostgreSQL versions, or with different parameters: numbers from different
environments are not a regression, they are a different experiment.

`--fail-on` rules (see `parse_fail_on`) turn a comparison into a CI gate:
absolute rules read the last target, relative ones the change from the first.
Everything here is pure logic over dicts; the click command is a thin layer.
"""

from __future__ import annotations

import json
import math
import operator
import re
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import HarnessError
from . import validate
from .escape import md, term, within
from .model import VERDICTS
from .shared import fmt

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
# Rules may also name a metric by its place in report.json (counts.lost, timings.wall_seconds...).
ALIASES = {".".join(path): name for name, path in METRICS if len(path) > 1}
ALIASES["len(crashes)"] = "crashes"

# Environment keys whose difference makes numbers incomparable (cpus: timings depend on it).
ENV_KEYS = ("kafka_version", "librdkafka_version", "postgres_version", "cpus")
# Parameters whose difference changes what is counted or how fast.
PARAM_KEYS = ("messages", "amount", "seed", "crash_rate", "commit_every", "commit_interval_ms", "partitions",
              "workers", "kill_mode", "kills", "kill_point", "payload_bytes")


# Metrics every report of a known schema must have (docs/report.schema.json requires them; a count may be
# null, "unknown"): a rule on one of these that finds it null, missing or not a number cannot pass, since
# a newer-schema report (checked leniently) or an edited one could hide damage that way. Left out, as
# null there means "not measured here": dedupe_hits (no dedupe table), ledger_total, restart_median_s
# (nothing restarted), and the Kafka output counts, which only some experiments have.
MUST_KNOW = frozenset({"verdict", "sent", "deliveries", "effects", "duplicates", "lost", "crashes",
                       "wall_seconds", "msgs_per_s"})


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


def _is_number(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


# -- targets ---------------------------------------------------------------------------------

class Target(dict):
    """{experiment name: report dict}, plus where it came from (a dict, so `load_target` stays simple)."""

    def __init__(self, reports: dict, label: str, path: Path, kind: str, environment: dict | None = None,
                 notes: list[str] | None = None, missing: list[tuple[str, str, str]] | None = None):
        super().__init__(reports)
        self.label = label              # the column header: folder name, run id or suite id
        self.path = path                # the report.json or suite.json it was read from
        self.kind = kind                # "run" or "suite"
        self.environment = environment or {}   # a suite's own environment block
        self.notes = notes or []        # listed experiments without a report, newer schema...
        self.missing = missing or []    # (experiment, suite.json's verdict, why) of those without a report


TIMESTAMPED = re.compile(r"^\d{8}T\d{6}")


def find_folder(arg: str, reports_root: Path | None = None) -> Path:
    """Resolve a target argument to an existing path (folder or file), or raise one clear HarnessError."""
    root = Path(reports_root) if reports_root is not None else _default_root()
    p = Path(arg).expanduser()
    if p.exists():
        return p
    if arg == "latest":
        return _latest(root)
    if "/" in arg:
        raise HarnessError(f"unknown target {arg!r}: no such file or folder")
    if (root / arg).exists():
        return root / arg
    raise HarnessError(f"unknown target {arg!r}: not a run folder, suite folder or report.json, "
                       f"and no run or suite id {arg!r} under {root}")


def _default_root() -> Path:
    from ..paths import reports_dir
    return reports_dir()


def _latest(root: Path) -> Path:
    """The newest report folder: run and suite ids start with a timestamp, so the largest name wins.

    Folders not named by a timestamp (committed reference runs) count only when there is no other.
    A folder named by a timestamp counts only when the harness made it (`rundir.made_by_harness`):
    anyone who can create a folder there could otherwise name the newest one.
    """
    from ..rundir import made_by_harness
    if not root.is_dir():
        raise HarnessError(f"no target 'latest': the reports folder {root} does not exist")
    found = [d for d in root.iterdir()
             if d.is_dir() and ((d / "report.json").is_file() or (d / "suite.json").is_file())]
    found = [d for d in found if not TIMESTAMPED.match(d.name) or made_by_harness(d)]
    if not found:
        raise HarnessError(f"no target 'latest': {root} has no folder with a report.json or suite.json "
                           f"that the harness made")
    stamped = [d for d in found if TIMESTAMPED.match(d.name) and made_by_harness(d)]
    return max(stamped or found, key=lambda d: d.name)


def load_target(arg: str, reports_root: Path | None = None) -> dict[str, dict]:
    """Load a run or suite as {experiment: report dict} (a `Target`, which also knows its label).

    `arg` is a run folder, a suite folder, a report.json or suite.json, a run or suite id under
    `reports_root` (default: harness.paths.reports_dir()), or `latest`.
    """
    p = find_folder(str(arg), reports_root)
    if p.is_dir():
        if (p / "suite.json").is_file():
            return _load_suite(p / "suite.json", read_json(p / "suite.json"))
        if (p / "report.json").is_file():
            return _load_run(p / "report.json", read_json(p / "report.json"))
        raise HarnessError(f"{p} has neither report.json nor suite.json: not a run or suite folder")
    data = read_json(p)
    if isinstance(data.get("experiments"), list):
        return _load_suite(p, data)
    return _load_run(p, data)


def read_json(path: Path) -> dict:
    """A JSON object from a file, or one clear HarnessError (missing, unreadable, too large, invalid or
    not strict JSON, not an object): see report/validate.py."""
    return validate.read_json(path)


def check_report(path: Path, data: dict) -> list[str]:
    """Raise unless `data` is a run report that follows docs/report.schema.json; return notes (a newer
    schema) for the warnings."""
    if not isinstance(data.get("experiment"), str):
        raise HarnessError(f"{validate.term(str(path))} is not a run report (it has no 'experiment' field)")
    return validate.check(data, "report", path)


def _label_of(path: Path) -> str:
    """A folder's name for report.json / suite.json, else the file's stem."""
    return path.parent.name if path.name in ("report.json", "suite.json") else path.stem


def _load_run(path: Path, data: dict) -> Target:
    notes = check_report(path, data)
    return Target({data["experiment"]: data}, _label_of(path), path, "run", notes=notes)


def _load_suite(path: Path, data: dict) -> Target:
    base, label = path.parent, _label_of(path)
    if not isinstance(data.get("experiments"), list):
        raise HarnessError(f"{validate.term(str(path))} is not a suite (it has no 'experiments' list)")
    notes = validate.check(data, "suite", path)
    entries = [e for e in data["experiments"] if isinstance(e, dict)]
    names = [e.get("experiment") for e in entries]
    reports, missing, seen = {}, [], {}
    for entry in entries:
        exp = entry.get("experiment")
        rel = entry.get("report") or (f"{exp}/report.json" if exp else None)
        if not rel:
            notes.append(f"{label}: an entry of suite.json names no experiment and no report; skipped")
            continue
        if not within(base, str(rel)):   # `../../etc/passwd`, `/etc/shadow`, a link out of the folder
            raise HarnessError(f"{validate.term(str(path))}: the report of experiment {validate.term(str(exp))[:80]!r} "
                               f"is not inside the suite folder; nothing was read")
        rpath = base / rel
        if not rpath.is_file():
            why = entry.get("error") or entry.get("reason") or f"{rpath} is missing"
            notes.append(f"{label}: {exp or rel} has no report ({why})")
            missing.append((exp or rel, str(entry.get("verdict") or "failed"), why))
            continue
        real = rpath.resolve()
        if real in seen:
            raise HarnessError(f"{validate.term(str(path))}: experiments {validate.term(str(seen[real]))[:80]!r} and "
                               f"{validate.term(str(exp))[:80]!r} name the same report; nothing was compared")
        seen[real] = exp
        rep = read_json(rpath)
        notes += check_report(rpath, rep)
        # The entry's report must be of that entry: one run's report read for another experiment gates nothing.
        for field_name in ("experiment", "run_id"):
            said = entry.get(field_name)
            if isinstance(said, str) and rep.get(field_name) != said:
                raise HarnessError(f"{validate.term(str(path))}: the entry for {validate.term(str(exp))[:80]!r} names "
                                   f"{validate.term(str(rpath))}, whose {field_name} is "
                                   f"{validate.term(str(rep.get(field_name)))[:80]!r}; nothing was compared")
        # The same experiment twice in a suite (say eos at several commit intervals): key by run folder.
        key = exp or rep["experiment"]
        if names.count(key) > 1 or key in reports:
            key = rpath.parent.name
        key, n = (key, 2) if key not in reports else (f"{key}#2", 3)
        while key in reports:
            key, n = f"{key.rsplit('#', 1)[0]}#{n}", n + 1
        reports[key] = rep
    if not reports:
        raise HarnessError(f"suite {label} ({path}) lists no experiment with a readable report.json")
    return Target(reports, label, path, "suite",
                  environment=data.get("environment") if isinstance(data.get("environment"), dict) else {},
                  notes=notes, missing=missing)


# -- the comparison --------------------------------------------------------------------------

@dataclass
class Row:
    experiment: str
    metric: str
    values: list            # one per target; None when absent (see `present`)
    present: list[bool]     # whether the experiment exists in each target
    delta: float | int | None = None        # last - first, numbers only
    delta_pct: float | None = None          # 100 * delta / first; None when first is 0 and last is not

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
    """Put targets side by side. Deltas are last minus first; warnings say what makes them incomparable."""
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
            row = Row(key, name, values, [r is not None for r in reports])
            first, last = values[0], values[-1]
            if len(values) > 1 and _is_number(first) and _is_number(last):
                d = last - first
                # A delta that is not a finite number (1e308 - -1e308; 1.0 over 5e-324) is None: JSON has no inf.
                row.delta = _finite(round(d, 6) if isinstance(d, float) else d)
                row.delta_pct = (0.0 if d == 0 else None) if first == 0 else _finite(_percent(d, first))
            rows.append(row)
    experiments = {k: [r.get("experiment") if r is not None else None for r in reps] for k, reps in groups.items()}
    warnings = [n for t in targets for n in getattr(t, "notes", [])]
    warnings += _missing_warnings(groups, labels)
    warnings += _env_warnings(targets, labels)
    warnings += _param_warnings(groups, labels)
    return Comparison(labels, rows, warnings, experiments, list(getattr(targets[-1], "missing", [])))


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
        if len(set(shown)) > 1:
            out.append(f"{key} differs: {_per_target(shown, labels)}")
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
            shown = tuple((lab, _show((r.get("params") or {}).get(key))) for lab, r in here)
            if len({v for _, v in shown}) > 1:
                diffs.setdefault(shown, []).append(exp)
        for shown, exps in diffs.items():
            where = "" if len(exps) == len(compared) else f" for {', '.join(exps)}"
            out.append(f"params differ{where}: {key} "
                       + _per_target([v for _, v in shown], [lab for lab, _ in shown]))
    return out


# -- --fail-on rules -------------------------------------------------------------------------

OPS = {">": operator.gt, ">=": operator.ge, "<": operator.lt, "<=": operator.le, "==": operator.eq, "!=": operator.ne,
       "not in": lambda a, b: a not in b}
VERDICT_WORDS = tuple(v for v in VERDICTS if v != "as-predicted")
# `unexpected` means "anything but as-predicted": a run that did not finish proved nothing, so it fails
# the rule too, unless --allow-incomplete lets these verdicts (a suite's "not run" included) pass.
PASSING_VERDICTS = ("as-predicted",)
UNFINISHED_VERDICTS = ("incomplete", "interrupted", "not run")

RULE_FORMS = ("unexpected (any verdict but as-predicted in the last target: unexpected, incomplete, "
              "interrupted, a suite experiment without a report) | incomplete | interrupted (that verdict), "
              "METRIC OP NUMBER (the last target's value, e.g. lost>0, rc.duplicates>=1), "
              "METRIC OP +N% or -N% (change from the first target in percent, e.g. wall_seconds>+20%), "
              "METRIC OP +N or -N (change from the first target, e.g. duplicates>+0), "
              "verdict==WORD or verdict!=WORD; any of them may start with EXPERIMENT: (e.g. eos:rc.duplicates>0); "
              "OP is one of > >= < <= == !=")

_RULE = re.compile(r"^\s*(?:(?P<exp>[^:\s<>=!]+)\s*:\s*)?(?P<metric>[A-Za-z_.()]+)\s*"
                   r"(?P<op>>=|<=|==|!=|>|<)\s*(?P<value>\S+)\s*$")
_VERDICT_RULE = re.compile(r"^(?:(?P<exp>[^:\s<>=!]+)\s*:\s*)?(?P<word>[a-z-]+)$")
_NUMBER = re.compile(r"^(?P<sign>[+-])?(?P<num>\d+(?:\.\d+)?|\.\d+)(?P<pct>%)?$")


@dataclass(frozen=True)
class Rule:
    text: str
    metric: str
    op: str
    value: float | str
    mode: str = "absolute"          # "absolute" (last value), "change" (last - first) or "percent"
    experiment: str | None = None   # None: every experiment that has the metric

    def holds(self, observed) -> bool:
        return OPS[self.op](observed, self.value)


def parse_fail_on(expr: str, allow_incomplete: bool = False) -> Rule:
    """Parse one --fail-on expression, or raise a HarnessError that lists the accepted forms.

    `unexpected` fires on every verdict but as-predicted (with `allow_incomplete`, runs that did not
    finish pass); `incomplete` and `interrupted` fire on that verdict only.
    A number with an explicit sign is a change from the first target: `wall_seconds>+20%` fires when
    the last target is more than 20% slower than the first, `duplicates>+0` when duplicates grew.
    """
    text = str(expr).strip()
    bad = f"invalid --fail-on {text!r}; accepted forms: {RULE_FORMS}"
    word = _VERDICT_RULE.match(text)
    if word and word["word"] == "unexpected":
        allowed = PASSING_VERDICTS + (UNFINISHED_VERDICTS if allow_incomplete else ())
        return Rule(text, "verdict", "not in", allowed, "absolute", word["exp"])
    if word and word["word"] in VERDICT_WORDS:
        return Rule(text, "verdict", "==", word["word"], "absolute", word["exp"])
    m = _RULE.match(text)
    if not m:
        raise HarnessError(bad)
    metric = ALIASES.get(m["metric"], m["metric"])
    if metric not in METRIC_NAMES:
        raise HarnessError(f"invalid --fail-on {text!r}: unknown metric {m['metric']!r}; "
                           f"metrics: {', '.join(METRIC_NAMES)}")
    op, raw = m["op"], m["value"]
    if metric == "verdict":
        if op not in ("==", "!=") or raw not in VERDICTS:
            raise HarnessError(f"invalid --fail-on {text!r}: verdict rules are verdict==WORD or verdict!=WORD "
                               f"with WORD one of {', '.join(VERDICTS)}")
        return Rule(text, metric, op, raw, "absolute", m["exp"])
    n = _NUMBER.match(raw)
    if not n:
        raise HarnessError(bad)
    value = float(n["num"]) * (-1 if n["sign"] == "-" else 1)
    # `wall_seconds>20%` reads as +20%: a percentage is always a change from the first target.
    mode = "percent" if n["pct"] else ("change" if n["sign"] else "absolute")
    return Rule(text, metric, op, value, mode, m["exp"])


def evaluate(comparison: Comparison, rules: list[Rule], allow_unknown: bool = False) -> list[str]:
    """Messages for the rules that fire, e.g. "dedupe: duplicates = 3 (rule duplicates>0)".

    A rule that cannot apply (an experiment not in the last target, a metric no report has, a
    relative rule with one target) is a mistake, so it raises HarnessError instead of staying silent.
    A rule that cannot be checked fails: an experiment the last suite lists without a report (whatever
    verdict suite.json gives it), or a metric of `MUST_KNOW` that is null, missing or not a number.
    With `allow_unknown` those pass, except for `unexpected` (whose relaxation is --allow-incomplete).
    """
    fired = []
    n = len(comparison.labels)
    first_label, last_label = comparison.labels[0], comparison.labels[-1]
    for rule in rules:
        if rule.mode != "absolute" and n < 2:
            raise HarnessError(f"--fail-on {rule.text!r} compares with the first target, "
                               f"so it needs at least two targets (got {n})")
        matched = 0
        if rule.op == "not in":   # `unexpected`: experiments the last suite lists without a report fail it too
            missing = [m for m in comparison.missing if rule.experiment in (None, m[0])]
            for exp, verdict, why in missing:
                matched += 1
                if verdict in PASSING_VERDICTS:   # suite.json's word alone proves nothing
                    fired.append(f"{exp}: no report, though suite.json says {verdict} ({why}) (rule {rule.text})")
                elif rule.holds(verdict):
                    fired.append(f"{exp}: no report, verdict {verdict} ({why}) (rule {rule.text})")
            if missing and rule.experiment is not None:
                continue
        else:     # any other rule cannot be checked on an experiment without a report
            missing = [m for m in comparison.missing if rule.experiment in (None, m[0])]
            for exp, verdict, why in missing:
                matched += 1
                if not allow_unknown:
                    fired.append(f"{exp}: no report ({why}), so {rule.metric} cannot be checked (rule {rule.text})")
            if missing and rule.experiment is not None:
                continue
        keys = _rule_experiments(comparison, rule)
        for key in keys:
            row = next((r for r in comparison.rows if r.experiment == key and r.metric == rule.metric), None)
            last = row.values[-1] if row else None
            first = row.values[0] if row else None
            names = comparison.experiments[key]
            if rule.mode == "absolute":
                if rule.op != "not in" and names[-1] is not None and _unknown(rule, last):
                    matched += 1
                    if not allow_unknown:
                        fired.append(f"{names[-1]}: {rule.metric} is {_what(last)} in its report, so the rule "
                                     f"cannot be checked (rule {rule.text})")
                    continue
                if last is None and not (rule.op == "not in" and names[-1] is not None):
                    continue    # ...but a report without a verdict is not as-predicted
                matched += 1
                if (rule.op == "not in" or isinstance(last, str) == isinstance(rule.value, str)) and rule.holds(last):
                    name = comparison.experiments[key][-1] or key   # the last target's experiment
                    fired.append(f"{name}: {rule.metric} = {fmt(last)} (rule {rule.text})")
                continue
            if not (_is_number(first) and _is_number(last)):
                if names[0] is not None and names[-1] is not None and (_unknown(rule, first) or _unknown(rule, last)):
                    matched += 1
                    if not allow_unknown:
                        bad = last if _unknown(rule, last) else first
                        fired.append(f"{key}: {rule.metric} is {_what(bad)} in "
                                     f"{last_label if bad is last else first_label}, so the rule cannot be "
                                     f"checked (rule {rule.text})")
                continue
            matched += 1
            change = last - first
            if rule.mode == "percent":
                if first:
                    observed = 100.0 * change / first
                else:   # from 0: any growth is an infinite percentage
                    observed = 0.0 if change == 0 else math.copysign(math.inf, change)
                shown = f"{observed:+.1f}%" if math.isfinite(observed) else "from 0"
            else:
                observed, shown = change, _signed(change)
            if rule.holds(observed):
                names = comparison.experiments[key]
                who = key if names[0] == names[-1] else f"{names[0]} -> {names[-1]}"
                fired.append(f"{who}: {rule.metric} {fmt(first)} -> {fmt(last)} ({shown}) (rule {rule.text})")
        if not matched:
            which = f"both {first_label} and {last_label}" if rule.mode != "absolute" else last_label
            where = (f"experiment {rule.experiment} has no {rule.metric}" if rule.experiment
                     else f"no experiment has {rule.metric}")
            raise HarnessError(f"--fail-on {rule.text!r} cannot apply: {where} in {which}")
    return fired


def _unknown(rule: Rule, value) -> bool:
    """Whether `value` leaves `rule` unchecked: not a number for a numeric rule (or not a word for a verdict
    rule), where the metric is one every report has, or is there but of the wrong kind."""
    if isinstance(rule.value, str) or rule.op == "not in":
        return value is not None and not isinstance(value, str) or (value is None and rule.metric in MUST_KNOW)
    if _is_number(value):
        return False
    return value is not None or rule.metric in MUST_KNOW


def _what(value) -> str:
    return "unknown (null or missing)" if value is None else f"not a number ({term(repr(value))[:40]})"


def _rule_experiments(comparison: Comparison, rule: Rule) -> list[str]:
    """The experiment keys a rule looks at: all of them, or the one it names (by key or by the last run's name)."""
    if rule.experiment is None:
        return list(comparison.experiments)
    keys = [k for k, names in comparison.experiments.items() if rule.experiment in (k, names[-1])]
    if not keys:
        in_last = [k for k, names in comparison.experiments.items() if names[-1] is not None]
        raise HarnessError(f"--fail-on {rule.text!r} names experiment {rule.experiment!r}, which is not in "
                           f"{comparison.labels[-1]} (it has: {', '.join(in_last) or 'nothing'})")
    return keys


# -- renderings ------------------------------------------------------------------------------

def _signed(v) -> str:
    if v is None:
        return ""
    if v == 0:
        return "0"
    s = fmt(v)
    return s if s.startswith("-") else "+" + s


def _cells(c: Comparison) -> tuple[list[str], list[list[str]]]:
    """Header and formatted cells shared by text and Markdown; `-` = experiment not in that target."""
    two = len(c.labels) > 1
    head = ["experiment", "metric", *c.labels] + (["delta", "delta %"] if two else [])
    body, prev = [], None
    for r in c.rows:
        cells = [r.experiment if r.experiment != prev else "", r.metric]
        cells += [fmt(v) if here else "-" for v, here in zip(r.values, r.present)]
        if two:
            if r.delta is not None:
                pct = "n/a" if r.delta_pct is None else ("0.0%" if r.delta_pct == 0 else f"{r.delta_pct:+.1f}%")
                cells += [_signed(r.delta), pct]
            else:
                strings = all(isinstance(v, str) for v in r.values)
                cells += ["changed" if strings and r.changed else "", ""]
        body.append(cells)
        prev = r.experiment
    return head, body


def to_text(c: Comparison) -> str:
    """An aligned plain table: names left, numbers right. Warnings are not included (print them apart).
    Every cell is shown for a terminal (escape.term): a name holding ESC or a newline prints as text."""
    head, body = _cells(c)
    head, body = [term(x) for x in head], [[term(x) for x in row] for row in body]
    widths = [max(len(row[i]) for row in [head] + body) for i in range(len(head))]

    def line(cells):
        padded = (cell.ljust(w) if i < 2 else cell.rjust(w) for i, (cell, w) in enumerate(zip(cells, widths)))
        return "  ".join(padded).rstrip()
    out = [line(head), "  ".join("-" * w for w in widths)] + [line(row) for row in body]
    if len(c.labels) > 1:
        out.append(f"(delta: {term(c.labels[-1])} minus {term(c.labels[0])})")
    return "\n".join(out) + "\n"


def to_markdown(c: Comparison) -> str:
    """A Markdown table (warnings first, for pasting); every cell, label and warning escaped (escape.md)."""
    head, body = _cells(c)
    out = []
    if c.warnings:
        out += [f"> warning: {md(w)}  " for w in c.warnings] + [""]
    out.append("| " + " | ".join(md(x) for x in head) + " |")
    out.append("| " + " | ".join("---" if i < 2 else "---:" for i in range(len(head))) + " |")
    out += ["| " + " | ".join(md(cell) for cell in row) + " |" for row in body]
    if len(c.labels) > 1:
        out += ["", f"Delta: {md(c.labels[-1])} minus {md(c.labels[0])}."]
    return "\n".join(out) + "\n"


def to_json(c: Comparison, failures: list[str] | None = None) -> str:
    data = {"targets": c.labels, "warnings": c.warnings,
            "rows": [{"experiment": r.experiment, "metric": r.metric,
                      "values": [v if here else None for v, here in zip(r.values, r.present)],
                      "present": r.present, "delta": r.delta, "delta_pct": r.delta_pct, "changed": r.changed}
                     for r in c.rows]}
    if failures is not None:
        data["failures"] = failures
    return json.dumps(data, indent=2, allow_nan=False) + "\n"   # strict JSON: never Infinity or NaN
