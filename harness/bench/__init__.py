"""`harness bench`: how fast a killed consumer comes back, and what each delivery mode costs.

Two questions, answered on the real stack and written to one folder
(bench.json, bench.md, bench.html):

  restart     seconds from SIGKILL of a consumer to its replacement's first record, per
              strategy (classic group with default or short session, static membership,
              manual assign(), the KIP-848 consumer protocol), with a correctness check
              (restart.py)
  throughput  messages per second with no crashes for a bare loop and the harness's modes
              (offset-after, dedupe, eos at several commit intervals, eos-dedupe) at several
              message sizes, repeated and summarised as median and min/max (throughput.py)
"""

import time
from dataclasses import dataclass, field, asdict
from pathlib import Path

from ..core.errors import HarnessError
from ..stack.stack import Stack, redact

DEFAULT_MESSAGES = 2000
FAST_FACTOR = 50            # Kafka-only cases run on messages * FAST_FACTOR unless --fast-messages is given


@dataclass
class BenchOptions:
    messages: int = DEFAULT_MESSAGES
    fast_messages: int | None = None
    repetitions: int = 3
    sizes: list = field(default_factory=lambda: [100, 1000])
    restart: bool = True
    throughput: bool = True
    restart_kills: int = 5
    slow_kills: int = 3
    strategies: str | None = None
    cases: str | None = None
    keep_data: bool = False

    def validate(self) -> None:
        for name in ("messages", "repetitions", "restart_kills", "slow_kills"):
            if getattr(self, name) < 1:
                raise HarnessError(f"--{name.replace('_', '-')} must be at least 1, got {getattr(self, name)}")
        if self.fast_messages is not None and self.fast_messages < 1:
            raise HarnessError(f"--fast-messages must be at least 1, got {self.fast_messages}")
        if not self.sizes or any(s < 1 for s in self.sizes):
            raise HarnessError("--sizes must list positive byte counts, e.g. 100,1000")
        if not self.restart and not self.throughput:
            raise HarnessError("--skip-restart and --skip-throughput together leave nothing to measure")
        from .restart import parse_strategies
        from .throughput import parse_cases
        parse_strategies(self.strategies)
        parse_cases(self.cases)


def parse_sizes(text: str) -> list[int]:
    try:
        sizes = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise HarnessError(f"--sizes must be comma-separated byte counts such as 100,1000, got {text!r}") from None
    if not sizes or any(s < 1 for s in sizes):
        raise HarnessError(f"--sizes must be comma-separated positive byte counts, got {text!r}")
    return sizes


def caveats(data: dict) -> list[str]:
    env, broker = data["environment"], data["broker_settings"]
    out = [f"Everything shares this machine's {env.get('cpus')} CPUs: broker, PostgreSQL, the worker and (for "
           f"harness cases) the supervisor and its progress sampler. Numbers compare cases with each other on "
           f"this machine; they are not capacity figures."]
    linger = broker.get("group.coordinator.append.linger.ms")
    if linger and linger != "0":
        out.append(f"The broker runs with group.coordinator.append.linger.ms={linger}: each synchronous offset "
                   f"commit can wait up to {linger} ms before it is appended, which caps the per-record-commit "
                   f"cases (bare, offset-after, dedupe) at a few hundred records/s, bare and harness alike. "
                   f"Setting it to 0 removes that cap (the harness's local stack sets it when it starts Kafka; a "
                   f"broker started before that change keeps the default).")
    r = data.get("restart")
    if r:
        p = r["parameters"]
        out.append(f"Restart latency includes the replacement's interpreter and import start-up (reported as "
                   f"startup s, the same for every strategy); one partition and one member at a time, so no "
                   f"strategy pays for other members rejoining. classic-default is measured on at most "
                   f"{p['slow_kills']} kills and every wait is capped at {p['wait_cap_seconds']:.0f} s.")
        if "kip848" in p["strategies"]:
            out.append(f"kip848 follows the broker's group.consumer.session.timeout.ms "
                       f"({broker.get('group.consumer.session.timeout.ms', 'unknown')} ms here): the dead member "
                       f"keeps its partition until the broker expires it.")
    t = data.get("throughput")
    if t:
        out.append(f"Kafka-only cases (eos, bare-cp) run on {t['parameters']['fast_messages']:,} messages, the "
                   f"others on {t['parameters']['messages']:,}; rates are per second of worker busy time, so the "
                   f"counts differ only to give each run enough commit intervals.")
    return out


def run_bench(stack: Stack, opts: BenchOptions, folder: Path, bench_id: str, log=print) -> tuple[dict, Path]:
    from ..stack.environment import describe
    from . import bench_report as report
    from .common import broker_settings
    from .restart import run_restart, parse_strategies
    from .throughput import run_throughput, parse_cases

    opts.validate()
    folder = Path(folder)
    if (folder / "bench.json").exists():
        raise HarnessError(f"{folder} already holds a benchmark; choose another --out")
    folder.mkdir(parents=True, exist_ok=True)
    t0 = time.time()
    fast = opts.fast_messages or opts.messages * FAST_FACTOR
    env = describe(stack)
    data = {"schema_version": report.SCHEMA_VERSION, "kind": "bench", "bench_id": bench_id,
            "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t0)), "status": "running",
            "parameters": {**asdict(opts), "fast_messages": fast},
            "environment": env, "broker_settings": broker_settings(stack),
            "stack": {"kind": stack.kind, "bootstrap_servers": stack.bootstrap_servers,
                      "postgres_dsn": redact(stack.postgres_dsn)},
            "restart": None, "throughput": None}
    try:
        if opts.restart:
            r = run_restart(stack, bench_id, folder / "restart", parse_strategies(opts.strategies),
                            kills=opts.restart_kills, slow_kills=opts.slow_kills, keep_data=opts.keep_data, log=log)
            data["restart"] = {**r, "environment": env}
        if opts.throughput:
            t = run_throughput(stack, bench_id, folder / "throughput", opts.messages, opts.repetitions, opts.sizes,
                               parse_cases(opts.cases), fast_messages=fast, keep_data=opts.keep_data, log=log)
            data["throughput"] = {**t, "environment": env}
        data["status"] = "complete"
    except KeyboardInterrupt:
        data["status"] = "interrupted"
        raise
    except Exception:
        data["status"] = "failed"
        raise
    finally:
        data["wall_seconds"] = round(time.time() - t0, 1)
        data["summary"] = report.summary(data)
        data["caveats"] = caveats(data)
        report.write_all(data, folder)
    return data, folder
