"""The worker runtime: what every experiment's loop runs on inside a worker process.

`context.py` holds what every loop shares (consumer, Postgres, kill switch,
events), with `group.py` (membership of the run's consumer group),
`evidence.py` (the events file and the kill switch's crash record) and
`kafka_calls.py` (request timeouts and retries); `crashplan.py` and
`crashlog.py` are the files a run's faults and workers share (which payments
crash where, and what each crash left undone). The loops themselves, with
their steps and kill points, are declared with their experiments in
harness/experiments/; the processes they run in are harness/workers/.
"""
