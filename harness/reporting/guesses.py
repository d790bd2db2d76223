"""Predict first: a learner's guesses, recorded before a run starts, then set beside what it measured.

`harness run EXPERIMENT --predict duplicates=110,lost=0` and `harness suite
--predict worksheet.toml` (a worksheet `harness worksheet` prints) write the
guesses to guesses.json in the run's (or suite's) folder before any payment is
produced: a guess written after the run could not be told from a copy of its
numbers. The reports then show, per question, "you / actual / close enough".
Close enough: within 10 % of the actual number, or exactly it when it is 0.
Bad input (an unknown count, a guess that is not a whole number) is one
HarnessError line.
"""

import json
import re
import time
from pathlib import Path

from ..core.errors import HarnessError, did_you_mean
from ..experiments.questions import CORE_QUESTIONS
from .comparison import applies
from .shared import fmt, is_number

FILE = "guesses.json"
RULE = ("close enough: within 10 % of the actual number, or exact when it is 0; deliveries, effects and the ledger "
        "total are judged by how far they are from the payments sent (the expected total): the redeliveries and "
        "losses are the lesson, not the payments every run has")

# What a guess may be about -> (how the reports name it, where its actual number is in report data).
METRICS = {
    "sent": ("payments sent", lambda d: d["counts"].get("sent")),
    "deliveries": ("deliveries", lambda d: d["counts"].get("deliveries")),
    "effects": ("effects (ledger rows, or read_committed records)", lambda d: d["counts"].get("effects")),
    "duplicates": ("duplicates", lambda d: d["counts"].get("duplicates")),
    "lost": ("lost", lambda d: d["counts"].get("lost")),
    "dedupe_hits": ("dedupe hits", lambda d: d["counts"].get("dedupe_hits")),
    "ledger_total": ("ledger total", lambda d: (d.get("ledger") or {}).get("actual_total")),
    "crashes": ("crashes", lambda d: d["crashes"] if is_number(d.get("crashes")) else len(d.get("crashes") or [])),
    "committed_duplicates": ("duplicates in the output topic, read_committed",
                             lambda d: _topic(d, "read_committed")),
    "uncommitted_duplicates": ("duplicates in the output topic, read_uncommitted",
                               lambda d: _topic(d, "read_uncommitted")),
}

# A count judged by its distance from a baseline every run has (report data -> the baseline, or None).
BASELINES = {
    "deliveries": lambda d: d["counts"].get("sent"),
    "effects": lambda d: d["counts"].get("sent"),
    "ledger_total": lambda d: (d.get("ledger") or {}).get("expected_total"),
}

UNANSWERED = "?"
COLUMNS = ("question", "you", "actual", "close enough")
SUITE_COLUMNS = ("experiment", *COLUMNS)


# A guess's count -> the comparison's name for it, whose rule says whether it applies to a run.
APPLIES = {"committed_duplicates": "rc.duplicates", "uncommitted_duplicates": "ru.duplicates"}


DIGITS = re.compile(r"[0-9]+")          # ASCII digits only: str.isdigit also takes '²', which int() refuses


def _topic(d: dict, iso: str):
    ko = d.get("kafka_output")
    return ko[iso].get("duplicates") if isinstance(ko, dict) and isinstance(ko.get(iso), dict) else None


def _metric(name: str, where: str) -> str:
    key = name.strip().replace("-", "_")
    if key not in METRICS:
        raise HarnessError(f"{where}: no count named {name.strip()!r} to guess; {did_you_mean(key, METRICS)}"
                           f"the counts: {', '.join(METRICS)}")
    return key


def _number(value, where: str) -> int:
    if isinstance(value, str) and value.strip() == UNANSWERED:
        raise HarnessError(f"{where} has no guess yet: replace {UNANSWERED} with a whole number")
    if isinstance(value, bool) or not (isinstance(value, int) or (isinstance(value, str) and
                                                                   DIGITS.fullmatch(value.strip().replace(",", "")))):
        raise HarnessError(f"{where} must be a whole number of at least 0, got {value!r}")
    n = int(str(value).replace(",", "")) if isinstance(value, str) else value
    if n < 0:
        raise HarnessError(f"{where} must be a whole number of at least 0, got {value!r}")
    return n


def parse_spec(spec: str) -> dict[str, int]:
    """`duplicates=110,lost=0` -> {"duplicates": 110, "lost": 0}; a mistake is one HarnessError line."""
    out = {}
    for part in [p for p in spec.split(",") if p.strip()]:
        name, eq, value = part.partition("=")
        if not eq:
            raise HarnessError(f"--predict takes COUNT=NUMBER,..., got {part.strip()!r}")
        key = _metric(name, "--predict")
        out[key] = _number(value, f"--predict {key}")
    if not out:
        raise HarnessError("--predict takes COUNT=NUMBER,... (for example duplicates=110,lost=0), got nothing")
    return out


def worksheet(names: list[str], group: str | None) -> str:
    """The worksheet to fill in: one line per question, `?` where the guess goes."""
    lines = [f"# Predict first: the worksheet of {'the ' + group + ' group' if group else 'these experiments'}.",
             f"# Replace each {UNANSWERED} with your guess (a whole number), then run:",
             f"#   harness suite {'--group ' + group if group else '--experiments ' + ','.join(names)} "
             "--predict worksheet.toml",
             "# With the suite's defaults: 1,000 payments of 100 each, 10 % of them crash the worker once, seed 25.",
             f"# {RULE[0].upper() + RULE[1:]}."]
    if set(names) == {e for e, _m, _q in CORE_QUESTIONS}:
        qs = CORE_QUESTIONS
    else:
        qs = tuple((n, m, f"{m} in {n}'s main store") for n in names for m in ("duplicates", "lost"))
    lines += [f'{exp}.{metric} = "{UNANSWERED}"   # {question}' for exp, metric, question in qs]
    return "\n".join(lines) + "\n"


def parse_worksheet(path: Path, names: list[str]) -> dict[str, dict[str, int]]:
    """A filled-in worksheet -> {experiment: {count: guess}}, each experiment one of the suite's `names`."""
    import tomllib
    try:
        data = tomllib.loads(Path(path).read_text(encoding="utf-8"))
    except OSError as e:
        raise HarnessError(f"--predict {path}: cannot read it ({e.strerror})") from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as e:
        raise HarnessError(f"--predict {path}: not a TOML worksheet ({str(e).splitlines()[0]})") from None
    out = {}
    for exp, guesses in data.items():
        if exp not in names:
            raise HarnessError(f"{path}: {exp!r} is not an experiment of this suite; {did_you_mean(exp, names)}"
                               f"its experiments: {', '.join(names)}")
        if not isinstance(guesses, dict):
            raise HarnessError(f"{path}: write {exp}'s guesses as {exp}.COUNT = NUMBER, got {exp} = {guesses!r}")
        out[exp] = {(k := _metric(m, f"{path}: {exp}")): _number(v, f"{path}: {exp}.{k}") for m, v in guesses.items()}
    if not out:
        raise HarnessError(f"{path}: no guesses in it (`harness worksheet` prints one to fill in)")
    return out


def record(folder: Path, guesses: dict, source: str) -> None:
    """Write the guesses to the folder before the run starts, with the time they were recorded."""
    from ..core.safefile import write_text
    write_text(Path(folder) / FILE, json.dumps({"recorded_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                                                "source": source, "guesses": guesses}, indent=2) + "\n")


def read(folder: Path) -> dict | None:
    """The folder's guesses.json, or None when there is none or it cannot be read as one."""
    try:
        data = json.loads((Path(folder) / FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) and isinstance(data.get("guesses"), dict) else None


def close_enough(guess: int, actual) -> bool | None:
    """The rule: exact when the actual number is 0, else within 10 % of it; None when it is not known."""
    if not is_number(actual):
        return None
    return guess == 0 if actual == 0 else abs(guess - actual) <= 0.1 * abs(actual)


def board(guesses: dict[str, int], d: dict) -> list[tuple[str, str, str, str]]:
    """(question, you, actual, close enough) of one run's guesses against its report data `d`."""
    out = []
    for key, guess in guesses.items():
        if key not in METRICS or not is_number(guess):
            continue
        label, actual_of = METRICS[key]
        actual = actual_of(d)
        if actual is None and not applies(d, APPLIES.get(key, key)):      # a ledger total where there is no ledger
            out.append((label, fmt(guess), "n/a", "n/a (not in this run)"))
            continue
        base = BASELINES[key](d) if key in BASELINES else 0
        ok = close_enough(guess - base, actual - base) if is_number(base) and is_number(actual) else \
            close_enough(guess, actual) if key not in BASELINES else None
        out.append((label, fmt(guess), fmt(actual), {True: "yes", False: "no", None: "cannot tell"}[ok]))
    return out


def suite_board(recorded: dict, runs: dict[str, dict]) -> list[tuple[str, str, str, str, str]]:
    """(experiment, question, you, actual, close enough) of a suite's worksheet against its runs' data
    (an experiment that did not report: actual unknown)."""
    out = []
    for exp, guesses in (recorded.get("guesses") or {}).items():
        d = runs.get(exp)
        d = d if d and isinstance(d.get("counts"), dict) else None      # failed, not run, interrupted: no counts
        for label, you, actual, ok in board(guesses, d) if d else \
                [(METRICS[k][0], fmt(v), "unknown", "cannot tell") for k, v in guesses.items() if k in METRICS]:
            out.append((exp, label, you, actual, ok))
    return out


def score_line(rows: list[tuple]) -> str:
    """'3 of 4 guesses close enough (...rule)': of the guesses that could be judged; those about a count the run
    does not have, or could not measure, are said apart."""
    judged = [r for r in rows if r[-1] in ("yes", "no")]
    hits = sum(1 for r in judged if r[-1] == "yes")
    rest = len(rows) - len(judged)
    aside = f"; {rest} could not be judged (n/a or not measured)" if rest else ""
    return f"{hits} of {len(judged)} guesses close enough{aside} ({RULE})."


# `harness run --predict`: the guesses of this process's run, set before it starts (one run per process).
_pending: dict | None = None


def expect(guesses: dict[str, int] | None, source: str = "--predict") -> None:
    """The guesses the next run of this process records in its folder as it starts (None: no guesses)."""
    global _pending
    _pending = {"source": source, "guesses": dict(guesses)} if guesses else None


def write_pending(folder: Path) -> None:
    """Record the pending guesses in the run's folder, once it is claimed and before anything runs."""
    global _pending
    if _pending is not None:
        record(folder, _pending["guesses"], _pending["source"])
        _pending = {**_pending, **(read(folder) or {})}


def section() -> dict | None:
    """What report.json says of the guesses recorded for this run (None: the run had none)."""
    return dict(_pending) if _pending is not None else None


def take() -> dict | None:
    """`section()`, once: the guesses belong to one run, not to every later run of this process (an API
    caller's)."""
    global _pending
    out, _pending = section(), None
    return out
