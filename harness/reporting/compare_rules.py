"""`--fail-on` rules: what turns a comparison into a CI gate (see `parse_fail_on` for the forms).

Absolute rules read the last target, relative ones the change from the first.
A rule that cannot apply (an experiment or metric that is not there) is a
mistake and raises; a rule that cannot be checked (an experiment a suite lists
without a report, a metric every report must have that is null) fails, unless
--allow-unknown. Apart from comparison.py, which only measures and warns: this
module alone decides what fails.
"""

from __future__ import annotations

import math
import operator
import re
from dataclasses import dataclass

from ..core.errors import HarnessError
from .comparison import ALIASES, METRIC_NAMES, MUST_KNOW, Comparison
from .compare_render import signed
from ..core.escape import term
from .run_report import VERDICTS
from .shared import fmt, is_number

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
            if not (is_number(first) and is_number(last)):
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
                observed, shown = change, signed(change)
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
    if is_number(value):
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
