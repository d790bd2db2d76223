"""Every harness module a file names, in code or in a program kept as text, exists under that name.

Imports inside strings (`python -c` programs, the Python snippets of scripts/build-images.sh, the
children tests start, `-m harness.x` command lines, docs examples) are not checked by Python until they
run, and the run may be a slow test or a user's machine. After harness/'s modules moved into packages,
build-images.sh still said `from harness import versions` and every image build failed at once: this test
reads every tracked text file and resolves each such name.
"""

import importlib
import importlib.util
import re
import subprocess

from tests.conftest import ROOT

FROM = re.compile(r"\bfrom (harness(?:\.\w+)*) import \(?([\w ,]+)")
DASH_M = re.compile(r"""-m["']?,? ["']?(harness(?:\.\w+)+)\b""")
PLAIN = re.compile(r"^\s*import (harness(?:\.\w+)+)", re.M)
SUFFIXES = (".py", ".sh", ".md", ".yml", ".yaml", ".toml", ".cfg", ".txt", "")


def _files():
    listed = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    for rel in listed.splitlines():
        p = ROOT / rel
        if rel == "tests/unit/test_import_names.py":        # its own examples of names that do not resolve
            continue
        if p.suffix in SUFFIXES and p.is_file() and not p.is_symlink() and "/_data/" not in f"/{rel}":
            try:
                yield rel, p.read_text()
            except UnicodeDecodeError:
                continue


def _spec(module: str):
    try:
        return importlib.util.find_spec(module)
    except ModuleNotFoundError:         # a parent that is a module, not a package
        return None


def _resolves(module: str, name: str | None = None) -> bool:
    if _spec(module) is None:
        return False
    if name is None or _spec(f"{module}.{name}") is not None:
        return True
    return hasattr(importlib.import_module(module), name)


def test_every_harness_name_in_every_file_resolves():
    bad = []
    for rel, text in _files():
        for m in FROM.finditer(text):
            for name in (n.strip() for n in m.group(2).split(",")):
                if name and name.isidentifier() and not _resolves(m.group(1), name):
                    bad.append(f"{rel}: from {m.group(1)} import {name}")
        for m in [*DASH_M.finditer(text), *PLAIN.finditer(text)]:
            if not _resolves(m.group(1)):
                bad.append(f"{rel}: {m.group(1)}")
    assert not bad, "names that do not resolve:\n" + "\n".join(sorted(set(bad)))


def test_it_finds_a_name_that_moved():
    assert not _resolves("harness", "versions") and _resolves("harness.core", "versions")
    assert FROM.search("python -c 'from harness import versions; print(1)'").group(1, 2)[1].startswith("versions")
