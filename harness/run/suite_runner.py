"""`harness suite`: every experiment (or one group) with one seed, side by side, and where exactly-once held.

The experiments run as separate `harness run` processes against one stack
(several at a time with --parallel), each into `<suite>/<experiment>/`. Their
crash plans are identical because the seed is. The suite report has one row
per experiment and a final line that says where exactly-once held and where
it stopped.
"""

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

from ..core.errors import HarnessError, did_you_mean
from ..stack.environment import describe
from ..core.procs import die_with_parent
from ..reporting.run_report import RunReport
from ..reporting.shared import fmt
from ..stack.stack import Stack

# The longest experiment (a JVM restart per crash) takes minutes on two cores.
PER_EXPERIMENT_TIME_LIMIT_S = 900
# An interrupted run audits its stores and writes its report; the audit's reads are bounded well below this.
REPORT_GRACE_S = 150


# Groups that run only when asked for by name (`--group cluster`): their experiments need more than the
# default one-broker stack.
OPT_IN_GROUPS = ("cluster", "queues")
# Groups whose experiments need a Kafka of this many brokers (`harness up --brokers N`): refused on a smaller stack.
GROUP_BROKERS = {"cluster": 3}


def groups() -> dict[str, list[str]]:
    """Group name -> its experiments in the registry's order (each declaration's suite `group`). An
    experiment with no group (custom: it needs the user's --worker-cmd) is not in the suite."""
    from ..experiments import REGISTRY
    out: dict[str, list[str]] = {}
    for name, exp in REGISTRY.items():
        if exp.suite.get("group") and exp.suite.get("include", True):
            out.setdefault(exp.suite["group"], []).append(name)
    return out


def parse_groups(spec: str | None) -> list[str] | None:
    """The groups a --group value names, comma-separated (`core,eos`), each once, in the order given; None
    when none is given. An unknown name is refused in one line with the nearest valid one and the valid ones."""
    if spec is None:
        return None
    known = groups()
    names = list(dict.fromkeys(s.strip() for s in str(spec).split(",") if s.strip()))
    if not names:
        raise HarnessError(f"--group names no group; choose from: {', '.join(sorted(known))}")
    for name in names:
        if name not in known:
            raise HarnessError(f"unknown --group {name!r}; {did_you_mean(name, known)}choose one of: "
                               f"{', '.join(sorted(known))}")
    return names


def suite_experiments(group: str | None = None) -> list[str]:
    """The experiments of every group but the opt-in ones (OPT_IN_GROUPS), or those of the groups named
    (`core,eos`), in the registry's order (the rows of the suite report). An unknown group is refused with
    the valid ones named."""
    known, chosen = groups(), parse_groups(group)
    if chosen is None:
        return [n for g, names in known.items() if g not in OPT_IN_GROUPS for n in names]
    return [n for g, names in known.items() if g in chosen for n in names]


def suite_folders(group: str | None = None) -> list[Path]:
    """The folders of experiment files the default suite runs (the files are its source): the package's
    experiments/<group>/ for every group but the opt-in ones, or for those named (refused, with the valid
    ones named, when unknown). The package's own folder, not the current directory's: a team's own
    experiments/ runs by naming it (`harness suite ./experiments/nightly`). The declarations' groups name
    the folders; a unit test holds the files and the declarations' suite runs the same."""
    from ..core import package_data
    named = parse_groups(group)        # an unknown group: one line naming the valid ones
    chosen = [g for g in groups() if (g in named if named else g not in OPT_IN_GROUPS)]
    root = package_data.path("experiments")
    missing = [g for g in chosen if not (root / g).is_dir()]
    if missing:
        raise HarnessError(f"the harness's experiment files are missing ({root / missing[0]} is not there): "
                           f"reinstall the harness, or name the experiments with --experiments")
    return [root / g for g in chosen]


def registry_order(runs: list, kind_of) -> list:
    """Runs in the registry's order of their experiment kinds (the rows of the suite report), then by name."""
    from ..experiments import REGISTRY
    order = {name: i for i, name in enumerate(REGISTRY)}
    return sorted(runs, key=lambda r: (order.get(kind_of(r), len(order)), str(r)))


def launch_order(names: list[str], kinds: dict | None = None) -> list[str]:
    """Longest first (each declaration's suite weight), so the short ones fill the gaps. `kinds` maps a run
    that comes from an experiment file to its experiment kind (the run's name is the file's)."""
    from ..experiments import REGISTRY
    kinds = kinds or {}
    return sorted(names, key=lambda n: -REGISTRY[kinds.get(n, n)].suite.get("weight", 0))


def run_command(name: str, common_args: list[str], folder: Path, file: tuple | None = None) -> list[str]:
    """The `harness run` arguments of one suite run: the experiment with its suite arguments, or an
    experiment file (path, kind) that carries its own, with the common options it accepts."""
    target, kind, extra = (str(file[0]), file[1], []) if file else (name, name, suite_args(name))
    return ["run", target, *accepted_args(kind, common_args), "--quiet", "--out", str(folder),
            "--time-limit", str(PER_EXPERIMENT_TIME_LIMIT_S), *extra]


def suite_args(name: str) -> list[str]:
    """The extra `harness run` options an experiment takes in the suite (its declaration says)."""
    from ..experiments import REGISTRY
    return list(REGISTRY[name].suite.get("args", []))


def accepted_args(name: str, common_args: list[str]) -> list[str]:
    """The suite's common options (pairs of `--option VALUE`) without those this experiment refuses
    (its declaration's `refuses`: auto-commit takes no --commit-every) or that only other experiments
    declare (--client: the eos family's), so a suite option that does not apply to one experiment is left
    out of its run instead of failing it."""
    from ..experiments import REGISTRY
    exp = REGISTRY[name]
    others = {o.flag for e in REGISTRY.values() for o in e.options} - {o.flag for o in exp.options}
    refused = {"--" + o.replace("_", "-") for o in exp.refuses} | others
    return [x for opt, value in zip(common_args[::2], common_args[1::2]) if opt not in refused for x in (opt, value)]


def new_suite_id(now: float | None = None) -> str:
    return time.strftime("%Y%m%dT%H%M%S", time.gmtime(now if now is not None else time.time())) + "-suite"


def check_brokers(group: str | None, brokers: int) -> None:
    """One clear line when a stack of `brokers` Kafka nodes is smaller than the groups' experiments need."""
    need = max([1, *(GROUP_BROKERS.get(g, 1) for g in parse_groups(group) or ())])
    if brokers < need:
        raise HarnessError(f"--group {group} needs the {need}-broker cluster (harness up --brokers {need}); "
                           f"this stack has {brokers} broker{'s' if brokers != 1 else ''}")


def check_stack(stack: Stack, group: str | None) -> None:
    check_brokers(group, stack.brokers)


def run_env(stack: Stack) -> dict:
    """The environment of a child `harness run` on `stack`: its addresses (the child recognises a local
    stack behind them and takes a lease), and no --stack choice of ours to re-resolve."""
    env = {**os.environ, "HARNESS_BOOTSTRAP_SERVERS": stack.bootstrap_servers,
           "HARNESS_POSTGRES_DSN": stack.postgres_dsn}
    env.pop("HARNESS_STACK", None)
    env.pop("HARNESS_KAFKA_VERSION", None)      # the stack runs what it runs: the release was this command's choice
    return env


def run_suite(stack: Stack, experiments: list[str], common_args: list[str], out: Path, parallel: int | None,
              log=print, on_done=None, group: str | None = None, scheduler=None, files: dict | None = None) -> dict:
    """Run each experiment in its own `harness run` process; return the suite summary (also written).
    `parallel` None: one more than the cores (suite_schedule), else exactly that many at once. `files` maps
    a run's name to the experiment file it runs, (path, kind)."""
    from ..core.suite_schedule import Scheduler
    sched = scheduler or Scheduler(parallel)
    check_stack(stack, group)
    from ..core.rundir import mark_suite_dir
    mark_suite_dir(out)
    env = run_env(stack)
    t0 = time.time()
    files = files or {}
    pending = launch_order(experiments, {n: kind for n, (_, kind) in files.items()})
    running: dict[str, tuple[subprocess.Popen, float]] = {}
    finished: dict[str, dict] = {}
    try:
        while pending or running:
            sched.sample()
            while pending and sched.may_start(len(running)):
                name = pending.pop(0)
                folder = out / name
                cmd = [sys.executable, "-m", "harness.cli", *run_command(name, common_args, folder, files.get(name))]
                log(f"suite: starting {name}" + _room(sched))
                sched.started(name, len(running), time.time() - t0)
                log_fd = os.open(out / f"{name}.log", os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o644)
                with open(log_fd, "wb") as f:
                    running[name] = (subprocess.Popen(cmd, env=env, stdout=f, stderr=subprocess.STDOUT,
                                                      stdin=subprocess.DEVNULL, preexec_fn=die_with_parent),
                                     time.time())
            for name, (proc, started) in list(running.items()):
                ended = reaped(proc)
                if ended is None:
                    continue
                del running[name]
                finished[name] = _entry(name, out, ended[0], time.time() - started, cpu=ended[1])
                log(f"suite: {name} finished: {finished[name]['verdict']} ({finished[name]['seconds']:.0f} s)")
                if on_done:
                    on_done(name, finished[name])
            time.sleep(0.2)
    except KeyboardInterrupt:
        stop_children(running, out, finished)
        raise
    finally:
        sched.finish()
        summary = build_summary(out, stack, experiments, finished, time.time() - t0, common_args)
        summary["parallel"] = sched.cap
        summary["scheduling"] = sched.describe()
        summary["group"] = group
        summary["exit_code"] = exit_code(summary["experiments"])
        from ..core.safefile import write_text
        write_text(out / "suite.json", json.dumps(summary, indent=2) + "\n")
    return summary


def stop_children(running: dict, out: Path, finished: dict) -> None:
    """After an interrupt: each running `harness run` stops its workers and writes an interrupted report; wait
    for them, whatever signals come meanwhile (the runs hold their own reports, see
    install_sigterm_as_interrupt), and enter each in `finished`."""
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, signal.SIG_IGN)
    for proc, _ in running.values():
        proc.terminate()
    for name, (proc, started) in running.items():
        try:
            proc.wait(timeout=REPORT_GRACE_S)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        finished[name] = _entry(name, out, proc.returncode, time.time() - started, stopped=True)


def _room(sched) -> str:
    idle = sched.idle_cores()
    return "" if idle is None else f" ({idle:.2f} of {sched.n_cores:g} cores idle)"


def reaped(proc: subprocess.Popen) -> tuple[int, float] | None:
    """(exit status, CPU-seconds) of a child `harness run` that has ended, else None. The CPU time is the
    kernel's account of the run process and of every process it waited for (its workers, JVMs and fork
    server's children included; the brokers' and Postgres' are not its children and not counted)."""
    if proc.returncode is not None:
        return proc.returncode, None
    pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
    if pid == 0:
        return None
    proc.returncode = os.waitstatus_to_exitcode(status)
    return proc.returncode, usage.ru_utime + usage.ru_stime


def _entry(name: str, out: Path, rc: int, seconds: float, cpu: float | None = None, stopped: bool = False) -> dict:
    """A finished run's row: its report's verdict, else `failed` with its error line. `stopped`: the suite's
    interrupt stopped it; one stopped before it wrote a report (while it set up) is `interrupted`, not failed."""
    rep = out / name / "report.json"
    cpu_seconds = {"cpu_seconds": round(cpu, 1)} if cpu is not None else {}
    if rep.exists():
        try:
            return {"experiment": name, "report": f"{name}/report.json", "exit_code": rc,
                    "verdict": json.loads(rep.read_text())["verdict"], "seconds": round(seconds, 1), **cpu_seconds}
        except (ValueError, KeyError):
            pass
    tail = ""
    try:        # its error line, else its last: a run whose report went elsewhere prints that folder last
        lines = (out / f"{name}.log").read_text(errors="replace").strip().splitlines()
        tail = ([line for line in lines if line.startswith("error: ")] or lines)[-1]
    except (OSError, IndexError):
        pass
    if stopped:
        return {"experiment": name, "report": None, "exit_code": rc, "verdict": "interrupted",
                "error": "stopped by the suite's interrupt before it wrote a report",
                "seconds": round(seconds, 1), **cpu_seconds}
    return {"experiment": name, "report": None, "exit_code": rc, "verdict": "failed",
            "error": tail[:300], "seconds": round(seconds, 1), **cpu_seconds}


def build_summary(out: Path, stack: Stack, experiments: list[str], finished: dict, wall: float,
                  common_args: list[str]) -> dict:
    rows = []
    for name in experiments:
        e = finished.get(name) or {"experiment": name, "report": None, "verdict": "not run"}
        row = dict(e)
        if e.get("report"):
            try:
                d = RunReport.load(out / e["report"]).data
            except HarnessError as err:   # a report that is not valid counts as none, with the reason
                rows.append({**row, "report": None, "verdict": "failed", "error": str(err)[:300]})
                continue
            ko = d.get("kafka_output") or {}
            row.update(counts=d["counts"], ledger=d["ledger"], crashes=len(d["crashes"]),
                       kafka_output={k: ko.get(k) for k in ("read_committed", "read_uncommitted")} if ko else None,
                       reuse={k: (d.get("reuse") or {}).get(k) for k in ("reused", "hidden", "rejected")}
                       if d.get("reuse") else None,
                       summary=d.get("summary"), timings={k: d["timings"].get(k) for k in
                                                           ("wall_seconds", "restart_median_seconds",
                                                            "read_committed_stall_median_seconds", "phases")},
                       params=d["params"], environment=d["environment"])
        rows.append(row)
    env = next((r["environment"] for r in rows if r.get("environment")), None) or describe(stack)
    suite_id = out.name if re.match(r"^\d{8}T\d{6}", out.name) else new_suite_id()
    return {"schema_version": 2, "suite_id": suite_id, "folder": out.name, "command_args": common_args,
            "environment": env, "experiments": rows, "conclusion": conclusion(rows),
            "timings": {"wall_seconds": round(wall, 1)}}


def exact(row: dict) -> dict:
    """Which sides of an experiment were exact: {'effects': bool|None, 'topic': bool|None}."""
    c = row.get("counts") or {}
    ko = row.get("kafka_output") or {}
    rc = ko.get("read_committed") if ko else None
    led = row.get("ledger") or {}
    effects = None if led.get("actual_total") is None else (c.get("lost") == 0 and c.get("duplicates") == 0)
    topic = None if not rc else (rc["lost"] == 0 and rc["duplicates"] == 0)
    return {"effects": effects, "topic": topic}


def conclusion(rows: list[dict]) -> str:
    """The suite's last line: where exactly-once held, where it stopped, and why."""
    held, lost_or_dup, boundary, keyed, hidden = [], [], [], [], []
    for r in rows:
        # Only a run whose every check passed says something about its guarantee; a run that did not
        # finish, or whose audit found something off, is listed at the end instead.
        if not r.get("counts") or r.get("verdict") != "as-predicted":
            continue
        x, name = exact(r), r["experiment"]
        if (r.get("reuse") or {}).get("hidden"):
            # Every payment charged once, but requests a client sent under a used key dropped without a word.
            hidden.append(f"{name} ({fmt(r['reuse']['hidden'])} of {fmt(r['reuse'].get('reused'))} hidden)")
        elif x["effects"] is False and x["topic"]:
            boundary.append(name)
        elif x["effects"] is False:
            lost_or_dup.append((name, r["counts"]["lost"], r["counts"]["duplicates"]))
        elif x["effects"] or x["topic"]:
            held.append(name)
            if x["effects"] and (r["counts"].get("dedupe_hits") or 0) > 0:
                keyed.append(name)
    finished = [r for r in rows if r.get("counts") and r.get("verdict") == "as-predicted"]
    if not finished:
        return ("No experiment finished as predicted, so this suite states no finding: "
                + ", ".join(f"{r['experiment']} {r.get('verdict')}" for r in rows) + ".")
    parts = [f"Exactly-once held in {', '.join(held) or 'none of the experiments that ran as predicted'}."]
    if lost_or_dup:
        parts.append(did_not_hold(lost_or_dup))
    if boundary:
        parts.append(f"Kafka's exactly-once stopped at the first write outside Kafka: {', '.join(boundary)} "
                     f"kept an exact topic and a duplicated ledger.")
    if hidden:
        parts.append(f"An exact ledger hid requests sent again under a used key with another payload (a client "
                     f"bug, neither applied nor rejected): {', '.join(hidden)}.")
    if keyed:
        parts.append(f"An idempotency key or a conditional write in the effect's own transaction made the "
                     f"database exact ({', '.join(keyed)}).")
    bad = [r["experiment"] for r in rows if r.get("verdict") != "as-predicted"]
    if bad:
        parts.append(f"Not as predicted or not finished: {', '.join(bad)}.")
    return " ".join(parts)


def did_not_hold(runs: list[tuple]) -> str:
    """The conclusion's sentence on the runs whose effects were not exact, [(name, lost, duplicated)]: each
    named with its counts when there are a few; past three, how many lost and how many duplicated, so that the
    sentence stays short (the table beside it gives each run's counts)."""
    if len(runs) <= 3:
        return "It did not hold in " + ", ".join(f"{n} ({lost:,} lost, {dup:,} duplicated)" for n, lost, dup in runs) + "."
    lost = sum(1 for _, n, _ in runs if n)
    dup = sum(1 for _, _, n in runs if n)
    return (f"It did not hold in {len(runs)} experiments: {lost} of them lost payments, {dup} applied payments twice "
            f"(each one's counts are in the table).")


def exit_code(rows: list[dict]) -> int:
    """The suite's exit status, the worst of its runs: 130 when interrupted, 1 when a run was not as
    predicted, 3 when one did not finish (or its audit failed), else 0."""
    verdicts = {r.get("verdict") for r in rows}
    if "interrupted" in verdicts:
        return 130
    if "unexpected" in verdicts:
        return 1
    if verdicts - {"as-predicted"}:
        return 3
    return 0


def parse_experiments(spec: str | None, group: str | None = None) -> list[str]:
    from ..experiments import REGISTRY
    if spec is not None and group is not None:
        raise HarnessError("--experiments and --group both choose the experiments; give one of them")
    if not spec:
        return suite_experiments(group)
    names = [s.strip() for s in spec.split(",") if s.strip()]
    if not names:
        raise HarnessError(f"--experiments names no experiment; choose from: {', '.join(REGISTRY)}")
    unknown = [n for n in names if n not in REGISTRY]
    if unknown:
        raise HarnessError(f"unknown experiment(s) {', '.join(unknown)}; {did_you_mean(unknown[0], REGISTRY)}"
                          f"choose from: {', '.join(REGISTRY)}")
    return names
