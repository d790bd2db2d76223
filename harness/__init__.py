"""Crash-test harness for message delivery semantics on real Kafka and PostgreSQL.

A network cannot deliver a message exactly once; a system can apply its effect
exactly once. This package runs the experiments that show both claims on a real
broker and a real database (see README.md).
"""

__version__ = "0.1.0"
