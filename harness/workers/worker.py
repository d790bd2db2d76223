"""The worker process: `python -m harness.workers.worker --experiment NAME ...`.

Started, restarted and killed only by the supervisor. Its command line
contains both `harness` and `worker`, so leftovers are easy to find with ps.
It dies with its parent (PR_SET_PDEATHSIG), reads the Postgres DSN from the
environment (never from argv, which `ps` shows), and exits 0 once every
record of its partitions is processed and committed.

With `--standby` it is a warm spare: it imports its libraries and connects to
Kafka and Postgres, then waits for one line on stdin (its real command line,
as a JSON array) before it reads the crash log, fetches committed offsets and
starts (an experiment may prepare more: the eos family connects its producer).
The supervisor keeps one spare per slot, so a killed worker's successor finds
its connections open.

With `--role NAME` it runs that role of the experiment (a service, a relay, a
downstream consumer); `--after` names the worker slots whose `done` it waits
for before it may finish.
"""

import argparse
import json
import sys

def parse(argv=None):
    ap = argparse.ArgumentParser(prog="harness-worker")
    ap.add_argument("--experiment", required=True)
    ap.add_argument("--worker", required=True)
    ap.add_argument("--attempt", type=int, default=1)
    ap.add_argument("--bootstrap", required=True)
    ap.add_argument("--group", required=True)
    ap.add_argument("--input-topic", required=True)
    ap.add_argument("--output-topic")
    ap.add_argument("--partitions", type=lambda s: [int(x) for x in s.split(",") if x], required=True)
    ap.add_argument("--ledger")
    ap.add_argument("--dedupe")
    ap.add_argument("--rejects")
    ap.add_argument("--commit-every", type=int, default=1)
    ap.add_argument("--crash-plan")
    ap.add_argument("--crash-log", required=True)
    ap.add_argument("--events", required=True)
    ap.add_argument("--history", help="the folder of the run's histories (runtime/history.py)")
    ap.add_argument("--isolation", default="read_committed")
    ap.add_argument("--transactional-id")
    ap.add_argument("--delivery-log", help="the producer under test: append each delivery report here")
    ap.add_argument("--option", action="append", default=[], metavar="NAME=JSON",
                    help="a run option the experiment declared for its workers (harness/core/options.py)")
    ap.add_argument("--accounts")
    ap.add_argument("--variant", default="")
    ap.add_argument("--role")
    ap.add_argument("--after", type=lambda s: [x for x in s.split(",") if x], default=[])
    ap.add_argument("--rows")
    ap.add_argument("--outbox")
    ap.add_argument("--events-topic")
    return ap.parse_args(argv)


def main(argv=None) -> int:
    import faulthandler
    import signal
    from ..core.procs import die_with_parent
    die_with_parent()
    # A run that stops with this worker still busy (its time limit, a node that never came back) asks it for
    # its threads' stacks before the SIGKILL: its log then says where it stood.
    faulthandler.register(signal.SIGUSR1, all_threads=True)
    argv = sys.argv[1:] if argv is None else argv
    standby = "--standby" in argv
    args = parse([a for a in argv if a != "--standby"])
    from ..runtime.context import WorkerContext
    from ..experiments import REGISTRY
    exp = REGISTRY[args.experiment].with_variant(args.variant)
    role = exp.role(args.role)
    ctx = WorkerContext(args, exp.consumer)
    if standby:
        ctx.warm_up()
        if exp.warm_up:
            exp.warm_up(ctx)
        line = sys.stdin.readline()
        if not line.strip():
            return 0                     # the supervisor closed our stdin: not needed after all
        full = json.loads(line)                   # the whole command line of this attempt
        args = parse(full[full.index("harness.workers.worker") + 1:])
        ctx.activate(args)
    (role.loop if role else exp.loop)(ctx)
    ctx.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
