"""Run orchestration: a run's parameters, one run end to end, the suite, the matrix, experiment files, clean.

The layer above the workers, faults, checker and reporting: it resolves a run's options into
parameters, drives workload -> workers and faults -> observe -> decide -> report, runs a suite of runs
side by side or one suite per Kafka release, reads experiment files (TOML) into a run's parameters,
and plans `harness clean`. The command line and the Python API stand on it.
"""
