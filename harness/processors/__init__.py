"""The worker process runtime: what every experiment's loop runs inside.

`worker.py` is the process entry point; `context.py` holds what every loop
shares (consumer, Postgres, kill switch, events), with `group.py` (membership
of the run's consumer group), `evidence.py` (the events file and the kill
switch's crash record) and `kafka_calls.py` (request timeouts and retries).
The loops themselves, with their steps and kill points, are declared with
their experiments in harness/experiments/, so the whole story of an
experiment is one module.
"""
