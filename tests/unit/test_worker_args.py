"""The worker's command line: the launcher encodes it, the worker decodes it, one table between them."""

import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from harness.core.options import worker_options
from harness.experiments import REGISTRY
from harness.experiments.launch import python_worker_command
from harness.run.params import COMMIT_EVERY
from harness.runtime import worker_args
from harness.workers.worker import parse


def _run(exp_name: str, **params):
    exp = REGISTRY[exp_name]
    p = {o.name: o.default for o in exp.options}
    p.update(commit_every=7, no_history=False, fresh_transactional_id=False, **params)
    names = SimpleNamespace(ledger_table="led", dedupe_table="ded", rejects_table="rej", rows_table="rows",
                            outbox_table="out", events_topic="ev", output_topic="outt", accounts_table="acc",
                            transactional_id=lambda i: f"tid-{i}")
    return SimpleNamespace(params=SimpleNamespace(**p), names=names, exp=exp,
                           stack=SimpleNamespace(bootstrap_servers="127.0.0.1:9"), crash_log=Path("/r/crash-log"),
                           events=Path("/r/events"), crash_plan=Path("/r/plan"), history=Path("/r/history"))


@pytest.mark.parametrize("name", sorted(REGISTRY))
def test_what_the_launcher_writes_the_worker_reads_back(name):
    run = _run(name)
    slot = SimpleNamespace(name="w1", attempt=3, index=1)
    cmd = python_worker_command(run, slot, [1, 3], "grp", "in", role="relay", after=["a-0", "b-0"])
    assert cmd[:3] == [sys.executable, "-m", "harness.workers.worker"]
    args = parse(cmd[3:])
    assert (args.experiment, args.worker, args.attempt, args.partitions) == (name, "w1", 3, [1, 3])
    assert (args.group, args.input_topic, args.commit_every, args.role, args.after) == ("grp", "in", 7, "relay",
                                                                                        ["a-0", "b-0"])
    assert args.crash_log == "/r/crash-log" and args.history == "/r/history"
    exp = run.exp
    assert args.ledger == ("led" if exp.stores.ledger else None)
    assert args.transactional_id == ("tid-1" if exp.stores.output else None)
    declared = {o.name: getattr(run.params, o.name) for o in exp.options if o.worker}
    assert worker_options(args.option) == {k: v for k, v in declared.items() if v is not None}


def test_a_declared_option_keeps_its_type_and_none_stays_out():
    argv = worker_args.encode({"experiment": "x", "worker": "w0", "bootstrap": "b", "group": "g",
                               "input_topic": "t", "partitions": [0], "commit_every": 1, "crash_log": "c",
                               "events": "e", "option": {"fence": "yes", "n": 2, "f": 0.5, "gone": None}})
    assert worker_options(parse(argv).option) == {"fence": "yes", "n": 2, "f": 0.5}


def test_commit_every_has_one_default_the_run_options():
    # The worker has no default of its own: a launcher that forgets it is told at once.
    assert worker_args.BY_NAME["commit_every"].default is None and COMMIT_EVERY.default == 1
    with pytest.raises(ValueError, match="commit_every"):
        worker_args.encode({"experiment": "x", "worker": "w0", "bootstrap": "b", "group": "g", "input_topic": "t",
                            "partitions": [0], "crash_log": "c", "events": "e"})


def test_an_unknown_value_is_refused():
    with pytest.raises(ValueError, match="not a worker argument: colour"):
        worker_args.encode({"colour": "red"})


def test_every_worker_argument_is_one_flag_of_its_name():
    flags = [a.option_strings[0] for a in worker_args.parser()._actions if a.option_strings[0] != "-h"]
    assert flags == [a.flag for a in worker_args.ARGS]
