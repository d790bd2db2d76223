"""Small things the benchmarks share: broker settings worth recording, summary statistics, a child run."""

import signal
import statistics
import subprocess
from dataclasses import dataclass

from ..stack.stack import Stack

# Broker settings that change what the benchmarks measure; recorded with every result.
BROKER_KEYS = ("group.coordinator.append.linger.ms", "group.min.session.timeout.ms",
               "group.consumer.session.timeout.ms", "group.consumer.heartbeat.interval.ms",
               "group.initial.rebalance.delay.ms", "group.coordinator.rebalance.protocols",
               "transaction.abort.timed.out.transaction.cleanup.interval.ms", "num.io.threads",
               "num.network.threads")


def broker_settings(stack: Stack) -> dict:
    """The broker's effective values of BROKER_KEYS (empty when the cluster does not let us describe it)."""
    from ..stack.broker_version import broker_settings as described
    return described(stack.bootstrap_servers, BROKER_KEYS)


@dataclass
class ChildRuns:
    """What every bench of `harness run` child processes repeats: how often, on how many payments, with which
    seed, and whether the runs' topics and tables are kept."""
    repetitions: int = 3
    messages: int = 1000
    seed: int = 25
    keep_data: bool = False


def check_runs(flag: str, chosen: list, valid: tuple, repetitions: int, messages: int, least: int) -> None:
    """One clear line for a bench's bad choices: `chosen` (of `valid`, each once, under `flag`), its
    repetitions (1 to 50) and its messages (`least` to the harness's most)."""
    from ..core.errors import HarnessError
    from ..run.params import MAX_MESSAGES
    unknown = [x for x in chosen if x not in valid]
    if unknown or not chosen:
        raise HarnessError(f"{flag}: choose among {', '.join(valid)} (got {', '.join(unknown) or 'none'})")
    if len(set(chosen)) != len(chosen):
        raise HarnessError(f"{flag} names one twice: {', '.join(chosen)}")
    if not 1 <= repetitions <= 50:
        raise HarnessError("--repetitions must be between 1 and 50")
    if not least <= messages <= MAX_MESSAGES:
        raise HarnessError(f"--messages must be between {least} and {MAX_MESSAGES:,}")


def seconds(value) -> str:
    """A measured duration for a progress line: `1.03 s`, or `unknown` when it was not measured (never None)."""
    return "unknown" if value is None else f"{value} s"


def spread(values: list[float]) -> dict:
    """median, min, max (and the raw values) of a list of measurements."""
    vals = [v for v in values if v is not None]
    if not vals:
        return {"median": None, "min": None, "max": None, "values": []}
    return {"median": round(statistics.median(vals), 1), "min": round(min(vals), 1),
            "max": round(max(vals), 1), "values": [round(v, 1) for v in vals]}


def clean_run(stack: Stack, run_id: str) -> None:
    """Remove one measured run's topics and tables (its reports stay): benchmarks write a lot of data."""
    from ..run.cleanup import clean_runs
    try:
        clean_runs(stack, [run_id], False)
    except Exception:  # noqa: BLE001 - cleaning is best effort; `harness clean --all` remains
        pass


def child_report(out, err: str, cell: dict) -> dict | None:
    """A child run's report.json from its folder `out`; None when it wrote none, the cell then saying so with
    the child's last line of stderr (a refusal's one line)."""
    import json
    try:
        return json.loads((out / "report.json").read_text())
    except (OSError, ValueError):
        cell.update(verdict="no report", error=((err or "").strip().splitlines() or [""])[-1][:300])
        return None


def run_child(cmd: list[str], env: dict) -> tuple[int, str]:
    """Run one `harness run` as a child process (it dies with us; Ctrl-C reaches it as SIGINT, so it still
    stops its workers and reports): (exit code, stderr)."""
    from ..core.procs import die_with_parent
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                            stdin=subprocess.DEVNULL, preexec_fn=die_with_parent)
    try:
        _, err = proc.communicate()
    except KeyboardInterrupt:
        proc.send_signal(signal.SIGINT)
        proc.wait()
        raise
    return proc.returncode, err or ""
