"""The package as a user installs it (tests/integration/installed_wheel.py: a wheel in a fresh virtual
environment outside the checkout), run from an empty folder. Everything a run needs beyond the code (the
Kafka Streams module's sources, the experiment files, the report schemas, the compose files) must come from
the wheel's own data files: `eos-streams` builds its Maven module from them into the cache folder, never
into site-packages. Slow (about 2 minutes: pip fetches the dependencies, mvn builds the Streams worker)."""

import json
import shutil
from pathlib import Path

import pytest

from tests.conftest import searchable_dir
from tests.integration.installed_wheel import data_folder, install, ok, run
from tests.integration.test_up_signals import live_processes_of

pytestmark = [pytest.mark.integration, pytest.mark.slow]

# The files `harness up --stack compose` gives `docker compose` and runs to build and start images
COMPOSE_FILES = ("from harness.stack import compose, compose_auth, compose_images\n"
                 "print(*compose.FILES.values(), compose.PROXIES_FILE, compose.ENGINE_SCRIPT, compose_images.BUILD_SCRIPT,\n"
                 "      *compose_auth.OVERRIDES.values(), compose_auth.START_SCRIPT)")


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    base = tmp_path_factory.mktemp("wheel")
    yield install(base)
    shutil.rmtree(base, ignore_errors=True)


def test_the_wheel_runs_from_an_empty_folder(installed, tmp_path):
    script, env, venv = installed
    data = data_folder(venv)
    home, cache, work = searchable_dir("harness-test-wheel-"), tmp_path / "cache", tmp_path / "work"
    work.mkdir()
    # A cache of its own, so the Streams module is built here from the wheel's files (~/.m2 stays shared: the
    # build downloads nothing new).
    env = {**env, "HARNESS_HOME": str(home), "HARNESS_CACHE": str(cache)}
    try:
        ok(run([script, "up"], work, env), "harness up")
        for experiment, messages in (("offset-before", "200"), ("eos-streams", "100")):
            out = work / experiment
            proc = run([script, "run", experiment, "--messages", messages, "--quiet", "--out", out], work, env)
            report = json.loads((out / "report.json").read_text()) if (out / "report.json").exists() else {}
            assert proc.returncode == 0 and report.get("verdict") == "as-predicted", \
                f"{experiment}: exit {proc.returncode}, verdict {report.get('verdict')}\n{proc.stderr[-3000:]}"
        jars = list(cache.glob("streams-worker/*/target/eos-streams.jar"))
        assert len(jars) == 1, f"the Streams worker was not built in the cache folder: {sorted(cache.iterdir())}"
        assert not list(venv.rglob("eos-streams.jar")), "the Streams worker was built inside the venv"
        listing = ok(run([script, "experiments"], work, env), "harness experiments").stdout
        assert f"Experiment files under {data / 'experiments'}" in listing and "core/offset-before.toml" in listing, \
            listing[-2000:]
        # `up --stack compose` (it needs a Docker engine: test_compose_engine.py runs it from the wheel) uses these
        used = ok(run([venv / "bin" / "python", "-c", COMPOSE_FILES], work, env), "the compose files").stdout.split()
        assert len(used) == 8 and all(Path(f).is_file() and Path(f).is_relative_to(data) for f in used), used
    finally:
        down = run([script, "down", "--purge"], work, env)
        left = live_processes_of(home)
        shutil.rmtree(home, ignore_errors=True)
    assert down.returncode == 0, down.stderr[-2000:]
    assert not left, f"processes of {home} survived `harness down --purge`: {left}"
