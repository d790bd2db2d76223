"""`harness bench`: restart latency by strategy and throughput by delivery mode, in one report.

The command object is `bench` (with its subcommands `scale` and `streams`); harness/cli/entry.py registers it.
"""

import sys

import click

from ...run.params import SEED
from .stack_options import kafka_version_option, print_folder, stack_options, with_stack


def _strategies_help() -> str:
    from ...bench.restart import STRATEGIES
    return ", ".join(s.name for s in STRATEGIES)


def _cases_help() -> str:
    from ...bench.throughput import CASES
    return ", ".join(c.name for c in CASES)


@click.group("bench", invoke_without_command=True,
             epilog="\b\nSubcommands:\n  scale   how the time to a verdict grows with messages and partitions x workers"
                    "\n  protocols restart and group-stall medians per group protocol (classic, consumer, streams)"
                    "\n  streams what a Kafka Streams restart costs, with each start-up lever on and off")
@click.option("--messages", type=int, default=2000, show_default=True,
              help="Payments per throughput run for cases with a per-record Postgres write or offset commit.")
@click.option("--fast-messages", type=int, default=None,
              help="Payments per run for the Kafka-only cases (eos, bare-cp)  [default: 50 x --messages]")
@click.option("--repetitions", type=int, default=3, show_default=True,
              help="Throughput runs per case and size (median and min/max are reported).")
@click.option("--sizes", default="100,1000", show_default=True, help="Message sizes in bytes (payload_bytes).")
@click.option("--cases", default=None, help=f"Throughput cases to run (default all): {_cases_help()}.")
@click.option("--skip-restart", is_flag=True, help="Do not measure restart latency.")
@click.option("--skip-throughput", is_flag=True, help="Do not measure throughput.")
@click.option("--restart-kills", type=int, default=5, show_default=True,
              help="SIGKILLs per restart strategy (classic-default: at most --slow-kills).")
@click.option("--slow-kills", type=int, default=3, show_default=True,
              help="SIGKILLs for classic-default, which waits ~45 s per kill.")
@click.option("--strategies", default=None, help=f"Restart strategies to run (default all): {_strategies_help()}.")
@click.option("--keep-data", is_flag=True,
              help="Keep the benchmark's topics and tables (default: each run's are removed once measured).")
@click.option("--out", type=click.Path(file_okay=False), default=None,
              help="Report folder (default reports/<timestamp>-bench/).")
@click.option("--keep-stack", is_flag=True, help="Leave a stack this command started running afterwards.")
@click.option("--quiet", "-q", is_flag=True, help="No progress output; the report folder is still printed.")
@click.pass_context
@kafka_version_option
@stack_options
def bench(ctx, messages, fast_messages, repetitions, sizes, cases, skip_restart, skip_throughput, restart_kills,
          slow_kills, strategies, keep_data, out, keep_stack, quiet, stack_kind, bootstrap_servers, postgres_dsn):
    """Benchmark restart latency by strategy and throughput by delivery mode.

    Restart: per strategy, a consumer process is SIGKILLed and a replacement
    started at once; the time to its first record is measured over several
    kills, and its first offset must equal the committed one (no record
    skipped or repeated). Strategies: classic group protocol with the default
    45 s session timeout (capped at 60 s per wait) or a 1 s one, static
    membership, manual assign() (what the harness workers do), and the
    KIP-848 consumer protocol.

    Throughput: messages per second with no crashes, from the worker's busy
    time, for a bare confluent-kafka + psycopg loop, a bare non-transactional
    consume-produce loop, and the harness's offset-after, dedupe, eos (10,
    100 and 1000 ms transactions) and eos-dedupe, at each --sizes, repeated
    --repetitions times.

    Writes bench.json, bench.md and bench.html; the last line printed is the
    folder. A stack this command starts is stopped afterwards unless
    --keep-stack.

    \b
    Examples:
      harness bench
      harness bench --skip-restart --sizes 1000 --repetitions 5
      harness bench --skip-throughput --strategies assign,static,classic-short
    """
    if ctx.invoked_subcommand:
        return
    from ...bench import BenchOptions, parse_sizes, run_bench
    from ...workers.supervisor import install_sigterm_as_interrupt
    from ...core.paths import reports_dir
    from ...workload.naming import new_run_id
    from pathlib import Path

    opts = BenchOptions(messages=messages, fast_messages=fast_messages, repetitions=repetitions,
                        sizes=parse_sizes(sizes), restart=not skip_restart, throughput=not skip_throughput,
                        restart_kills=restart_kills, slow_kills=slow_kills, strategies=strategies, cases=cases,
                        keep_data=keep_data)
    opts.validate()
    bench_id = new_run_id("bench")
    folder = Path(out) if out else reports_dir() / bench_id
    from ...core.paths import refuse_overlap
    refuse_overlap(folder, "--out" if out else "the reports folder")
    install_sigterm_as_interrupt()
    data, folder = with_stack(stack_kind, bootstrap_servers, postgres_dsn, keep_stack, quiet,
                               lambda stack, log: run_bench(stack, opts, folder, bench_id, log=log))
    if not quiet:
        for line in data["summary"]:
            click.echo(line, err=True)
    print_folder(folder)
    if data["status"] != "complete":
        sys.exit(1)


def child_run_options(name: str):
    """The options of a bench subcommand whose cells are `harness run` child processes: the seed, what to keep,
    the report folder, the stack."""
    def wrap(f):
        for deco in reversed((
                SEED.click_option(),
                click.option("--keep-data", is_flag=True,
                             help="Keep each run's topics and tables (default: removed once measured)."),
                click.option("--out", type=click.Path(file_okay=False), default=None,
                             help=f"Report folder (default reports/<timestamp>-{name}/)."),
                click.option("--keep-stack", is_flag=True,
                             help="Leave a stack this command started running afterwards."),
                click.option("--quiet", "-q", is_flag=True,
                             help="No progress output; the report folder is still printed."),
                kafka_version_option, stack_options)):
            f = deco(f)
        return f
    return wrap


def _bench_in_folder(name: str, out, stack_args: tuple, quiet: bool, measure):
    """Run measure(stack, folder, bench_id, log) on a stack (started if needed), writing into --out or
    reports/<bench id> (refused when it holds anything already); SIGTERM stops it as Ctrl-C does."""
    from pathlib import Path
    from ...core.paths import reports_dir
    from ...core.rundir import check_run_dir
    from ...workers.supervisor import install_sigterm_as_interrupt
    from ...workload.naming import new_run_id
    bench_id = new_run_id(name)
    folder = Path(out) if out else reports_dir() / bench_id
    from ...core.paths import refuse_overlap
    refuse_overlap(folder, "--out" if out else "the reports folder")
    check_run_dir(folder)
    install_sigterm_as_interrupt()
    stack_kind, bootstrap_servers, postgres_dsn, keep_stack = stack_args
    return with_stack(stack_kind, bootstrap_servers, postgres_dsn, keep_stack, quiet,
                      lambda stack, log: measure(stack, folder, bench_id, log))


@bench.command("scale")
@click.option("--messages", "messages_text", default="1000,10000,100000", show_default=True,
              help="Payments per run, comma-separated.")
@click.option("--shapes", "shapes_text", default="1x1,4x2,12x4", show_default=True,
              help="PARTITIONSxWORKERS per run, comma-separated.")
@click.option("--experiments", "experiments_text", default="offset-after,dedupe,eos", show_default=True,
              help="Which experiments (of offset-after, dedupe, eos).")
@click.option("--crash-rate", type=float, default=0.001, show_default=True,
              help="Share of payments that crash the worker: fixed, so crashes grow with messages.")
@child_run_options("bench-scale")
def scale(messages_text, shapes_text, experiments_text, crash_rate, seed, keep_data, out, keep_stack, quiet,
          stack_kind, bootstrap_servers, postgres_dsn):
    """How the time to a verdict grows with messages and with partitions x workers.

    Runs each experiment at each size and shape as a real `harness run`, one
    at a time, at a fixed crash rate, and writes scale.json, scale.md and
    scale.html: wall time, messages per second, restart median, peak RSS of
    the workers and of the broker per run, and a growth table (seconds per
    1,000 messages at each size) that says where growth is not linear. At
    the defaults it takes about 7 minutes on two cores.

    \b
    Examples:
      harness bench scale
      harness bench scale --messages 1000,10000 --shapes 1x1,4x2 --experiments offset-after
    """
    from ...bench.scale import ScaleOptions, parse_list, parse_shapes, run_scale
    opts = ScaleOptions(messages=parse_list(messages_text, "messages"), shapes=parse_shapes(shapes_text),
                        experiments=[e.strip() for e in experiments_text.split(",") if e.strip()],
                        crash_rate=crash_rate, seed=SEED.default if seed is None else seed,
                        keep_data=keep_data)
    opts.validate()
    data, folder = _bench_in_folder("bench-scale", out, (stack_kind, bootstrap_servers, postgres_dsn, keep_stack),
                                    quiet, lambda stack, folder, bench_id, log: run_scale(stack, opts, folder,
                                                                                          bench_id, log=log))
    if not quiet:
        for g in data["growth"]:
            click.echo(f"{g['experiment']} {g['shape']}: " + ", ".join(
                f"{v:.2f} s/1k at {int(n):,}" for n, v in g["seconds_per_1000"].items()) +
                (f" ({g['note']})" if g["note"] else ""), err=True)
    print_folder(folder)
    if data["status"] != "complete" or any(c.get("verdict") != "as-predicted" for c in data["cells"]):
        sys.exit(1)



@bench.command("streams")
@click.option("--levers", "levers_text", default=None,
              help="--streams-jvm levers to compare, comma-separated: plain, cds, aot  [default: plain,cds, and aot "
                   "when a JDK 25 is installed]")
@click.option("--repetitions", type=click.IntRange(1, 50), default=3, show_default=True,
              help="Runs per lever (levers take turns within each repetition).")
@click.option("--messages", type=int, default=1000, show_default=True,
              help="Payments per run (eos-streams' crash rate: 100 crashes at 1,000).")
@child_run_options("bench-streams")
def streams(levers_text, repetitions, messages, seed, keep_data, out, keep_stack, quiet, stack_kind,
            bootstrap_servers, postgres_dsn):
    """What a Kafka Streams restart costs, with each start-up lever on and off.

    Runs `harness run eos-streams` once per lever and repetition (levers take
    turns) and writes streams.json, streams.md and streams.html: per lever the
    restart median and 90th percentile, the run's CPU-seconds per crash, and
    where a restart's time goes (JVM start-up, the worker's set-up, Kafka
    Streams' join and producer id, the first fetch), from the workers' own
    timestamps. Levers: plain (no class cache), cds (a class-data archive),
    aot (a JDK 25's AOT cache). At the defaults about 5 minutes on two cores.

    \b
    Examples:
      harness bench streams
      harness bench streams --levers cds,aot --repetitions 5
    """
    from ...bench.streams import StreamsBenchOptions, run_streams_bench
    from ...experiments.streams_jvm import aot_java
    levers = [x.strip() for x in levers_text.split(",") if x.strip()] if levers_text is not None else \
        ["plain", "cds"] + (["aot"] if aot_java() else [])
    opts = StreamsBenchOptions(levers=levers, repetitions=repetitions, messages=messages,
                               seed=SEED.default if seed is None else seed, keep_data=keep_data)
    opts.validate()
    if "aot" in levers and not aot_java():
        from ...core.errors import HarnessError
        raise HarnessError("--levers aot needs a JDK 25 or later installed (under /usr/lib/jvm or JAVA_HOME)")
    from ...bench.common import seconds
    data, folder = _child_bench("bench-streams", opts, run_streams_bench, out,
                                (stack_kind, bootstrap_servers, postgres_dsn, keep_stack), quiet)
    _finish(data, folder, [] if quiet else [
        f"{s['lever']}: restart median {seconds(s['restart_median_seconds'])} "
        f"(p90 {seconds(s['restart_p90_seconds'])}), "
        f"{'unknown' if s['cpu_seconds_per_crash'] is None else s['cpu_seconds_per_crash']} CPU-s per crash"
        for s in data["summary"]])


@bench.command("protocols")
@click.option("--protocols", "rows_text", default=None,
              help="The rows, comma-separated: classic, consumer, streams-classic, streams  [default: all four]")
@click.option("--repetitions", type=click.IntRange(1, 50), default=3, show_default=True,
              help="Runs per row (the rows take turns within each repetition).")
@click.option("--messages", type=int, default=400, show_default=True, help="Payments per run.")
@click.option("--crash-rate", type=float, default=0.01, show_default=True, help="Share of payments that crash a worker.")
@child_run_options("bench-protocols")
def protocols(rows_text, repetitions, messages, crash_rate, seed, keep_data, out, keep_stack, quiet, stack_kind,
              bootstrap_servers, postgres_dsn):
    """Restart and group-stall medians per group protocol, a row each, with the client's settings named.

    Runs, two workers on two partitions each, offset-after as members of a
    classic group and of a KIP-848 consumer group, and eos-streams with Kafka
    Streams' classic and streams (KIP-1071) protocols, as real `harness run`s
    (rows take turns), and writes protocols.json, protocols.md and
    protocols.html: per row the restart median (a death to the replacement's
    first record) and the group-stall median (a death to the first record
    processed on the dead member's partition by anyone). A protocol the
    cluster lacks fails its row with the run's own one-line refusal.

    \b
    Examples:
      harness bench protocols
      harness bench protocols --protocols streams-classic,streams --repetitions 5
    """
    from ...bench.common import seconds
    from ...bench.protocols import ProtocolBenchOptions, parse_rows, run_protocol_bench
    opts = ProtocolBenchOptions(rows=parse_rows(rows_text), repetitions=repetitions, messages=messages,
                                crash_rate=crash_rate, seed=SEED.default if seed is None else seed, keep_data=keep_data)
    data, folder = _child_bench("bench-protocols", opts, run_protocol_bench, out,
                                (stack_kind, bootstrap_servers, postgres_dsn, keep_stack), quiet)
    _finish(data, folder, [] if quiet else [
        f"{s['row']}: restart median {seconds(s['restart_median_seconds'])}, group stall median "
        f"{seconds(s['stall_median_seconds'])} ({s['client_settings']})" for s in data["summary"]])


def _child_bench(name: str, opts, run, out, stack_args: tuple, quiet: bool):
    """A bench of child runs, its options checked: run(stack, opts, folder, bench_id, log=log) in its folder."""
    opts.validate()
    return _bench_in_folder(name, out, stack_args, quiet,
                            lambda stack, folder, bench_id, log: run(stack, opts, folder, bench_id, log=log))


def _finish(data: dict, folder, lines: list[str]) -> None:
    """A bench of child runs ends: its summary lines on stderr, the folder on stdout, and exit 1 unless it
    completed with every run as-predicted."""
    for line in lines:
        click.echo(line, err=True)
    print_folder(folder)
    if data["status"] != "complete" or any(c.get("verdict") != "as-predicted" for c in data["cells"]):
        sys.exit(1)
