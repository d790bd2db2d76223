"""Audits that judge a run from what is durable: Postgres rows, Kafka records, the crash log.

Checkers return results; they never raise on odd data (an empty table, a
missing topic, no crash at all, a record that is not JSON).
"""
