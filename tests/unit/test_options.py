"""Run options are declared once: `--help`, the checks, the owners' refusals and the workers' argv come
from the declarations (harness/core/options.py), and nothing else writes an option's flag or default."""

import re

import pytest
from click.testing import CliRunner

from harness.cli.entry import cli
from harness.core.errors import HarnessError
from harness.experiments import REGISTRY
from harness.core.options import Option, worker_options
from harness.run.params import RunParams, declared, resolve


def _help_of(command) -> dict:
    """flag -> the help text `--help` prints for it (click's own rendering, default included)."""
    ctx = command.make_context(command.name, ["--help"], resilient_parsing=True)
    return {p.opts[0]: p.get_help_record(ctx)[1] for p in command.params if p.get_help_record(ctx)}


def test_every_declared_default_is_the_one_run_help_shows():
    from harness.cli.commands.run import run
    shown_by_run = _help_of(run)
    for name, d in declared().items():
        opt = d.option
        own = {e.name: e.defaults[name] for e in REGISTRY.values() if name in e.defaults}
        text = shown_by_run[opt.flag]
        assert text.startswith(opt.help)
        parts = ([opt.default_text()] if opt.default_text() else []) + [f"{who} {v:g}" for who, v in own.items()]
        if parts:
            assert text.endswith(f"[default: {'; '.join(parts)}]"), (opt.flag, text)
        else:
            assert "[default:" not in text, (opt.flag, text)


def test_the_suite_shows_the_same_defaults_as_run():
    from harness.cli.commands.suite import SUITE_OPTIONS, suite
    shown_by_suite = _help_of(suite)
    for opt in SUITE_OPTIONS:
        assert shown_by_suite[opt.flag].endswith(f"[default: {opt.default_text()}]"), opt.flag


def test_no_command_module_writes_a_run_options_flag_itself():
    from pathlib import Path
    import harness.cli.commands as commands
    flags = {d.option.flag for d in declared().values()}
    # bench's options (sizes, repetitions) are its own; audit's --audit-sql is the recount's query, not a run's.
    own = {"bench.py": flags, "audit.py": {"--audit-sql"}}
    for path in Path(commands.__file__).parent.glob("*.py"):
        written = set(re.findall(r'"(--[a-z-]+)"', path.read_text())) & flags - own.get(path.name, set())
        assert not written, f"{path.name} writes {written} itself"


def test_one_name_one_declaration():
    every = declared()
    assert len(every) == len({d.option.flag for d in every.values()})
    flags = {d.option.flag for d in every.values()} | {"--fault"}     # --fault: the specs, not an Option
    for exp in REGISTRY.values():
        for name in [*exp.defaults, *exp.refuses]:
            assert name in every, f"{exp.name} names an undeclared option {name}"
        for word in exp.suite.get("args", []):      # what the suite passes it: declared flags only
            assert not word.startswith("--") or word in flags, f"{exp.name}'s suite args name {word}"


@pytest.mark.parametrize("name", sorted(n for n, d in declared().items() if d.experiments))
def test_an_experiments_option_given_elsewhere_is_refused_naming_who_takes_it(name):
    d = declared()[name]
    other = next(e for e in REGISTRY.values() if e.name not in d.experiments and not e.rules)
    value = True if d.option.type is bool else d.option.choices[-1] if d.option.choices else \
        ("x" if d.option.type is str else d.option.type(d.option.low if d.option.low is not None else 1) or 1)
    with pytest.raises(HarnessError) as e:
        resolve(RunParams(other.name, **{name: value}))
    assert str(e.value).startswith(f"{d.option.flag} applies to ")
    assert f"{other.name} does not take it" in str(e.value)


def test_values_are_checked_against_their_declaration():
    opt = Option("x_seconds", float, "x", low=0.0, high=10, must="a number of seconds between 0 and 10")
    for bad in (-1.0, 11.0, float("nan"), float("inf")):
        with pytest.raises(HarnessError, match="--x-seconds must be a number of seconds between 0 and 10"):
            opt.check(bad)
    opt.check(None)
    opt.check(10.0)
    count = Option("n", int, "n", low=1, high=5, why_high="five is plenty")
    with pytest.raises(HarnessError, match=r"--n must be at least 1, got 0"):
        count.check(0)
    with pytest.raises(HarnessError, match=r"--n must be at most 5 \(five is plenty\), got 6"):
        count.check(6)


def test_no_option_takes_a_name_the_run_command_uses_itself():
    from harness.cli.commands.run import run
    own = {p.name for p in run.params} - set(declared())
    assert own >= {"experiment", "out", "quiet", "keep_stack", "stack_kind"}
    assert not own & set(declared())
    assert len({p.name for p in run.params}) == len(run.params)


def test_frozen_params_copy_pickle_and_replace():
    import copy
    import pickle
    p = resolve(RunParams("key-expiry", messages=50)).params
    with pytest.raises(TypeError):
        p._values["messages"] = 10 ** 9           # read-only: no way around the checks
    assert copy.deepcopy(p) == p == pickle.loads(pickle.dumps(p))
    assert pickle.loads(pickle.dumps(p)).explicit() == p.explicit()
    q = p.replace(experiment="dedupe", messages=7)
    assert (q.experiment, q.messages, p.messages) == ("dedupe", 7, 50)


def test_an_experiments_own_default_fills_only_what_was_not_given():
    ttl = REGISTRY["key-expiry"].defaults["dedupe_ttl"]
    assert resolve(RunParams("key-expiry")).params.dedupe_ttl == ttl
    assert resolve(RunParams("key-expiry", restart_delay=0.0)).params.restart_delay == 0.0   # given, even as 0


def test_the_run_is_resolved_once_and_frozen():
    p = resolve(RunParams("key-expiry")).params
    assert p.dedupe_ttl == REGISTRY["key-expiry"].defaults["dedupe_ttl"]
    with pytest.raises(AttributeError):
        p.messages = 5
    assert resolve(p).params == p           # resolving again changes nothing
    eos = resolve(RunParams("eos", fresh_transactional_id=True)).params
    assert eos.transaction_timeout_ms is not None    # derived from the fresh ids, so the report says what ran
    assert resolve(RunParams("eos")).params.transaction_timeout_ms is None


def test_workers_get_the_options_their_experiment_declares_for_them():
    from types import SimpleNamespace
    from pathlib import Path
    from harness.experiments.launch import python_worker_command
    from harness.workload.naming import RunNames
    resolved = resolve(RunParams("key-expiry", dedupe_ttl=1.5))
    run = SimpleNamespace(params=resolved.params, exp=resolved.exp, names=RunNames("r1"),
                          stack=SimpleNamespace(bootstrap_servers="127.0.0.1:1"), crash_log=Path("c"),
                          events=Path("e"), crash_plan=Path("p"), history=Path("h"))
    cmd = python_worker_command(run, SimpleNamespace(name="w0", index=0, attempt=1), [0], "g", "t")
    pairs = [cmd[i + 1] for i, a in enumerate(cmd) if a == "--option"]
    assert worker_options(pairs) == {"dedupe_ttl": 1.5}
    assert "--restart-delay" not in " ".join(cmd)     # the supervisor's option stays with the supervisor
