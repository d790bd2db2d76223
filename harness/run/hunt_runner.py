"""`harness hunt`: one experiment, its options and faults, run again and again with a new seed each time.

A protocol fault's anomaly (a late EndTxn applied to the next transaction)
shows in one run of several, and not again with the same seed: the timing
around the held request decides. Jepsen's way is many short seeded runs and
the first that goes wrong; this is it. Each run is a child `harness run`
(seed `--seed`, then one more per run) on the hunt's stack, into
`<hunt>/seed-<S>/`, one at a time; by default the hunt stops at the first run
whose verdict is not as-predicted (`--keep-going` runs them all). hunt.json
holds a row per run (seed, verdict, exit status, key counts, the checks that
failed) and, for the first invalid run, the one `harness run` command that
reproduces it; hunt.md says the same for a reader.

The pure parts (seeds, the run's arguments from the declarations, key counts,
the summary and its page) are apart from `run_hunt`, which starts processes.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import time
from pathlib import Path

from ..core.errors import HarnessError
from ..core.procs import die_with_parent
from .suite_runner import PER_EXPERIMENT_TIME_LIMIT_S, _entry, run_env, stop_children

MAX_RUNS = 10_000
SCHEMA_VERSION = 1
VALID = "as-predicted"
# A verdict that says nothing about the system: the hunt was stopped.
STOPPED = ("interrupted", "not run")
# The options the hunt itself chooses for each run.
OWN = ("--seed",)


def seeds(first: int, runs: int) -> list[int]:
    """The seed of each run: `first`, then one more per run."""
    if runs < 1 or runs > MAX_RUNS:
        raise HarnessError(f"--runs must be between 1 and {MAX_RUNS:,}, got {runs}")
    return list(range(first, first + runs))


def run_args(experiment: str, options: dict, faults=()) -> list[str]:
    """The `harness run` arguments of the hunt's runs without seed and folder: the experiment, each declared
    option that was given (a flag alone for a yes/no one), then each --fault; in the declarations' order."""
    from .params import declared
    args = [experiment]
    for name, d in declared().items():
        value = options.get(name)
        if value is None or value is False or d.option.flag in OWN:
            continue
        args += [d.option.flag] if d.option.type is bool else [d.option.flag, _plain(value)]
    for spec in faults:
        args += ["--fault", spec]
    return args


def _plain(value) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)


def child_command(args: list[str], seed: int, folder: Path) -> list[str]:
    """The argv (after `harness`) of one run of the hunt: a hung run ends at the suite's time limit unless
    the options name one."""
    limit = [] if "--time-limit" in args else ["--time-limit", str(PER_EXPERIMENT_TIME_LIMIT_S)]
    return ["run", *args, "--seed", str(seed), "--quiet", "--out", str(folder), *limit]


def reproduce(args: list[str], seed: int, extra: list[str] = ()) -> str:
    """The one command that runs a hunt's run again: `harness run` with the same options and its seed.
    `extra` are the hunt's stack-side options the runs got by inheritance (--kafka-config, secrets masked)."""
    return shlex.join(["harness", "run", *args, *extra, "--seed", str(seed)])


def key_counts(data: dict | None) -> dict:
    """A run report's figures the hunt shows per run; a figure the report lacks is None (unknown)."""
    if not data:
        return {}
    c = data.get("counts") or {}
    rc = (data.get("kafka_output") or {}).get("read_committed") or {}
    stories = {name: s for name, s in (data.get("fault_details") or {}).items() if isinstance(s, dict)}
    touched = {name: s.get("touched") for name, s in stories.items() if "touched" in s}
    late = {name: s["after_client_gone"] for name, s in stories.items() if "after_client_gone" in s}
    return {"lost": c.get("lost"), "duplicates": c.get("duplicates"),
            "read_committed_lost": rc.get("lost"), "read_committed_duplicates": rc.get("duplicates"),
            "crashes": len(data.get("crashes") or []), "touched": touched, "after_client_gone": late,
            "failed": list((data.get("verdict_detail") or {}).get("failed") or [])}


def row_of(seed: int, entry: dict, data: dict | None) -> dict:
    """One run's row: its seed, folder, verdict, exit status, seconds and key counts."""
    return {"seed": seed, "folder": f"seed-{seed}", "verdict": entry.get("verdict"),
            "exit_code": entry.get("exit_code"), "seconds": entry.get("seconds"),
            **({"error": entry["error"]} if entry.get("error") else {}), **key_counts(data)}


def invalid(row: dict) -> bool:
    """A run whose verdict is not as-predicted (an interrupted one is the hunt's stop, not a finding)."""
    return row.get("verdict") not in (VALID, *STOPPED)


def line(row: dict) -> str:
    """The line printed when a run ends: seed, verdict, key counts."""
    def n(v):
        return "unknown" if v is None else f"{v:,}"
    parts = [f"seed {row['seed']}: {row.get('verdict')}"]
    if "lost" in row:
        parts.append(f"lost {n(row['lost'])}, duplicates {n(row['duplicates'])}")
        if row.get("read_committed_lost") is not None or row.get("read_committed_duplicates") is not None:
            parts.append(f"read_committed lost {n(row['read_committed_lost'])}, "
                         f"duplicates {n(row['read_committed_duplicates'])}")
        parts.append(f"crashes {row['crashes']}")
        late = row.get("after_client_gone") or {}
        parts += [f"{name} touched {n(t)}" + (f" ({n(late[name])} after their client gave up)" if name in late else "")
                  for name, t in (row.get("touched") or {}).items()]
    if row.get("seconds") is not None:
        parts.append(f"{row['seconds']:.0f} s")
    text = ", ".join(parts)
    if row.get("failed"):
        text += "; failed: " + "; ".join(row["failed"][:3])
    elif row.get("error"):
        text += f"; {row['error']}"
    return text


def summary(args: list[str], rows: list[dict], planned: int, keep_going: bool, wall: float,
            extra: list[str] = (), environment: dict | None = None, interrupted: bool = False) -> dict:
    """hunt.json: the runs, the invalid ones, and the command that reproduces the first of them."""
    bad = [r for r in rows if invalid(r)]
    first = bad[0] if bad else None
    return {"schema_version": SCHEMA_VERSION, "command_args": list(args), "stack_args": list(extra),
            "planned_runs": planned, "mode": "keep-going" if keep_going else "until-invalid",
            "runs": rows, "invalid_seeds": [r["seed"] for r in bad], "interrupted": interrupted,
            "first_invalid": first and {"seed": first["seed"], "folder": first["folder"],
                                        "verdict": first["verdict"], "failed": first.get("failed", []),
                                        "reproduce": reproduce(args, first["seed"], extra),
                                        **({"broker_side": first["broker_side"]} if first.get("broker_side") else {})},
            "environment": environment, "timings": {"wall_seconds": round(wall, 1)},
            "exit_code": exit_code(rows, interrupted)}


def exit_code(rows: list[dict], interrupted: bool) -> int:
    """130 interrupted, 1 when a run was not as predicted, 0 when every run was."""
    if interrupted:
        return 130
    return 1 if any(invalid(r) for r in rows) else 0


def closing(s: dict) -> list[str]:
    """The summary's lines, for the terminal and the page."""
    ran = [r for r in s["runs"] if r.get("verdict") not in STOPPED]
    out = [f"runs: {len(ran)} of {s['planned_runs']} finished ({s['mode']})"
           + (", interrupted" if s.get("interrupted") else "")
           + f"; invalid: {len(s['invalid_seeds'])}"
           + (f" (seeds {', '.join(map(str, s['invalid_seeds']))})" if s["invalid_seeds"] else "")]
    f = s.get("first_invalid")
    if f:
        if f.get("broker_side"):
            out.append(f"the broker's side of seed {f['seed']}: {f['broker_side']}")
        out.append(f"first invalid run: seed {f['seed']} ({f['verdict']}), report in {f['folder']}/; reproduce it with:")
        out.append(f"  {f['reproduce']}")
    return out


def render_md(s: dict) -> str:
    """hunt.md: what was run, a row per run, the summary."""
    head = ["# Hunt: " + shlex.join(["harness", "run", *s["command_args"], *s.get("stack_args", [])]), "",
            f"One run per seed, one at a time, {s['mode']}; each run's report is in its folder.", "",
            "| seed | verdict | lost | duplicates | read_committed lost | read_committed duplicates | crashes "
            "| touched | failed checks |", "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]

    def cell(v):
        return "unknown" if v is None else str(v)
    body = [f"| [{r['seed']}]({r['folder']}/report.md) | {r.get('verdict')} | {cell(r.get('lost'))} | "
            f"{cell(r.get('duplicates'))} | {cell(r.get('read_committed_lost'))} | "
            f"{cell(r.get('read_committed_duplicates'))} | {cell(r.get('crashes'))} | "
            + ", ".join(f"{k} {cell(v)}" for k, v in (r.get("touched") or {}).items())
            + " | " + "; ".join(r.get("failed") or ([r["error"]] if r.get("error") else [])).replace("|", "\\|") + " |"
            for r in s["runs"]]
    sides = [f"- seed {r['seed']}: the broker's side: {r['broker_side']}" for r in s["runs"] if r.get("broker_side")]
    tail = ["", *sides, *([""] if sides else []), *closing(s)]
    if s.get("first_invalid"):
        tail[-1] = f"\n    {s['first_invalid']['reproduce']}"     # a code block
    return "\n".join(head + body + tail) + "\n"


def write(folder: Path, s: dict) -> None:
    from ..core.safefile import write_text
    write_text(folder / "hunt.json", json.dumps(s, indent=2) + "\n")
    write_text(folder / "hunt.md", render_md(s))


def _report(folder: Path) -> dict | None:
    try:
        return json.loads((folder / "report.json").read_text())
    except (OSError, ValueError):
        return None


def run_hunt(stack, args: list[str], run_seeds: list[int], out: Path, keep_going: bool, log=print,
             extra: list[str] = (), harness_cmd: list[str] | None = None, on_invalid=None) -> dict:
    """Run `harness run ARGS --seed S` for each seed, one at a time, each into `out/seed-S/`; stop at the first
    invalid run unless `keep_going`. hunt.json and hunt.md are written after every run and at the end,
    Ctrl-C included (the run in progress ends interrupted, its report written; then KeyboardInterrupt).
    `stack` None: the runs get this process's environment (a test's stand-in `harness_cmd`). `on_invalid(row,
    folder)` is called after each invalid run, while its data is still on the stack (--explain)."""
    from ..core.rundir import mark_suite_dir
    from ..stack.environment import describe
    mark_suite_dir(out)
    env = run_env(stack) if stack is not None else dict(os.environ)
    environment = describe(stack) if stack is not None else None
    harness_cmd = harness_cmd or [sys.executable, "-m", "harness.cli"]
    t0 = time.time()
    rows: list[dict] = []
    try:
        for seed in run_seeds:
            name = f"seed-{seed}"
            cmd = [*harness_cmd, *child_command(args, seed, out / name)]
            started = time.time()
            fd = os.open(out / f"{name}.log", os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o644)
            with open(fd, "wb") as f:
                proc = subprocess.Popen(cmd, env=env, stdout=f, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                        preexec_fn=die_with_parent)
            running = {name: (proc, started)}
            try:
                rc = proc.wait()
            except KeyboardInterrupt:
                finished: dict = {}
                try:
                    stop_children(running, out, finished)
                finally:
                    rows.append(row_of(seed, finished.get(name) or {"verdict": "interrupted"}, _report(out / name)))
                raise
            row = row_of(seed, _entry(name, out, rc, time.time() - started), _report(out / name))
            rows.append(row)
            log(line(row))
            if invalid(row) and on_invalid is not None:
                on_invalid(row, out / name)
            write(out, summary(args, rows, len(run_seeds), keep_going, time.time() - t0, extra, environment))
            if invalid(row) and not keep_going:
                break
    except KeyboardInterrupt:
        s = summary(args, rows, len(run_seeds), keep_going, time.time() - t0, extra, environment, interrupted=True)
        write(out, s)
        raise
    s = summary(args, rows, len(run_seeds), keep_going, time.time() - t0, extra, environment)
    write(out, s)
    return s

