"""`harness matrix`: the same suite on several Kafka releases, one stack after another, side by side.

A user who runs Kafka 3.9 in production, or a teacher who wants to show what
KIP-890 (transaction version 2) changed, needs the same experiments with the
same seed on each release, and a table that says where the numbers differ.

Each release runs as a child `harness suite --kafka-version R` in a state
folder of its own (`<state>/matrix/<R>`): its own local stack, started by
that suite and purged (`harness down --purge`) once it ends, so releases
never share data and the user's own stack is never touched. With `--client
python,java` a release gets a second suite on the same stack, of the
experiments whose workers can be Kafka's Java client (`--client java`), as a
column of its own (`<R> java`, its folder `<out>/<R>-java/`); with `--group-protocol classic,consumer`
another, of the experiments that take `--group-protocol`, with KIP-848's consumer protocol (`<R> consumer`,
or `<R> java consumer`; a release before 4.0 has none, so no such column). A folder left by
an interrupted or killed matrix is purged before the next matrix starts, and
by `harness down` (see `leftover_homes`). The child's suite folder is
`<out>/<R>/`; matrix.json copies from each suite.json only what its cells
show (matrix.md and matrix.html are rendered from it alone). Exit status: the
worst of the suites' runs, as `suite` (a release whose suite wrote nothing is
"failed", an interrupted matrix 130).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from ..core.errors import HarnessError
from ..core.paths import state_dir
from ..core.procs import die_with_parent, start_time
from ..stack import kafka_versions

MAX_RELEASES = 6
RELEASE_TIME_LIMIT_S = 3600        # one suite on two cores: minutes; a hung one must not hold the matrix forever
PURGE_TIMEOUT_S = 300
SCHEMA_VERSION = 1


def parse_releases(spec: str | None) -> list[str]:
    """--kafka-version 3.9.1,4.1.1,4.4.0: each a release the harness starts, each once, in the given order."""
    releases = [r.strip() for r in (spec or "").split(",") if r.strip()]
    if not releases:
        raise HarnessError("harness matrix needs --kafka-version with one or more releases, e.g. 3.9.1,4.1.1,4.4.0")
    if len(releases) > MAX_RELEASES:
        raise HarnessError(f"--kafka-version names {len(releases)} releases; a matrix runs at most {MAX_RELEASES}")
    for r in releases:
        kafka_versions.check(r)
    if len(set(releases)) != len(releases):
        raise HarnessError("--kafka-version names a release twice")
    return releases


CLIENTS = ("python", "java")


def parse_clients(spec: str | None) -> list[str]:
    """--client python,java: the eos family's transactional clients, each a column of its own per release
    (python, the default, runs the whole suite; java only the experiments that take --client)."""
    return _columns(spec, CLIENTS, "--client", "client")


def _columns(spec: str | None, allowed: tuple, flag: str, what: str) -> list[str]:
    """A comma-separated list of `allowed` values, each once (the first of `allowed` when not given)."""
    chosen = [c.strip() for c in (spec or allowed[0]).split(",") if c.strip()]
    if not chosen or any(c not in allowed for c in chosen):
        raise HarnessError(f"{flag} takes {', '.join(allowed[:-1])}, {allowed[-1]} or both (comma-separated), "
                           f"got {spec!r}")
    if len(set(chosen)) != len(chosen):
        raise HarnessError(f"{flag} names a {what} twice")
    return chosen


def client_experiments(names: list[str]) -> list[str]:
    """Of these experiments, those whose workers can be another client (they declare --client)."""
    from ..experiments import REGISTRY
    from ..experiments.common_options import CLIENT
    return [n for n in names if CLIENT in REGISTRY[n].options]


PROTOCOLS = ("classic", "consumer")
CONSUMER_PROTOCOL_FROM = (4, 0)     # KIP-848's consumer protocol: GA on Kafka 4.0 brokers


def parse_protocols(spec: str | None) -> list[str]:
    """--group-protocol classic,consumer: each a column of its own per release and client (classic, the
    clients' default, runs the whole suite; consumer only the experiments that take --group-protocol)."""
    return _columns(spec, PROTOCOLS, "--group-protocol", "protocol")


def protocol_experiments(names: list[str]) -> list[str]:
    """Of these experiments, those whose workers' group protocol can be chosen (they declare --group-protocol)."""
    from ..experiments import REGISTRY
    from ..experiments.common_options import GROUP_PROTOCOL
    return [n for n in names if GROUP_PROTOCOL in REGISTRY[n].options]


def has_protocol(release: str, protocol: str) -> bool:
    """Whether a release's brokers offer this group protocol (classic: all)."""
    return protocol == "classic" or tuple(int(x) for x in release.split(".")[:2]) >= CONSUMER_PROTOCOL_FROM


def variant(client: str = "python", protocol: str = "classic") -> str:
    """What a column runs besides its release: "" (Python, classic), "java", "consumer" or "java consumer"."""
    return " ".join(w for w in (client if client != "python" else "", protocol if protocol != "classic" else "")
                    if w)


def column_key(release: str, client: str = "python", protocol: str = "classic") -> str:
    """A column of the matrix: a release, with the Python workers, or `<release> java`, `<release> consumer`..."""
    return " ".join(w for w in (release, variant(client, protocol)) if w)


def folder_of(release: str, client: str = "python", protocol: str = "classic") -> str:
    """A column's suite folder in the matrix folder: <release>/, <release>-java/, <release>-java-consumer/..."""
    return column_key(release, client, protocol).replace(" ", "-")


def matrix_root(state: Path | None = None) -> Path:
    return (state or state_dir()) / "matrix"


OWNER = ".matrix-owner"        # in each release folder a matrix makes: "<pid> <start time>" of that matrix


def _owner(home: Path) -> tuple[int, str] | None:
    """The matrix that made this release folder, as its owner file says (None: no readable owner file)."""
    from ..core.safefile import read_tail
    words = read_tail(home / OWNER, 64).split()
    return (int(words[0]), words[1]) if len(words) == 2 and words[0].isascii() and words[0].isdigit() else None


def _alive(owner: tuple[int, str] | None) -> bool:
    return owner is not None and str(start_time(owner[0])) == owner[1]


def leftover_homes(state: Path | None = None) -> list[Path]:
    """The release folders a matrix made and left (an interrupted or SIGKILLed one): named like a release,
    never a link, with an owner file of a matrix that no longer runs (a running matrix's are its own)."""
    root = matrix_root(state)
    if root.is_symlink() or not root.is_dir():
        return []
    return sorted(p for p in root.iterdir()
                  if kafka_versions.RELEASE.fullmatch(p.name) and p.is_dir() and not p.is_symlink()
                  and (owner := _owner(p)) is not None and not _alive(owner))


def check_homes(releases: list[str], state: Path | None = None) -> None:
    """One line, before anything starts, when a release's folder cannot be this matrix's: a link or a file
    where it goes, one a running matrix uses, or one no matrix made."""
    root = matrix_root(state)
    if os.path.lexists(root) and (root.is_symlink() or not root.is_dir()):
        raise HarnessError(f"{root} is not a folder the harness made (a link or a file): move it away")
    for r in releases:
        home = root / r
        if not os.path.lexists(home):
            continue
        if home.is_symlink() or not home.is_dir():
            raise HarnessError(f"{home} is a link or a file, not a matrix's folder: move it away")
        owner = _owner(home)
        if _alive(owner):
            raise HarnessError(f"a matrix (pid {owner[0]}) runs Kafka {r} in {home} now: wait for it to end")
        if owner is None:
            raise HarnessError(f"{home} was not made by a matrix (it has no {OWNER}): move it away")


def _child_env(home: Path) -> dict:
    env = {**os.environ, "HARNESS_HOME": str(home), "HARNESS_STACK": "local"}
    for name in ("HARNESS_BOOTSTRAP_SERVERS", "HARNESS_POSTGRES_DSN", "HARNESS_KAFKA_VERSION"):
        env.pop(name, None)
    return env


def purge(home: Path, log=print) -> None:
    """Stop and delete a release's stack, then its state folder. A folder whose suite never started a
    stack (no state marker) holds nothing to stop: it is removed only when empty, else left and named."""
    import shutil
    from ..stack.marker import MARKER
    if not (home / MARKER).exists():
        try:
            (home / OWNER).unlink(missing_ok=True)
            home.rmdir()
        except FileNotFoundError:
            pass
        except OSError:
            log(f"matrix: left {home}: it holds files but no stack of the harness")
        return
    try:
        proc = subprocess.run([sys.executable, "-m", "harness.cli", "down", "--purge"], env=_child_env(home),
                              capture_output=True, text=True, timeout=PURGE_TIMEOUT_S, start_new_session=True)
    except subprocess.TimeoutExpired:
        raise HarnessError(f"`harness down --purge` of the matrix stack in {home} did not end within "
                           f"{PURGE_TIMEOUT_S} s")
    if proc.returncode != 0:
        raise HarnessError(f"the matrix stack in {home} could not be stopped: "
                           f"{(proc.stderr.strip().splitlines() or ['?'])[-1]}")
    shutil.rmtree(home, ignore_errors=True)
    log(f"matrix: stopped and removed the stack of {home.name}")


STOP_GRACE_S = 600      # an interrupted suite writes its runs' reports; after this it is killed


def _quietly(fn, *args, **kwargs):
    """`fn` with SIGINT, SIGTERM and SIGHUP held until it returns: a purge is never cut half-way."""
    held = {signal.SIGINT, signal.SIGTERM, signal.SIGHUP}
    signal.pthread_sigmask(signal.SIG_BLOCK, held)
    try:
        return fn(*args, **kwargs)
    finally:
        signal.pthread_sigmask(signal.SIG_UNBLOCK, held)


def _stop(proc: subprocess.Popen) -> str:
    """One SIGINT to the child suite (its own session: the terminal's reaches only us), then its end, or
    SIGKILL to its whole group after STOP_GRACE_S."""
    proc.send_signal(signal.SIGINT)
    try:
        return proc.communicate(timeout=STOP_GRACE_S)[1] or ""
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        return proc.communicate()[1] or ""


def run_matrix(releases: list[str], suite_args: list[str], out: Path, log=print, clients: tuple = ("python",),
               client_args: dict | None = None, protocols: tuple = ("classic",)) -> dict:
    """One child suite per release, client and group protocol, in order (a release's columns share its
    stack); returns the matrix summary (also written as matrix.json). `client_args`: the suite arguments of
    each column other than python's classic one, by its `variant` (its experiments, --client, --group-protocol). Ctrl-C, SIGTERM or SIGHUP (as KeyboardInterrupt, see the
    command): the running suite gets one SIGINT and writes its reports, its stack is purged, matrix.json
    says what finished, and the interrupt goes on."""
    from ..core.safefile import make_folder, write_text
    check_homes(releases)
    columns: dict[str, dict] = {}
    keys = [column_key(r, c, g) for r in releases for c in clients for g in protocols if has_protocol(r, g)]
    t0, interrupted = time.time(), False
    try:
        for home in leftover_homes():
            _quietly(purge, home, log)
        make_folder(matrix_root())
        for release in releases:
            home = make_folder(matrix_root() / release)
            write_text(home / OWNER, f"{os.getpid()} {start_time(os.getpid())}\n")
            try:
                for client, protocol in [(c, g) for c in clients for g in protocols]:
                    if not has_protocol(release, protocol):
                        log(f"matrix: Kafka {release} has no {protocol} group protocol: no such column")
                        continue
                    v = variant(client, protocol)
                    args = (client_args or {})[v] if v else suite_args
                    _one_suite(release, client, args, out, home, log, columns, protocol)
            finally:
                _quietly(purge, home, log)
    except KeyboardInterrupt:
        interrupted = True
        raise
    finally:
        summary = build_summary(keys, columns, suite_args, time.time() - t0, interrupted)
        write_text(out / "matrix.json", json.dumps(summary, indent=2) + "\n")
    return summary


def _one_suite(release: str, client: str, args: list[str], out: Path, home: Path, log, columns: dict,
               protocol: str = "classic") -> None:
    """A child `harness suite` of one column, in the release's home; its column goes into `columns` whatever
    happened (an interrupted suite's too: it wrote what its runs reported)."""
    name = column_key(release, client, protocol)
    cmd = [sys.executable, "-m", "harness.cli", "suite", "--kafka-version", release, "--quiet",
           "--out", str(out / folder_of(release, client, protocol)), *args]
    log(f"matrix: Kafka {name}: harness suite {' '.join(args) or '(its defaults)'} (its stack in {home})")
    started, err = time.time(), ""
    proc = subprocess.Popen(cmd, env=_child_env(home), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            stdin=subprocess.DEVNULL, text=True, preexec_fn=die_with_parent, start_new_session=True)
    try:
        try:
            err = proc.communicate(timeout=RELEASE_TIME_LIMIT_S)[1] or ""
        except subprocess.TimeoutExpired:
            err = _stop(proc)                # the suite writes what its runs reported, then ends
        except KeyboardInterrupt:
            err = _stop(proc)
            raise
    finally:
        c = columns[name] = column(out, release, proc.returncode, time.time() - started, err, client, protocol)
    log(f"matrix: Kafka {name}: exit {c['exit_code']} in {c['seconds']:.0f} s "
        f"(metadata.version {c['metadata_version']}, transaction.version {c['transaction_version']})")


def column(out: Path, release: str, rc: int | None, seconds: float, err: str, client: str = "python",
           protocol: str = "classic") -> dict:
    """What one column's suite left: its suite.json's rows and the broker's own answers, or why none."""
    folder = folder_of(release, client, protocol)
    path = out / folder / "suite.json"
    who = {"key": column_key(release, client, protocol), "release": release, "client": client,
           "group_protocol": protocol}
    try:
        suite = json.loads(path.read_text())
        rows = suite["experiments"]
        env = suite.get("environment") or {}
        if not isinstance(rows, list) or not isinstance(env, dict):
            raise ValueError("not a suite")
        rows = [r for r in rows if isinstance(r, dict) and isinstance(r.get("experiment"), str)]
    except (OSError, ValueError, KeyError, TypeError):
        why = (err or "").strip().splitlines()[-1:] or ["it wrote no suite.json"]
        return {**who, "exit_code": rc, "seconds": round(seconds, 1), "suite": None,
                "error": why[0][:300], "rows": [], "metadata_version": "unknown", "transaction_version": "unknown"}
    return {**who, "exit_code": rc, "seconds": round(seconds, 1), "suite": f"{folder}/suite.json",
            "rows": rows, **{k: "unknown" if env.get(e) is None else env[e] for k, e in (
                ("kafka_version", "kafka_version"), ("metadata_version", "kafka_metadata_version"),
                ("transaction_version", "kafka_transaction_version"))}}


VERDICTS = ("as-predicted", "unexpected", "incomplete", "audit-failed", "interrupted", "failed")
CELL_FIGURES = ("verdict", "duplicates", "lost", "read_committed_duplicates", "read_committed_lost")


def cell(row: dict, folder: str) -> dict:
    """One experiment in one column: its verdict and key figures, as its suite row gives them."""
    def as_dict(v):
        return v if isinstance(v, dict) else {}
    c, ko, t = as_dict(row.get("counts")), as_dict(row.get("kafka_output")), as_dict(row.get("timings"))
    rc = as_dict(ko.get("read_committed")) or None
    verdict = row.get("verdict")
    return {"verdict": verdict if verdict in VERDICTS else "failed", "duplicates": c.get("duplicates"), "lost": c.get("lost"),
            "read_committed_duplicates": (rc or {}).get("duplicates"), "read_committed_lost": (rc or {}).get("lost"),
            "crashes": row.get("crashes"), "restart_median_seconds": t.get("restart_median_seconds"),
            "read_committed_stall_median_seconds": t.get("read_committed_stall_median_seconds"),
            "report": f"{folder}/{row['report']}" if isinstance(row.get("report"), str) else None}


def _split(key: str) -> tuple[str, str, str]:
    """(release, client, group protocol) of a column_key."""
    release, *rest = key.split(" ")
    return release, "java" if "java" in rest else "python", "consumer" if "consumer" in rest else "classic"


def build_summary(keys: list[str], columns: dict, suite_args: list[str], wall: float,
                  interrupted: bool = False) -> dict:
    """`keys`: the columns in order (column_key: a release, or `<release> java`, `<release> consumer`...). A cell
    of an experiment a column does not run (it takes no --client, or no --group-protocol) is not applicable:
    neither a difference nor a failure."""
    from .suite_runner import exit_code
    names: list[str] = []
    for k in keys:
        for row in (columns.get(k) or {}).get("rows", []):
            if isinstance(row, dict) and isinstance(row.get("experiment"), str) and row["experiment"] not in names:
                names.append(row["experiment"])
    takes_client = set(client_experiments([n for n in names if _known(n)]))
    takes_protocol = set(protocol_experiments([n for n in names if _known(n)]))
    experiments = []
    for name in names:
        cells, not_applicable = {}, []
        for k in keys:
            release, client, protocol = _split(k)
            if (client != "python" and name not in takes_client) or (
                    protocol != "classic" and name not in takes_protocol):
                not_applicable.append(k)
                continue
            row = next((x for x in (columns.get(k) or {}).get("rows", []) if x.get("experiment") == name), None)
            cells[k] = cell(row, folder_of(release, client, protocol)) if row else None
        shown = {tuple((c or {}).get(f) for f in CELL_FIGURES) for c in cells.values()}
        experiments.append({"experiment": name, "cells": cells, "differs": len(shown) > 1,
                            **({"not_applicable": not_applicable} if not_applicable else {})})
    every = [{"verdict": (c or {"verdict": "failed"})["verdict"]} for e in experiments for c in e["cells"].values()]
    every += [{"verdict": "failed"} for k in keys if k not in columns or not columns[k]["rows"]]
    every += [{"verdict": "interrupted"}] if interrupted else []
    cols = [{f: v for f, v in columns[k].items() if f != "rows"} if k in columns else
            {"key": k, "release": _split(k)[0], "client": _split(k)[1], "group_protocol": _split(k)[2],
             "exit_code": None, "suite": None,
             "error": "not run (the matrix was interrupted)"}
            for k in keys]
    releases = list(dict.fromkeys(_split(k)[0] for k in keys))
    clients = list(dict.fromkeys(_split(k)[1] for k in keys))
    protocols = list(dict.fromkeys(_split(k)[2] for k in keys))
    return {"schema_version": SCHEMA_VERSION, "releases": releases, "clients": clients,
            "group_protocols": protocols, "keys": keys,
            "suite_args": suite_args, "columns": cols, "experiments": experiments, "wall_seconds": round(wall, 1),
            "exit_code": exit_code(every)}


def _known(name: str) -> bool:
    from ..experiments import REGISTRY
    return name in REGISTRY
