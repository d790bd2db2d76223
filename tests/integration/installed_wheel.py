"""The package as a user installs it: a wheel built with `python -m build` from a copy of this working tree,
installed into a fresh virtual environment outside the checkout; commands run with no PYTHONPATH and no
HARNESS_* setting of the test session. Used by test_wheel.py (the local stack) and test_compose_engine.py
(the compose stack)."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

from harness.core.procs import die_with_parent
from tests.conftest import ROOT

# pip fetches the dependencies from the package registry the first time (its cache serves later runs)
INSTALL_TIMEOUT_S = 900
RUN_TIMEOUT_S = 900


def run(cmd, cwd, env, timeout=RUN_TIMEOUT_S) -> subprocess.CompletedProcess:
    return subprocess.run([str(c) for c in cmd], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout,
                          preexec_fn=die_with_parent)


def ok(proc, what) -> subprocess.CompletedProcess:
    assert proc.returncode == 0, f"{what} exited {proc.returncode}\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    return proc


def install(base: Path) -> tuple[Path, dict, Path]:
    """(the venv's `harness` script, a clean environment, the venv) with the wheel installed, under `base`."""
    venv, dist = base / "venv", base / "dist"
    base.mkdir(parents=True, exist_ok=True)        # the commands below run in it
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH" and not k.startswith("HARNESS_")}
    ok(run([sys.executable, "-m", "venv", venv], base, env), "python -m venv")
    py = venv / "bin" / "python"
    ok(run([py, "-m", "pip", "install", "-q", "build", "setuptools>=64", "wheel"], base, env, INSTALL_TIMEOUT_S),
       "pip install build")
    # From a copy of the working tree (the build writes harness.egg-info beside pyproject.toml), its links kept
    # as links: the sdist first, then the wheel from the sdist, so both must carry the data files.
    source = base / "source"
    shutil.copytree(ROOT, source, symlinks=True, ignore=shutil.ignore_patterns(
        ".git", ".venv", ".harness", "reports", "target", "build", "dist", "*.egg-info", "__pycache__", ".pytest_cache"))
    ok(run([py, "-m", "build", "--no-isolation", "--outdir", dist, source], base, env, INSTALL_TIMEOUT_S),
       "python -m build")
    wheels, sdists = list(dist.glob("harness-*.whl")), list(dist.glob("harness-*.tar.gz"))
    assert len(wheels) == 1 and len(sdists) == 1, sorted(p.name for p in dist.iterdir())
    ok(run([py, "-m", "pip", "install", "-q", wheels[0]], base, env, INSTALL_TIMEOUT_S), "pip install the wheel")
    where = ok(run([py, "-c", "import harness; print(harness.__file__)"], base, env), "import harness").stdout.strip()
    assert where.startswith(str(venv)), f"the venv imports the harness from {where}, not from the wheel"
    return venv / "bin" / "harness", env, venv


def data_folder(venv: Path) -> Path:
    """The installed package's data files (harness/_data)."""
    found = list(venv.glob("lib/python*/site-packages/harness/_data"))
    assert len(found) == 1, found
    return found[0]
