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
or `<R> java consumer`; a release before 4.0 has none, so no such column); with `--streams-protocol
classic,streams` one of eos-streams with KIP-1071's streams groups (`<R> streams`, from Kafka 4.2).
Which columns exist is matrix_columns.py's choice. A folder left by
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


from .matrix_columns import (CLIENTS, CONSUMER_PROTOCOL_FROM, PROTOCOLS, STREAMS_PROTOCOLS,  # noqa: F401
                             client_experiments, column_key, folder_of, has_protocol, parse_clients,
                             parse_protocols, parse_streams_protocols, plan, protocol_experiments,
                             streams_protocol_experiments, variant)
from .matrix_columns import split as _split


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
               client_args: dict | None = None, protocols: tuple = ("classic",),
               streams: tuple = ("classic",)) -> dict:
    """One child suite per release, client, group protocol and Kafka Streams group protocol, in order (a
    release's columns share its stack); returns the matrix summary (also written as matrix.json).
    `client_args`: the suite arguments of each column other than the default one, by its `variant` (its
    experiments, --client, --group-protocol, --streams-protocol; matrix_columns.variant_args): a variant
    without them has no column. Ctrl-C, SIGTERM or SIGHUP (as KeyboardInterrupt, see the command): the
    running suite gets one SIGINT and writes its reports, its stack is purged, matrix.json says what
    finished, and the interrupt goes on."""
    from ..core.safefile import make_folder, write_text
    check_homes(releases)
    columns: dict[str, dict] = {}
    order, absent = plan(releases, (clients, protocols, streams), client_args or {})
    keys = [column_key(*c) for c in order]
    t0, interrupted = time.time(), False
    try:
        for home in leftover_homes():
            _quietly(purge, home, log)
        make_folder(matrix_root())
        for release in releases:
            for a in absent:
                if _split(a["key"])[0] == release:
                    log(f"matrix: {a['why']}: no {a['key']} column")
            home = make_folder(matrix_root() / release)
            write_text(home / OWNER, f"{os.getpid()} {start_time(os.getpid())}\n")
            try:
                for c in [c for c in order if c[0] == release]:
                    v = variant(*c[1:])
                    _one_suite(c, (client_args or {})[v] if v else suite_args, out, home, log, columns)
            finally:
                _quietly(purge, home, log)
    except KeyboardInterrupt:
        interrupted = True
        raise
    finally:
        summary = build_summary(keys, columns, suite_args, time.time() - t0, interrupted, absent)
        write_text(out / "matrix.json", json.dumps(summary, indent=2) + "\n")
    return summary


def _one_suite(col: tuple, args: list[str], out: Path, home: Path, log, columns: dict) -> None:
    """A child `harness suite` of one column (release, client, group protocol, streams protocol), in the
    release's home; its column goes into `columns` whatever happened (an interrupted suite's too: it wrote
    what its runs reported)."""
    name, release = column_key(*col), col[0]
    cmd = [sys.executable, "-m", "harness.cli", "suite", "--kafka-version", release, "--quiet",
           "--out", str(out / folder_of(*col)), *args]
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
        c = columns[name] = column(out, release, proc.returncode, time.time() - started, err, *col[1:])
    log(f"matrix: Kafka {name}: exit {c['exit_code']} in {c['seconds']:.0f} s "
        f"(metadata.version {c['metadata_version']}, transaction.version {c['transaction_version']})")


def _who(key: str) -> dict:
    release, client, protocol, streams = _split(key)
    return {"key": key, "release": release, "client": client, "group_protocol": protocol,
            "streams_protocol": streams}


def column(out: Path, release: str, rc: int | None, seconds: float, err: str, client: str = "python",
           protocol: str = "classic", streams: str = "classic") -> dict:
    """What one column's suite left: its suite.json's rows and the broker's own answers, or why none."""
    folder = folder_of(release, client, protocol, streams)
    path = out / folder / "suite.json"
    who = _who(column_key(release, client, protocol, streams))
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


def build_summary(keys: list[str], columns: dict, suite_args: list[str], wall: float,
                  interrupted: bool = False, absent: list[dict] | None = None) -> dict:
    """`keys`: the columns in order (column_key: a release, or `<release> java`, `<release> consumer`,
    `<release> streams`...). A cell of an experiment a column does not run (it takes no --client, no
    --group-protocol or no --streams-protocol: `not_applicable_because` names the flag) is not applicable:
    neither a difference nor a failure. `absent`: the columns left out because their release lacks the
    protocol ({key, why}), said in the pages."""
    from .matrix_columns import DIMENSIONS
    from .suite_runner import exit_code
    names: list[str] = []
    for k in keys:
        for row in (columns.get(k) or {}).get("rows", []):
            if isinstance(row, dict) and isinstance(row.get("experiment"), str) and row["experiment"] not in names:
                names.append(row["experiment"])
    takes = [set(takers([n for n in names if _known(n)])) for _, _, takers in DIMENSIONS]
    experiments = []
    for name in names:
        cells, because = {}, {}
        for k in keys:
            release, *combo = _split(k)
            flag = next((f for value, (f, default, _), who in zip(combo, DIMENSIONS, takes)
                         if value != default and name not in who), None)
            if flag:
                because[k] = flag
                continue
            row = next((x for x in (columns.get(k) or {}).get("rows", []) if x.get("experiment") == name), None)
            cells[k] = cell(row, folder_of(release, *combo)) if row else None
        shown = {tuple((c or {}).get(f) for f in CELL_FIGURES) for c in cells.values()}
        experiments.append({"experiment": name, "cells": cells, "differs": len(shown) > 1,
                            **({"not_applicable": list(because), "not_applicable_because": because}
                               if because else {})})
    every = [{"verdict": (c or {"verdict": "failed"})["verdict"]} for e in experiments for c in e["cells"].values()]
    every += [{"verdict": "failed"} for k in keys if k not in columns or not columns[k]["rows"]]
    every += [{"verdict": "interrupted"}] if interrupted else []
    cols = [{f: v for f, v in columns[k].items() if f != "rows"} if k in columns else
            {**_who(k), "exit_code": None, "suite": None, "error": "not run (the matrix was interrupted)"}
            for k in keys]
    split = [_split(k) for k in keys]
    return {"schema_version": SCHEMA_VERSION, "releases": list(dict.fromkeys(s[0] for s in split)),
            "clients": list(dict.fromkeys(s[1] for s in split)),
            "group_protocols": list(dict.fromkeys(s[2] for s in split)),
            "streams_protocols": list(dict.fromkeys(s[3] for s in split)), "keys": keys,
            "absent_columns": list(absent or []),
            "suite_args": suite_args, "columns": cols, "experiments": experiments, "wall_seconds": round(wall, 1),
            "exit_code": exit_code(every)}


def _known(name: str) -> bool:
    from ..experiments import REGISTRY
    return name in REGISTRY
