"""The files a run needs beside the code, found wherever the package is installed.

A wheel installed into a virtual environment has no checkout around it, so nothing is found by
walking up from a module's file. The Kafka Streams and transactional workers' Maven sources, the
compose files and their images' build context, the image build script, the report schemas and the
experiment files travel inside the package, under `harness/_data/`, and are found with
importlib.resources. In the repository that folder holds links to the top-level folders where the
files are edited (`compose/`, `experiments/`, `streams-worker/`, ...); building a wheel or an sdist
copies what they point to. The files are only read: what is built from them (the workers' jar) is
built in the user's cache folder, never in site-packages.
"""

from importlib import resources
from pathlib import Path

from .errors import HarnessError


def path(*parts: str) -> Path:
    """The package's data file or folder at `parts` (e.g. `path("compose", "docker-compose.yml")`), as a
    path on disk: the compose files, Maven and bash are given paths. It may not exist; callers say what is
    missing."""
    found = resources.files("harness").joinpath("_data")
    for part in parts:
        found = found.joinpath(part)
    if not isinstance(found, Path):
        raise HarnessError("the harness package is not installed as plain files (a zip archive?): its data "
                           "files need a folder install (pip install)")
    return found
