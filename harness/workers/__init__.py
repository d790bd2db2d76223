"""The worker processes: their entry point, the fork server they start from, and their supervisor.

`worker.py` is `python -m harness.workers.worker`, the process every Python
worker is; `forkserver.py` forks each one from a warm interpreter, so a
restart costs a fork; `supervisor.py` starts, restarts and kills the run's
workers, ticks the faults and keeps a warm spare per slot. What runs inside a
worker (consumer, Postgres, kill switch) is the runtime (harness/runtime/); what
breaks them is the faults (harness/faults/).
"""
