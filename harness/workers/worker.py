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

import json
import sys


def parse(argv=None):
    """The worker's arguments, as the launcher encoded them (runtime/worker_args.py)."""
    from ..runtime.worker_args import decode
    return decode(sys.argv[1:] if argv is None else argv)


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
