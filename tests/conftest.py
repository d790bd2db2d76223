"""Shared fixtures. Integration tests run against a real local stack that the
session starts once in a temporary state folder and stops at the end."""

import contextlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def harness(*args, env=None, timeout=900, check=False):
    """Run the real CLI in a subprocess; return CompletedProcess (text). It dies with pytest (a SIGKILLed
    session leaves no `harness run` going on; tests/stack_watcher.py then stops the stacks)."""
    from harness.core.procs import die_with_parent
    proc = subprocess.run([sys.executable, "-m", "harness.cli", *args], capture_output=True, text=True,
                          env={**os.environ, **(env or {})}, timeout=timeout, cwd=ROOT, preexec_fn=die_with_parent)
    if check and proc.returncode != 0:
        raise AssertionError(f"harness {' '.join(args)} exited {proc.returncode}\n{proc.stdout}\n{proc.stderr}")
    return proc


def pids_where(predicate) -> list[int]:
    """Pids of live processes whose command line satisfies `predicate` (a leftover-process check)."""
    out = []
    for p in Path("/proc").iterdir():
        if p.name.isdigit():
            try:
                cmd = (p / "cmdline").read_bytes().replace(b"\0", b" ").decode()
            except OSError:
                continue
            if predicate(cmd):
                out.append(int(p.name))
    return out


def processes_of(home: Path) -> list[int]:
    """Live processes that belong to the stack in `home`: our folder appears in their command line."""
    mark = str(home)
    return pids_where(lambda cmd: mark in cmd and "pytest" not in cmd)


_registry: dict = {}


def searchable_dir(prefix: str) -> Path:
    """A fresh folder that the `postgres` user can enter (pytest's tmp_path is mode 0700), registered with
    the session's watcher (tests/stack_watcher.py: after a SIGKILLed pytest it stops the stacks of these
    folders and deletes them)."""
    import tempfile
    d = Path(tempfile.mkdtemp(prefix=prefix))
    d.chmod(0o755)
    _register(d)
    _made.append(d)
    return d


_made: list[Path] = []      # every searchable_dir of the session, in the order made


@contextlib.contextmanager
def own_stack(prefix: str, *up_args: str):
    """A local stack of a test module's own (`harness up UP_ARGS` in a fresh folder), for a setting the
    session's stack does not have; stopped, purged and checked gone at the end. Yields (status, env, up)."""
    import shutil
    home = searchable_dir(prefix)
    env = {"HARNESS_HOME": str(home), "HARNESS_BOOTSTRAP_SERVERS": "", "HARNESS_POSTGRES_DSN": "",
           "HARNESS_KAFKA_CONFIG_FILE": ""}
    st = {}
    try:
        up = harness("up", *up_args, env=env, check=True)
        st = json.loads(harness("status", "--json", env=env, check=True).stdout)
        yield st, env, up
    finally:
        from tests import kafka_login
        if st.get("bootstrap_servers"):
            kafka_login.forget(st["bootstrap_servers"])     # its login must not reach a later stack on its port
        harness("down", "--purge", env=env)
        left = processes_of(home)
        shutil.rmtree(home, ignore_errors=True)
        assert not left, f"processes of the stack in {home} survived `harness down`: {left}"


@pytest.fixture
def local_user():
    """Another local user of the machine, made for the test and removed after it (with no home folder):
    what a stranger on a shared CI machine can do. Needs root."""
    import shutil
    import uuid
    if os.geteuid() != 0 or not shutil.which("useradd"):
        pytest.skip("making a local user needs root and useradd")
    name = f"hxt{uuid.uuid4().hex[:8]}"
    subprocess.run(["useradd", "--no-create-home", "--shell", "/usr/sbin/nologin", name], check=True,
                   capture_output=True, timeout=60)
    try:
        yield name
    finally:
        subprocess.run(["userdel", name], capture_output=True, timeout=60)


def as_user(user: str, *argv: str, **kw) -> subprocess.CompletedProcess:
    """Run argv as `user` (runuser), from a folder it may enter; text output captured."""
    return subprocess.run(["runuser", "-u", user, "--", *argv], capture_output=True, text=True, cwd="/",
                          timeout=kw.pop("timeout", 120), **kw)


@pytest.fixture(autouse=True)
def _delete_the_tests_own_state_folders():
    """The state folders a test made itself (not those of a module or session fixture, made before it starts)
    are deleted when it ends, once no process of theirs is left and no stack is recorded in them (`harness
    down` removes stack.json; a recorded stack may own containers or namespaces outside the folder, so its
    folder is left for the watcher's `harness down --purge`). The watcher would delete them only after pytest
    has ended, and a CI job that stops when its command does may end the watcher first: one such run left 12
    empty folders and the registry in /tmp. tests/unit/test_state_folders.py."""
    import shutil
    first = len(_made)
    yield
    for home in _made[first:]:
        if home.is_dir() and not home.is_symlink() and not (home / "stack.json").exists() and \
                not processes_of(home):
            shutil.rmtree(home, ignore_errors=True)


def pytest_sessionfinish(session, exitstatus):
    """At a normal end with every registered folder gone, the watcher has nothing to do: stop it and delete the
    registry now, rather than leave that to it."""
    import shutil
    registry, watcher = _registry.get("file"), _registry.get("watcher")
    if registry is None or any(home.exists() for home in _made):
        return
    watcher.terminate()
    try:
        watcher.wait(10)
    except subprocess.TimeoutExpired:
        return
    shutil.rmtree(registry.parent, ignore_errors=True)


def _register(folder: Path) -> None:
    """Adds `folder` to the session's registry; the first one starts the watcher."""
    import tempfile
    from tests.stack_watcher import watch
    if "file" not in _registry:
        registry = Path(tempfile.mkdtemp(prefix="harness-test-registry-")) / "state-folders"
        registry.touch(mode=0o600)
        _registry["file"], _registry["watcher"] = registry, watch(registry)
    with open(_registry["file"], "a") as f:
        f.write(f"{folder}\n")


@pytest.fixture(scope="session")
def stack_home():
    import shutil
    home = searchable_dir("harness-test-state-")
    yield home
    if not processes_of(home):          # never delete a folder under running services: its watcher needs it
        shutil.rmtree(home, ignore_errors=True)


@pytest.fixture(scope="session")
def plaintext_stack():
    """A stack that asked for no Kafka authentication (`harness up --auth none`), for the tests of what any
    client may do there (a stranger's records) or that speak Kafka's wire protocol without a login; one for
    the session, started by the first test that needs it."""
    with own_stack("harness-test-plaintext-", "--auth", "none") as (st, env, _up):
        st["env"] = env
        yield st


@pytest.fixture(scope="session")
def stack(stack_home):
    """A real Kafka + PostgreSQL, started with `harness up`, stopped (and checked gone) at the end.
    A SIGTERM or SIGHUP to pytest (a CI job cancelled, a terminal closed) stops it as Ctrl-C would:
    pytest then still tears this down, instead of leaving the stack running. A SIGKILL runs no teardown:
    then tests/stack_watcher.py stops the stack once pytest has gone (as for every searchable_dir)."""
    import signal

    def interrupt(signum, frame):
        raise KeyboardInterrupt
    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, interrupt)
    env = {"HARNESS_HOME": str(stack_home)}
    harness("up", env=env, check=True)
    st = json.loads(harness("status", "--json", env=env, check=True).stdout)
    # The status output hides the password; read the DSN the way the harness does.
    from harness.stack.local_postgres import LocalPostgres
    port = json.loads((stack_home / "stack.json").read_text())["postgres_port"]
    st["dsn"] = LocalPostgres(stack_home).dsn(port)
    st["admin_dsn"] = LocalPostgres(stack_home).admin_dsn(port)   # the superuser: tests build foreign objects
    st["env"] = {"HARNESS_HOME": str(stack_home), "HARNESS_BOOTSTRAP_SERVERS": st["bootstrap_servers"],
                 "HARNESS_POSTGRES_DSN": st["dsn"]}
    from tests import kafka_login
    st["kafka_login"] = kafka_login.settings(st["bootstrap_servers"])   # and harness code called here logs in too
    yield st
    harness("down", "--purge", env=env, check=True)
    from harness.core import procs
    left = {k: v for k, v in st["pids"].items() if procs.alive(v)}
    assert not left, f"processes left after `harness down`: {left}"
    assert not processes_of(stack_home), "processes from the test state folder survived `harness down`"
