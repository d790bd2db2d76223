"""`harness suite --group NAME`: each declaration names its group; all experiments by default; an
unknown group is one line naming the valid ones (exit 2), before any stack is touched."""

import os

import pytest

from harness.errors import HarnessError
from harness.experiments import REGISTRY
from harness.suite import groups, parse_experiments, suite_experiments
from tests.conftest import harness
from tests.unit.test_cli_errors import isolated, one_clear_line  # noqa: F401 - the fixture


def test_every_experiment_is_in_one_group_and_the_default_is_all():
    g = groups()
    assert sorted(n for names in g.values() for n in names) == sorted(REGISTRY)
    assert g["core"] == ["offset-before", "offset-after", "dedupe"]
    assert {"key-after-effect", "key-before-effect", "key-per-attempt", "key-expiry", "increment",
            "versioned"} <= set(g["mistakes"])
    assert suite_experiments() == list(REGISTRY) == parse_experiments(None)
    assert parse_experiments(None, "mistakes") == g["mistakes"]


def test_an_unknown_group_names_the_valid_ones():
    with pytest.raises(HarnessError, match=r"unknown --group 'nope'; choose one of: core, eos, mistakes"):
        suite_experiments("nope")
    with pytest.raises(HarnessError, match="give one of them"):
        parse_experiments("dedupe", "core")


def test_the_cli_refuses_an_unknown_group_in_one_line_with_exit_2(isolated):  # noqa: F811
    proc = harness("suite", "--group", "nope", env=isolated)
    assert proc.returncode == 2
    one_clear_line(proc, "unknown --group 'nope'", "core", "mistakes")
    assert not os.path.exists(isolated["HARNESS_HOME"]), "a refused suite started something"
