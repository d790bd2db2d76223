"""The files a run needs beside the code are package data: found through harness.core.package_data (never by
walking up to a checkout), and every one of them listed in pyproject.toml's package-data, so the sdist
and the wheel carry it (tests/integration/test_wheel.py installs the wheel and runs from it)."""

import glob
import os
import tomllib
from pathlib import Path

from harness.core import package_data
from harness.experiments import streams_jvm
from harness.reporting import validate
from harness.stack import compose, compose_images

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "harness"


def test_what_the_modules_use_is_found_as_package_data():
    data = package_data.path()
    used = [*compose.FILES.values(), compose.PROXIES_FILE, compose.ENGINE_SCRIPT, compose_images.BUILD_SCRIPT,
            streams_jvm.SOURCES / "pom.xml", validate.SCHEMAS / "report.schema.json",
            validate.SCHEMAS / "suite.schema.json", package_data.path("experiments", "core", "offset-before.toml")]
    for path in used:
        assert path.is_file() and path.is_relative_to(data), path


def _carried() -> set[str]:
    patterns = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]["harness"]
    # as setuptools expands them: globs relative to the package's folder, ** recursive
    return {m for p in patterns for m in glob.glob(p, root_dir=PACKAGE, recursive=True)
            if (PACKAGE / m).is_file()}


def test_every_data_file_is_listed_in_the_package_data():
    data = package_data.path()
    files = {str(Path(d, f).relative_to(PACKAGE)) for d, _, names in os.walk(data, followlinks=True) for f in names}
    assert len(files) > 50, sorted(files)
    missing = sorted(files - _carried())
    assert not missing, f"in harness/_data but not in pyproject.toml's package-data: {missing}"


def test_an_installed_package_reports_no_git_commit(tmp_path):
    """Before: a package installed into a virtual environment inside the user's repository reported that
    repository's commit as the harness's (`git -C site-packages/.. rev-parse HEAD` finds it)."""
    import subprocess
    from harness.stack.environment import git_sha
    repo = tmp_path / "their-project"
    site = repo / ".venv" / "lib" / "python3.11" / "site-packages"
    site.mkdir(parents=True)
    git = ["git", "-C", str(repo), "-c", "user.name=u", "-c", "user.email=u@example.invalid"]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "commit", "-q", "--allow-empty", "-m", "theirs"], check=True)
    theirs = subprocess.run([*git, "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    assert git_sha(repo) == theirs
    assert git_sha(site) is None
