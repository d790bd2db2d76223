"""Shared infrastructure: what every layer above may use, knowing neither Kafka nor PostgreSQL.

The bottom layer. One error type and its one-line message, processes that die with their parent, files
written without following anyone's link, a run's folder claimed once, text escaped for every rendering,
passwords masked, where the state lives, the files shipped beside the code, what a run option is, and
how many suite runs the machine can take. Nothing here imports another harness package, so any of
them can stand on it.
"""
