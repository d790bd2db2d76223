"""Audits that judge a run from what is durable: Postgres rows, Kafka records, the crash log.

The checker is the middle of a run's pipeline: it observes (audit.py),
predicts from the crash log (predict.py and the predictors), judges
(verdict.py) and hands the report an Outcome (run_outcome.py). It reads the
experiments, the faults and the supervisor's result as plain data and imports
none of them. Checkers return results; they never raise on odd data (an empty
table, a missing topic, no crash at all, a record that is not JSON).
"""
